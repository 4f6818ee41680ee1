//! The dashboard's sessions: after a sign-in, the cookie holds a session,
//! never the token. A session is `<id>.<expiry>.<access>.<mac>`: a random
//! id, its end (Unix seconds, checked here as well as by the browser's
//! Max-Age), `f` (full) or `r` (read-only), and an HMAC-SHA256 of the rest.
//!
//! The MAC's key is derived from a base key and both tokens, so a session
//! dies when a token changes. The base key is `http_session_secret` when set
//! (sessions then outlive a restart and are shared by servers with the same
//! file), else 32 random bytes made at start. Ending sessions without
//! changing a token: sign-out ends its own at once (its id is kept here,
//! refused, until it would have expired); a restart ends all of them, or, with
//! `http_session_secret`, a new secret does.

use crate::http::access::{same, Access};
use crate::http::settings::HttpSettings;
use hmac::{KeyInit, Mac};
use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// Signed-out sessions remembered, at most (each until its expiry).
const MAX_REVOKED: usize = 10_000;

/// The sessions' key and what was revoked.
pub struct Sessions {
    key: [u8; 32],
    lifetime: Duration,
    /// Signed-out ids and when they would have expired.
    revoked: Mutex<HashMap<String, u64>>,
}

/// What a cookie's session is.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Valid(Access),
    /// Genuine, but past its end or signed out.
    Ended,
    /// Not one we made: a guess, a change, or the old raw-token cookie.
    Forged,
}

impl Sessions {
    pub fn new(settings: &HttpSettings) -> Result<Sessions, String> {
        let mut base = [0u8; 32];
        match &settings.session_secret {
            Some(secret) => base = mac_of(b"delayer-session-secret", &[secret.as_bytes()]),
            None => getrandom::fill(&mut base).map_err(|e| format!("http: cannot make a session key: {e}"))?,
        }
        let token = settings.token.as_ref().map_or(&[][..], |t| t.as_bytes());
        let read = settings.read_token.as_ref().map_or(&[][..], |t| t.as_bytes());
        let key = mac_of(&base, &[b"delayer-session-v1", token, read]);
        Ok(Sessions { key, lifetime: settings.session_lifetime, revoked: Mutex::default() })
    }

    /// How long a new session lasts.
    pub fn lifetime(&self) -> Duration {
        self.lifetime
    }

    /// A new session with `access`, as the cookie's value.
    pub fn issue(&self, access: Access) -> Result<String, String> {
        let mut id = [0u8; 16];
        getrandom::fill(&mut id).map_err(|e| format!("cannot make a session id: {e}"))?;
        let payload = format!("{}.{}.{}", hex(&id), now() + self.lifetime.as_secs(), letter(access));
        let mac = hex(&mac_of(&self.key, &[payload.as_bytes()]));
        Ok(format!("{payload}.{mac}"))
    }

    pub fn verify(&self, value: &str) -> Verdict {
        self.verify_at(value, now())
    }

    fn verify_at(&self, value: &str, now: u64) -> Verdict {
        let Some((payload, mac)) = value.rsplit_once('.') else { return Verdict::Forged };
        let expected = hex(&mac_of(&self.key, &[payload.as_bytes()]));
        if !same(mac.as_bytes(), expected.as_bytes()) {
            return Verdict::Forged;
        }
        let mut fields = payload.split('.');
        let (Some(id), Some(expiry), Some(access), None) = (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Verdict::Forged;
        };
        let access = match access {
            "f" => Access::Full,
            "r" => Access::Read,
            _ => return Verdict::Forged,
        };
        let Ok(expiry) = expiry.parse::<u64>() else { return Verdict::Forged };
        if expiry <= now || self.lock().contains_key(id) {
            return Verdict::Ended;
        }
        Verdict::Valid(access)
    }

    /// Ends the session of `value`, if it is one of ours.
    pub fn revoke(&self, value: &str) {
        if !matches!(self.verify(value), Verdict::Valid(_)) {
            return;
        }
        let mut fields = value.split('.');
        let (Some(id), Some(expiry)) = (fields.next(), fields.next().and_then(|e| e.parse::<u64>().ok())) else {
            return;
        };
        let now = now();
        let mut revoked = self.lock();
        if revoked.len() >= MAX_REVOKED {
            revoked.retain(|_, end| *end > now);
        }
        if revoked.len() >= MAX_REVOKED {
            // Full of live sessions signed out: forget the one ending first.
            if let Some(first) = revoked.iter().min_by_key(|(_, end)| **end).map(|(id, _)| id.clone()) {
                revoked.remove(&first);
            }
        }
        revoked.insert(id.to_string(), expiry);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, u64>> {
        self.revoked.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn letter(access: Access) -> &'static str {
    if access == Access::Full {
        "f"
    } else {
        "r"
    }
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// HMAC-SHA256 of `parts`, each followed by a 0 byte (so no two lists of
/// parts read the same).
fn mac_of(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let Ok(mut mac) = <HmacSha256 as KeyInit>::new_from_slice(key) else { return [0; 32] };
    for part in parts {
        mac.update(part);
        mac.update(&[0]);
    }
    mac.finalize().into_bytes().into()
}

fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use delayer_protocol::conf::ConfFile;

    fn sessions(extra: &str) -> Sessions {
        let text = format!("[delayer]\nhttp_addr = 127.0.0.1:1\nhttp_token = full-token-0123456789\n{extra}");
        let file = ConfFile::parse("/d/delayer.conf".into(), &text).expect("parses");
        let settings = HttpSettings::from_file(&file).expect("valid").expect("on");
        Sessions::new(&settings).expect("key")
    }

    #[test]
    fn a_session_is_signed_ends_and_keeps_its_access() {
        let s = sessions("");
        let full = s.issue(Access::Full).expect("issued");
        let read = s.issue(Access::Read).expect("issued");
        assert!(!full.contains("full-token"));
        assert_eq!((s.verify(&full), s.verify(&read)), (Verdict::Valid(Access::Full), Verdict::Valid(Access::Read)));
        // Changing the access letter (or anything) breaks the MAC.
        assert_eq!(s.verify(&read.replacen(".r.", ".f.", 1)), Verdict::Forged);
        assert_eq!(s.verify("full-token-0123456789"), Verdict::Forged);
        assert_eq!(s.verify(""), Verdict::Forged);
        // Past its end, refused here whatever the browser kept.
        assert_eq!(s.verify_at(&full, now() + s.lifetime().as_secs() + 1), Verdict::Ended);
        // Signed out: refused at once.
        s.revoke(&full);
        assert_eq!(s.verify(&full), Verdict::Ended);
        assert_eq!(s.verify(&read), Verdict::Valid(Access::Read));
    }

    #[test]
    fn the_key_follows_the_secret_and_the_tokens() {
        let secret = "http_session_secret = a-session-secret-0123456\n";
        let (a, b) = (sessions(secret), sessions(secret));
        let value = a.issue(Access::Full).expect("issued");
        assert_eq!(b.verify(&value), Verdict::Valid(Access::Full), "same secret: sessions survive a restart");
        assert_eq!(sessions("").verify(&value), Verdict::Forged, "no secret: a key of the process");
        let other = sessions("http_session_secret = another-secret-0123456\n");
        assert_eq!(other.verify(&value), Verdict::Forged);
    }
}
