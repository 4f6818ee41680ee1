//! The `[webhook.<topic>]` sections of `delayer.conf`: which topics
//! `delayer webhook` delivers, where, and with which secret.
//!
//! Read from the same file as the server's settings (Redis, key prefix,
//! logs); the shared reader (`delayer::conf`) has already refused unknown
//! keys, so this checks values only, and each error names the file, the
//! section, the key and the line. Durations are whole seconds, as
//! `[redis] idle_timeout` is.

use super::sign::Signer;
use crate::config::ranged;
use delayer::conf::{webhook_topic, ConfError, ConfFile};
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
    let secret = file
        .get(section, "secret")
        .ok_or_else(|| error(None, "secret is required: the key each request is signed with (X-Delayer-Signature)"))?;
    if secret.is_empty() {
        return Err(error(Some("secret"), "must not be empty: every request is signed with it"));
    }
    let signer = Signer::new(secret.as_bytes()).map_err(|why| error(Some("secret"), &why))?;
    let seconds = |key: &str, min: u64| -> Result<Option<Duration>, ConfError> {
        Ok(ranged(file, section, key, min, MAX_SECONDS, "seconds")?.map(Duration::from_secs))
    };
    let timeout = seconds("timeout", 1)?.unwrap_or(DEFAULT_TIMEOUT);
    let concurrency = ranged(file, section, "concurrency", 1, MAX_CONCURRENCY, "deliveries")?
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

    #[test]
    fn an_empty_section_is_not_skipped() {
        let e = parse("[webhook.t]\n").expect_err("empty");
        assert!(e.to_string().contains("url is required"), "{e}");
    }
}
