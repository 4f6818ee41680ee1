//! The one rule for what a `delayer.conf` may hold: known sections and keys,
//! `[webhook.<topic>]` sections, and Delayer 1.x keys let through unused. It
//! is here, apart from reading the file, because every reader (the server
//! and each SDK) must refuse and suggest alike; the conformance suite
//! compares the messages.

use super::file::{ConfError, ConfFile};
use std::fmt;
use std::path::PathBuf;

/// Every key a `delayer.conf` may hold, per section: Delayer 1.x's keys and
/// ours. The server uses them all; a client reads the ones it needs and
/// accepts the others, so one file serves both.
pub const KNOWN_KEYS: [(&str, &[&str]); 2] = [
    (
        "delayer",
        &[
            "pid",
            "timer_interval",
            "access_log",
            "error_log",
            "batch_size",
            "key_prefix",
            "layout",
            "log_level",
            "log_format",
            "metrics_addr",
            "http_addr",
            "http_token",
            "http_read_token",
            "http_allow_remote",
            "http_allowed_hosts",
            "http_trusted_proxies",
            "http_session_secret",
            "http_session_lifetime",
            "http_max_connections",
            "http_header_timeout",
            "http_body_timeout",
            "http_redis_timeout",
            "http_max_waiting",
            "metrics_allow_remote",
        ],
    ),
    (
        "redis",
        &[
            "url",
            "host",
            "port",
            "database",
            "username",
            "password",
            "tls_ca_file",
            "tls_cert_file",
            "tls_key_file",
            "max_idle",
            "max_active",
            "idle_timeout",
            "conn_max_lifetime",
            "mode",
            "nodes",
            "master_name",
            "sentinel_username",
            "sentinel_password",
            "tls",
            "require_noeviction",
        ],
    ),
];

/// The keys of a `[webhook.<topic>]` section (one per topic that
/// `delayer webhook` delivers over HTTP). Every reader accepts such sections
/// so one file serves all; only the webhook process reads them.
pub const WEBHOOK_KEYS: &[&str] = &["url", "secret", "secret_file", "timeout", "concurrency", "ttr"];

/// The topic a `[webhook.<topic>]` section is for, when `section` is one.
pub fn webhook_topic(section: &str) -> Option<&str> {
    section.strip_prefix("webhook.").filter(|topic| !topic.is_empty())
}

/// Sections and keys that a Delayer 1.x release wrote in its `delayer.conf`
/// and this version does not use: (section, key or `None` for every key of
/// the section, why). They are accepted, so a 1.x file works unchanged, and
/// reported ([`Ignored`]) instead of silently dropped. Every other 1.x key is
/// in [`KNOWN_KEYS`] with its 1.x meaning.
pub const IGNORED_1X: [(&str, Option<&str>, &str); 2] = [
    // The first 1.0 layout (mix-basic/delayer, pkg/config): [delayerd]
    // interval, access_log, error_log. Later releases renamed it [delayer].
    ("delayerd", None, "Delayer 1.x's early section, not used; [delayer] sets the server (interval is timer_interval)"),
    // The same layout's Redis command timeout.
    ("redis", Some("timeout"), "Delayer 1.x's command timeout, not used"),
];

/// A Delayer 1.x key that [`reject_unknown`] let through unused
/// ([`IGNORED_1X`]); shown as
/// `delayer.conf:11: [redis] timeout: ignored: Delayer 1.x's command timeout, not used`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ignored {
    /// The file.
    pub file: PathBuf,
    /// The section.
    pub section: String,
    /// The key.
    pub key: String,
    /// The line (from 1), when known.
    pub line: Option<usize>,
    /// Why it is not used.
    pub note: &'static str,
}

impl fmt::Display for Ignored {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        write!(f, ": [{}] {}: ignored: {}", self.section, self.key, self.note)
    }
}

