//! Keys of the wrong type the movers met: each is logged once while it
//! stays bad (not once per tick), checked again (TYPE) at most once a
//! second, and logged again when it is fixed, so that the mover looks
//! again at what it held for it (PROTOCOL.md, "Operations": the scripts'
//! guards hold only the jobs that need a bad key, and report it).
//!
//! Everything else about a bad key is the scripts' (what they hold, skip or
//! park) and `delayer stats`'s (which checks the types of the keys it reads).

use crate::scripts::BadKey;
use crate::telemetry;
use delayer_protocol::connection::{Batch, Conn};
use log::{info, warn};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The most keys remembered: past it a new bad key is still logged, but not
/// watched for its fix (the movers' periodic look from the pool's head, or a
/// sweep, still finds it fixed).
const MOST: usize = 1000;
/// How often the remembered keys' types are read again.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// The keys of the wrong type known to one mover.
#[derive(Default)]
pub struct BadKeys {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    known: BTreeMap<String, BadKey>,
    checked: Option<Instant>,
}

impl BadKeys {
    /// Notes the keys a script reply names; each new one is logged with
    /// `effect(key)`: what is held or skipped for it.
    pub fn met(&self, keys: &[BadKey], effect: impl Fn(&BadKey) -> String) {
        if keys.is_empty() {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        for bad in keys {
            if state.known.contains_key(&bad.key) {
                continue;
            }
            let expected = match bad.expected.as_str() {
                "integers" => "hash of integer counts".to_string(),
                other => format!("{} (or no key)", with_article(other)),
            };
            warn!(
                "key {:?} holds {}, not {expected}: {}; fix it (delete it, say) and this resumes by itself",
                bad.key,
                with_article(&bad.kind),
                effect(bad)
            );
            if state.known.len() < MOST {
                state.known.insert(bad.key.clone(), bad.clone());
            }
        }
        telemetry::bad_keys(state.known.len());
    }

    /// Reads the known keys' types again (at most once per `CHECK_EVERY`)
    /// and returns those that are fixed now, each logged.
    pub fn fixed(&self, conn: &mut Conn) -> redis::RedisResult<Vec<BadKey>> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.known.is_empty() || state.checked.is_some_and(|at| at.elapsed() < CHECK_EVERY) {
            return Ok(Vec::new());
        }
        state.checked = Some(Instant::now());
        let mut read = Batch::new();
        for key in state.known.keys() {
            read.add(redis::cmd("TYPE").arg(key).clone());
        }
        let kinds: Vec<String> = read.query(conn)?;
        let mut fixed = Vec::new();
        let names: Vec<String> = state.known.keys().cloned().collect();
        for (key, kind) in names.into_iter().zip(kinds) {
            let Some(bad) = state.known.get(&key) else { continue };
            // A count hash with a field that is not an integer stays bad
            // while it is a hash: the next script call says again if so.
            let right = kind == "none" || kind == bad.expected || (bad.expected == "integers" && kind == "hash");
            if right {
                info!("key {key:?} is {} now: what waited for it goes on", with_article(&kind));
                if let Some(bad) = state.known.remove(&key) {
                    fixed.push(bad);
                }
            }
        }
        telemetry::bad_keys(state.known.len());
        Ok(fixed)
    }
}

/// "a list", "an integer", "no key" (TYPE's "none").
fn with_article(kind: &str) -> String {
    match kind {
        "none" => "no key".into(),
        k if k.starts_with(['a', 'e', 'i', 'o', 'u']) => format!("an {k}"),
        k => format!("a {k}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_read_as_people_say_them() {
        assert_eq!(with_article("list"), "a list");
        assert_eq!(with_article("hash"), "a hash");
        assert_eq!(with_article("none"), "no key");
        assert_eq!(with_article("zset"), "a zset");
    }
}
