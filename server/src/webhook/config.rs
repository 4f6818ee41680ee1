//! The `[webhook.<topic>]` sections of `delayer.conf`: which topics
//! `delayer webhook` delivers, where, and with which secret.
//!
//! Read from the same file as the server's settings (Redis, key prefix,
//! logs); the shared reader (`delayer_protocol::conf`) has already refused unknown
//! keys, so this checks values only, and each error names the file, the
//! section, the key and the line. Durations are whole seconds, as
//! `[redis] idle_timeout` is.

use super::sign::Signer;
use delayer_protocol::conf::{webhook_topic, ConfError, ConfFile};
use reqwest::Url;
use std::time::Duration;

/// Longest `timeout` and `ttr`: a day.
const MAX_SECONDS: u64 = 86_400;
/// Most deliveries in flight per topic.
const MAX_CONCURRENCY: u64 = 1000;
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
const DEFAULT_CONCURRENCY: usize = 4;
/// A default `ttr` is the timeout plus this: room to record the outcome.
const TTR_MARGIN: Duration = Duration::from_secs(30);

/// One topic's delivery settings.
#[derive(Debug, Clone)]
pub struct Hook {
    pub topic: String,
    /// Where to POST: http:// or https://.
    pub url: Url,
    /// Signs each request with the section's `secret` (which it does not show).
    pub signer: Signer,
    /// Longest wait for an answer, connecting included.
    pub timeout: Duration,
    /// Deliveries in flight at once.
    pub concurrency: usize,
    /// How long a job stays reserved per attempt: longer than `timeout`, so
    /// no other webhook process delivers it again while this one waits.
    pub ttr: Duration,
}

impl Hook {
    /// The URL for log lines: without user name, password or query, which
    /// may hold credentials.
    pub fn target(&self) -> String {
        let mut shown = self.url.clone();
        let _ = shown.set_username("");
        let _ = shown.set_password(None);
        shown.set_query(None);
        shown.set_fragment(None);
        shown.to_string()
    }
}

/// Every `[webhook.<topic>]` section of `file`, in file order; at least one.
pub fn hooks(file: &ConfFile) -> Result<Vec<Hook>, ConfError> {
    let mut hooks = Vec::new();
    for section in file.sections() {
        if let Some(topic) = webhook_topic(section) {
            hooks.push(hook(file, section, topic)?);
        }
    }
    if hooks.is_empty() {
        return Err(file.error(
            None,
            None,
            "no [webhook.<topic>] section: delayer webhook needs one per topic it delivers, with url and secret",
        ));
    }
    Ok(hooks)
}

fn hook(file: &ConfFile, section: &str, topic: &str) -> Result<Hook, ConfError> {
    let error = |key: Option<&str>, message: &str| file.error(Some(section), key, message);
    let raw_url = file.string(section, "url").ok_or_else(|| {
        error(file.get(section, "url").map(|_| "url"), "url is required: the http:// or https:// address to POST to")
    })?;
    let url = Url::parse(&raw_url)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some_and(|h| !h.is_empty()))
        // Not echoed: a URL may hold a password or a token.
        .ok_or_else(|| error(Some("url"), "not an http:// or https:// URL with a host"))?;
    let (secret, key) = secret(file, section)?;
    if secret.is_empty() {
        return Err(error(Some(key), "must not be empty: every request is signed with it"));
    }
    let signer = Signer::new(secret.as_bytes()).map_err(|why| error(Some(key), &why))?;
    let seconds = |key: &str, min: u64| -> Result<Option<Duration>, ConfError> {
        Ok(file.ranged(section, key, min, MAX_SECONDS, "seconds")?.map(Duration::from_secs))
    };
    let timeout = seconds("timeout", 1)?.unwrap_or(DEFAULT_TIMEOUT);
    let concurrency = file
        .ranged(section, "concurrency", 1, MAX_CONCURRENCY, "deliveries")?
        .map_or(DEFAULT_CONCURRENCY, |n| n as usize);
    let ttr = match seconds("ttr", 1)? {
        Some(ttr) if ttr <= timeout => {
            return Err(error(
                Some("ttr"),
                &format!(
                    "{} s is not longer than timeout ({} s): a job must stay reserved while its delivery waits",
                    ttr.as_secs(),
                    timeout.as_secs()
                ),
            ))
        }
        Some(ttr) => ttr,
        None => timeout + TTR_MARGIN,
    };
    Ok(Hook { topic: topic.to_string(), url, signer, timeout, concurrency, ttr })
}