/// Refuses a key outside a section, an unknown section and an unknown key,
/// naming the file, line, section and key, the closest known name when one
/// is close, and what is allowed there:
/// `delayer.conf:3: [redis] prot: unknown key (did you mean port?); [redis] takes url, host, ...`.
/// Returns the Delayer 1.x keys it let through unused ([`IGNORED_1X`]), in
/// file order, for the caller to report.
pub fn reject_unknown(file: &ConfFile) -> Result<Vec<Ignored>, ConfError> {
    let mut ignored = Vec::new();
    for (section, key) in file.entries() {
        let Some(section) = section else {
            return Err(file.error(None, Some(key), "keys must be inside a [delayer] or [redis] section"));
        };
        if let Some(&(_, _, note)) = IGNORED_1X.iter().find(|(s, k, _)| *s == section && k.is_none_or(|k| k == key)) {
            ignored.push(Ignored {
                file: file.path().to_path_buf(),
                section: section.to_string(),
                key: key.to_string(),
                line: file.line_of(Some(section), key),
                note,
            });
            continue;
        }
        let known = KNOWN_KEYS.iter().find(|(name, _)| *name == section);
        match known.or_else(|| webhook_topic(section).map(|_| &("webhook", WEBHOOK_KEYS))) {
            None => {
                let names: Vec<&str> = KNOWN_KEYS.iter().map(|(name, _)| *name).collect();
                let hint = closest(section, &names).map(|s| format!(" (did you mean [{s}]?)")).unwrap_or_default();
                return Err(file.error(
                    Some(section),
                    None,
                    format!("unknown section{hint}; known sections are [delayer] and [redis]"),
                ));
            }
            Some((_, keys)) if !keys.contains(&key) => {
                let hint = closest(key, keys).map(|k| format!(" (did you mean {k}?)")).unwrap_or_default();
                return Err(file.error(
                    Some(section),
                    Some(key),
                    format!("unknown key{hint}; [{section}] takes {}", keys.join(", ")),
                ));
            }
            Some(_) => {}
        }
    }
    Ok(ignored)
}

/// The candidate nearest to `name` by edit distance (Levenshtein, on bytes),
/// if it is close enough to be a likely typo: at most 2 edits, or a third of
/// `name`'s length for longer names. Ties go to the first candidate. The
/// SDKs' readers compute the same, so all suggest alike.
pub fn closest<'a>(name: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let limit = (name.len() / 3).max(2);
    let mut best: Option<(usize, &'a str)> = None;
    for &candidate in candidates {
        let d = edit_distance(name.as_bytes(), candidate.as_bytes());
        if d <= limit && best.is_none_or(|(b, _)| d < b) {
            best = Some((d, candidate));
        }
    }
    best.map(|(_, c)| c)
}

