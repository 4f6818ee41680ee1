//! `delayer config`: the effective configuration, each value with where it
//! came from (`default`, `file <path>`, `env DELAYER_X`, `env
//! DELAYER_X_FILE`) and every secret masked.
//!
//! It exists because with three sources (defaults, `delayer.conf`, the
//! `DELAYER_*` environment) "which value is the server using, and why" must
//! be answerable without starting it. The configuration is read and checked
//! exactly as the server reads it, so a value it prints is one the server
//! would run with, and a bad one fails here with the server's message.

use crate::config::{self, Config};
use crate::fatal::Fatal;
use delayer_protocol::conf::{webhook_topic, ConfFile, Source, KNOWN_KEYS, WEBHOOK_KEYS};
use std::path::Path;

/// What a key means when unset, as `delayer config` shows it (empty: unset,
/// the feature is off). Checked against the schema by a test.
const DEFAULTS: &[(&str, &str, &str)] = &[
    ("delayer", "timer_interval", "1000"),
    ("delayer", "batch_size", "1000"),
    ("delayer", "key_prefix", delayer_protocol::keys::DEFAULT_PREFIX),
    ("delayer", "layout", "classic"),
    ("delayer", "log_level", "info"),
    ("delayer", "log_format", "text"),
    ("delayer", "http_allow_remote", "no"),
    ("delayer", "http_session_lifetime", "43200"),
    ("delayer", "http_max_connections", "512"),
    ("delayer", "http_header_timeout", "10"),
    ("delayer", "http_body_timeout", "30"),
    ("delayer", "http_redis_timeout", "5"),
    ("delayer", "http_max_waiting", "100"),
    ("delayer", "metrics_allow_remote", "no"),
    ("redis", "host", "127.0.0.1"),
    ("redis", "port", "6379"),
    ("redis", "database", "0"),
    ("redis", "max_idle", "2"),
    ("redis", "max_active", "20"),
    ("redis", "idle_timeout", "3600"),
    ("redis", "conn_max_lifetime", "3600"),
    ("redis", "mode", "standalone"),
    ("redis", "require_noeviction", "no"),
];

/// Keys whose value is a secret: shown as `****` when set.
const SECRETS: &[(&str, &str)] = &[
    ("delayer", "http_token"),
    ("delayer", "http_read_token"),
    ("delayer", "http_session_secret"),
    ("redis", "password"),
    ("redis", "sentinel_password"),
    ("webhook", "secret"),
];

/// One line of the output.
#[derive(Debug, PartialEq, Eq)]
pub struct Setting {
    pub section: String,
    pub key: String,
    /// Masked where secret.
    pub value: String,
    pub source: String,
}

/// Prints the configuration that `-c FILE` (or the default places, or
/// none) and the environment make, as `key = value ; source` lines under
/// their sections, or as JSON.
pub fn run(explicit: Option<&Path>, json: bool) -> Result<(), Fatal> {
    let (file, notes) = config::read(explicit)?;
    // Checked as the server and the webhook check it: a bad value fails
    // here with their message.
    let checked = Config::from_file(&file)?;
    #[cfg(feature = "webhook")]
    if file.sections().any(|s| webhook_topic(s).is_some()) {
        crate::webhook::config::hooks(&file)?;
    }
    checked.ignored.iter().for_each(|ignored| eprintln!("warning: {ignored}"));
    for (level, note) in &notes {
        eprintln!("{}: {note}", if *level <= log::Level::Warn { "warning" } else { "info" });
    }
    let settings = settings(&file);
    let from = file.exists().then(|| file.path().display().to_string());
    if json {
        let list: Vec<serde_json::Value> = settings
            .iter()
            .map(|s| serde_json::json!({"section": s.section, "key": s.key, "value": s.value, "source": s.source}))
            .collect();
        return crate::output::print(&format!("{}\n", serde_json::json!({ "file": from, "settings": list })));
    }
    let mut out = format!("; the effective configuration: {}\n", from.as_deref().unwrap_or(config::NO_FILE));
    let mut section = "";
    for s in &settings {
        if s.section != section {
            section = &s.section;
            out.push_str(&format!("\n[{section}]\n"));
        }
        out.push_str(&format!("{} = {}  ; {}\n", s.key, s.value, s.source));
    }
    crate::output::print(&out)
}

/// Every key of `[delayer]` and `[redis]`, then the keys written in each
/// `[webhook.<topic>]` section, with value and source.
pub fn settings(file: &ConfFile) -> Vec<Setting> {
    let mut out = Vec::new();
    for (section, keys) in KNOWN_KEYS {
        for key in keys.iter() {
            out.push(setting(file, section, key, section));
        }
    }
    for section in file.sections() {
        if webhook_topic(section).is_some() {
            for key in WEBHOOK_KEYS.iter().filter(|k| file.get(section, k).is_some()) {
                out.push(setting(file, section, key, "webhook"));
            }
        }
    }
    out
}