/// The section's `secret`, or what the file `secret_file` names holds (a
/// mounted secret; trailing newlines dropped, as `DELAYER_*_FILE` does);
/// with the key it came from. Never both; never echoed.
fn secret<'a>(file: &ConfFile, section: &str) -> Result<(String, &'a str), ConfError> {
    let error = |key: Option<&str>, message: &str| file.error(Some(section), key, message);
    match (file.get(section, "secret"), file.path_value(section, "secret_file")) {
        (Some(_), Some(_)) => Err(error(Some("secret_file"), "set secret or secret_file, not both")),
        (Some(secret), None) => Ok((secret.to_string(), "secret")),
        (None, Some(path)) => {
            let text =
                delayer_protocol::conf::env::read_value(&path).map_err(|why| error(Some("secret_file"), &why))?;
            Ok((text, "secret_file"))
        }
        (None, None) => Err(error(
            file.get(section, "secret_file").map(|_| "secret_file"),
            "secret is required (or secret_file): the key each request is signed with (X-Delayer-Signature)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn parse(text: &str) -> Result<Vec<Hook>, ConfError> {
        hooks(&ConfFile::parse(PathBuf::from("/etc/d/delayer.conf"), text)?)
    }

    #[test]
    fn sections_are_read_with_defaults() {
        let found = parse(
            "[redis]\nport = 6379\n\n[webhook.close order]\nurl = https://u:p@example.com/hooks/close?token=t\nsecret = s3cr3t\n\n[webhook.sms]\nurl = http://127.0.0.1:8080/sms\nsecret = \"; quoted\"\ntimeout = 3\nconcurrency = 20\nttr = 10\n",
        )
        .expect("valid");
        assert_eq!(found.len(), 2);
        let (close, sms) = (&found[0], &found[1]);
        assert_eq!(close.topic, "close order");
        assert_eq!(
            (close.timeout, close.concurrency, close.ttr),
            (Duration::from_secs(10), 4, Duration::from_secs(40))
        );
        assert_eq!(close.target(), "https://example.com/hooks/close");
        assert_eq!(sms.topic, "sms");
        assert_eq!((sms.timeout, sms.concurrency, sms.ttr), (Duration::from_secs(3), 20, Duration::from_secs(10)));
        assert!(!format!("{close:?}").contains("s3cr3t"), "{close:?}");
    }

    #[test]
    fn bad_values_name_file_section_key_and_line() {
        let at = |text: &str| {
            let e = parse(text).expect_err("refused");
            let text = e.to_string();
            (e.section, e.key, e.line, text)
        };
        let (section, key, line, text) = at("[webhook.t]\nurl = ftp://example.com/\nsecret = s\n");
        assert_eq!((section.as_deref(), key.as_deref(), line), (Some("webhook.t"), Some("url"), Some(2)));
        assert_eq!(text, "/etc/d/delayer.conf:2: [webhook.t] url: not an http:// or https:// URL with a host");
        let (_, key, line, _) = at("[webhook.t]\nurl = example.com/hook\nsecret = s\n");
        assert_eq!((key.as_deref(), line), (Some("url"), Some(2)));
        let (section, key, line, text) = at("[webhook.t]\nsecret = s\n");
        assert_eq!((section.as_deref(), key, line), (Some("webhook.t"), None, Some(1)));
        assert!(text.contains("url is required"), "{text}");
        let (_, key, line, text) = at("[webhook.t]\nurl = http://h/\n");
        assert_eq!((key, line), (None, Some(1)));
        assert!(text.contains("secret is required"), "{text}");
        let (_, key, line, _) = at("[webhook.t]\nurl = http://h/\nsecret =\n");
        assert_eq!((key.as_deref(), line), (Some("secret"), Some(3)));
        let (_, key, line, text) = at("[webhook.t]\nurl = http://h/\nsecret = s\ntimeout = 0\n");
        assert_eq!((key.as_deref(), line), (Some("timeout"), Some(4)));
        assert!(text.contains("out of range"), "{text}");
        let (_, key, _, _) = at("[webhook.t]\nurl = http://h/\nsecret = s\nconcurrency = many\n");
        assert_eq!(key.as_deref(), Some("concurrency"));
        let (_, key, line, text) = at("[webhook.t]\nurl = http://h/\nsecret = s\ntimeout = 30\nttr = 30\n");
        assert_eq!((key.as_deref(), line), (Some("ttr"), Some(5)));
        assert!(text.contains("not longer than timeout"), "{text}");
        let (section, _, _, text) = at("[redis]\nport = 6379\n");
        assert_eq!(section, None);
        assert!(text.contains("no [webhook.<topic>] section"), "{text}");
    }

    /// `secret_file` names a file holding the secret (relative to the
    /// configuration file), read once, its trailing newline dropped; never
    /// beside `secret`, and an unreadable one names the path, not contents.
    #[test]
    fn the_secret_can_come_from_a_file() {
        let dir = std::env::temp_dir().join(format!("delayer-hook-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("hook.secret"), "from-a-file\n").expect("write");
        let read = |text: &str| hooks(&ConfFile::parse(dir.join("delayer.conf"), text).expect("parses"));
        let found = read("[webhook.t]\nurl = http://h/\nsecret_file = hook.secret\n").expect("valid");
        let expected = Signer::new(b"from-a-file").expect("signer").sign(1, b"x");
        assert_eq!(found[0].signer.sign(1, b"x"), expected);
        let e = read("[webhook.t]\nurl = http://h/\nsecret = s\nsecret_file = hook.secret\n").expect_err("both");
        assert_eq!((e.key.as_deref(), e.line), (Some("secret_file"), Some(4)));
        assert!(e.to_string().ends_with("set secret or secret_file, not both"), "{e}");
        let e = read("[webhook.t]\nurl = http://h/\nsecret_file = missing\n").expect_err("unreadable");
        assert!(e.to_string().contains(&format!("cannot read {}", dir.join("missing").display())), "{e}");
        std::fs::write(dir.join("empty.secret"), "\n").expect("write");
        let e = read("[webhook.t]\nurl = http://h/\nsecret_file = empty.secret\n").expect_err("empty");
        assert!(e.to_string().contains("secret_file: must not be empty"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_empty_section_is_not_skipped() {
        let e = parse("[webhook.t]\n").expect_err("empty");
        assert!(e.to_string().contains("url is required"), "{e}");
    }
}