/// Levenshtein distance: insertions, deletions and substitutions, each 1.
fn edit_distance(a: &[u8], b: &[u8]) -> usize {
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conf::tests::ORIGINAL;

    #[test]
    fn unknown_keys_and_sections_are_refused_with_what_is_allowed() {
        let conf = ConfFile::parse("d.conf".into(), "[redis]\nhost = h\nprot = 16391\n").expect("parses");
        let err = reject_unknown(&conf).expect_err("typo");
        assert_eq!((err.section.as_deref(), err.key.as_deref(), err.line), (Some("redis"), Some("prot"), Some(3)));
        assert!(
            err.to_string().starts_with(
                "d.conf:3: [redis] prot: unknown key (did you mean port?); [redis] takes url, host, port,"
            ),
            "{err}"
        );
        let conf = ConfFile::parse("d.conf".into(), ORIGINAL).expect("parses");
        assert_eq!(reject_unknown(&conf), Ok(Vec::new()), "Delayer 1.x's own file");
        // Nothing close: no suggestion.
        let conf = ConfFile::parse(
            "d.conf".into(),
            "[delayer]
workers = 4
",
        )
        .expect("parses");
        let err = reject_unknown(&conf).expect_err("unknown");
        assert!(err.to_string().starts_with("d.conf:2: [delayer] workers: unknown key; [delayer] takes pid,"), "{err}");
        let conf = ConfFile::parse(
            "d.conf".into(),
            "[Redis]
port = 1
",
        )
        .expect("parses");
        let err = reject_unknown(&conf).expect_err("case");
        assert_eq!(
            err.to_string(),
            "d.conf:1: [Redis]: unknown section (did you mean [redis]?); known sections are [delayer] and [redis]"
        );
    }

    /// `delayer webhook` reads `[webhook.<topic>]` from the same file: every
    /// reader accepts those sections, and refuses a typo inside them alike.
    #[test]
    fn webhook_sections_are_accepted_and_checked() {
        let text = "[redis]\nport = 6379\n\n[webhook.close order]\nurl = https://example.com/hook\nsecret = s\ntimeout = 5\nconcurrency = 4\nttr = 60\n";
        let conf = ConfFile::parse("d.conf".into(), text).expect("parses");
        assert_eq!(reject_unknown(&conf), Ok(Vec::new()));
        assert_eq!(webhook_topic("webhook.close order"), Some("close order"));
        let conf = ConfFile::parse("d.conf".into(), "[webhook.orders]\nurl = http://x/\nsecert = s\n").expect("parses");
        let err = reject_unknown(&conf).expect_err("typo");
        assert_eq!(
            err.to_string(),
            "d.conf:3: [webhook.orders] secert: unknown key (did you mean secret?); [webhook.orders] takes url, secret, secret_file, timeout, concurrency, ttr"
        );
        for section in ["webhook", "webhook."] {
            let conf = ConfFile::parse("d.conf".into(), &format!("[{section}]\nurl = http://x/\n")).expect("parses");
            let err = reject_unknown(&conf).expect_err("no topic");
            assert!(err.to_string().contains("unknown section"), "{err}");
        }
    }

    #[test]
    fn the_closest_name_is_a_likely_typo_only() {
        let redis = KNOWN_KEYS[1].1;
        assert_eq!(closest("pasword", redis), Some("password"));
        assert_eq!(closest("Port", redis), Some("port"));
        assert_eq!(closest("conn_max_life_time", redis), Some("conn_max_lifetime"));
        assert_eq!(closest("tls_ca", redis), None, "5 edits from tls_ca_file: too far for 6 letters");
        assert_eq!(closest("x", redis), None);
        assert_eq!(edit_distance(b"kitten", b"sitting"), 3);
        assert_eq!(edit_distance(b"", b"abc"), 3);
    }

    /// The first 1.0 layout (mix-basic/delayer's pkg/config): [delayerd]
    /// and [redis] timeout, let through and reported with their lines.
    #[test]
    fn delayer_1x_keys_this_version_does_not_use_are_reported_not_refused() {
        let early = "[delayerd]\ninterval = 1000 ; ms\naccess_log = logs/access.log\nerror_log = logs/error.log\n\n[redis]\nhost = 127.0.0.1\nport = 6379\ndatabase = 0\npassword =   ; none\ntimeout = 3\nmax_idle = 2\nmax_active = 20\n";
        let conf = ConfFile::parse("d.conf".into(), early).expect("parses");
        let ignored = reject_unknown(&conf).expect("accepted");
        let at: Vec<(&str, &str, Option<usize>)> =
            ignored.iter().map(|i| (i.section.as_str(), i.key.as_str(), i.line)).collect();
        assert_eq!(
            at,
            [
                ("delayerd", "interval", Some(2)),
                ("delayerd", "access_log", Some(3)),
                ("delayerd", "error_log", Some(4)),
                ("redis", "timeout", Some(11))
            ]
        );
        assert_eq!(
            ignored[3].to_string(),
            "d.conf:11: [redis] timeout: ignored: Delayer 1.x's command timeout, not used"
        );
    }
}