fn setting(file: &ConfFile, section: &str, key: &str, kind: &str) -> Setting {
    let (value, source) = match file.source(section, key) {
        None => {
            let default = DEFAULTS.iter().find(|(s, k, _)| *s == section && *k == key).map_or("", |(_, _, d)| *d);
            (default.to_string(), "default".to_string())
        }
        Some(source) => {
            let value = file.get(section, key).unwrap_or("").to_string();
            let source = match source {
                Source::File => format!("file {}", file.path().display()),
                Source::Env(var) | Source::EnvFile(var, _) => format!("env {var}"),
            };
            (value, source)
        }
    };
    let value = match (kind, key) {
        _ if value.is_empty() => value,
        _ if SECRETS.contains(&(kind, key)) => "****".to_string(),
        (_, "url") => mask_url(&value),
        _ => value,
    };
    Setting { section: section.to_string(), key: key.to_string(), value, source }
}

/// A URL with its password and query values (which may hold credentials:
/// `?password=`, `?token=`) shown as `****`: `redis://:****@host:6379`.
fn mask_url(raw: &str) -> String {
    let Ok(mut url) = url::Url::parse(raw) else { return "****".to_string() };
    if url.password().is_some() {
        let _ = url.set_password(Some("****"));
    }
    let pairs: Vec<(String, String)> = url.query_pairs().map(|(k, _)| (k.into_owned(), "****".into())).collect();
    if !pairs.is_empty() {
        url.query_pairs_mut().clear().extend_pairs(pairs);
    }
    url.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;
    use std::path::PathBuf;

    /// The defaults shown are the ones the server uses: a file holding
    /// every one of them reads as no file at all.
    #[test]
    fn the_defaults_shown_are_the_servers() {
        let mut text = String::new();
        for (section, keys) in KNOWN_KEYS {
            text.push_str(&format!("[{section}]\n"));
            for (_, key, default) in DEFAULTS.iter().filter(|(s, k, _)| *s == section && keys.contains(k)) {
                text.push_str(&format!("{key} = {default}\n"));
            }
        }
        let path = PathBuf::from("/d/delayer.conf");
        let written = Config::from_file(&ConfFile::parse(path.clone(), &text).expect("parses")).expect("valid");
        let none = Config::from_file(&ConfFile::parse(path, "").expect("parses")).expect("valid");
        assert_eq!(format!("{written:?}"), format!("{none:?}"));
        // Every default names a key of the schema.
        for (section, key, _) in DEFAULTS {
            assert!(KNOWN_KEYS.iter().any(|(s, keys)| s == section && keys.contains(key)), "{section} {key}");
        }
    }

    #[test]
    fn values_carry_their_source_and_secrets_are_masked() {
        let text = "[delayer]\nbatch_size = 10\n\n[redis]\nurl = redis://u:hunter2@127.0.0.1:6379/0\n\n[webhook.t]\nurl = https://x:y@example.com/h?token=abc\nsecret = hunter2\n";
        let mut file = ConfFile::parse("/d/delayer.conf".into(), text).expect("parses");
        let env = [("DELAYER_HTTP_TOKEN", "hunter2-hunter2-hunter2-hunter2-1"), ("DELAYER_BATCH_SIZE", "20")];
        delayer_protocol::conf::env::overlay(&mut file, env.map(|(k, v)| (OsString::from(k), OsString::from(v))))
            .expect("overlay");
        let all = settings(&file);
        let find = |section: &str, key: &str| {
            let s = all.iter().find(|s| s.section == section && s.key == key).expect("listed");
            (s.value.as_str(), s.source.as_str())
        };
        assert_eq!(find("delayer", "batch_size"), ("20", "env DELAYER_BATCH_SIZE"));
        assert_eq!(find("delayer", "http_token"), ("****", "env DELAYER_HTTP_TOKEN"));
        assert_eq!(find("delayer", "timer_interval"), ("1000", "default"));
        assert_eq!(find("delayer", "pid"), ("", "default"));
        assert_eq!(find("redis", "url"), ("redis://u:****@127.0.0.1:6379/0", "file /d/delayer.conf"));
        assert_eq!(find("webhook.t", "secret"), ("****", "file /d/delayer.conf"));
        assert_eq!(find("webhook.t", "url"), ("https://x:****@example.com/h?token=****", "file /d/delayer.conf"));
        assert!(all.iter().all(|s| !s.value.contains("hunter2")), "{all:?}");
        assert_eq!(mask_url("redis://:pw@h:1"), "redis://:****@h:1");
        assert_eq!(mask_url("not a url"), "****");
    }
}
