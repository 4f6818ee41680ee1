//! Reading `delayer.conf`, the INI file shared by the server and the SDKs.
//!
//! The file is parsed with rust-ini; this module adds what an operator needs
//! when something is wrong: every error names the file, the section, the key
//! and the line. One rule says which sections and keys a file may hold
//! ([`KNOWN_KEYS`], checked by [`reject_unknown`]), for the server and the
//! SDK alike, so a typo is refused by both instead of silently meaning a
//! default (and the closest known name is suggested); what a Delayer 1.x
//! release wrote and this version has no use for ([`IGNORED_1X`]) is let
//! through, reported as [`Ignored`], so every 1.x file still starts the
//! server. The SDK reads only the `[redis]` connection keys and
//! `[delayer] key_prefix` ([`for_client`]); the server layers its full schema
//! on top of [`ConfFile`].
//!
//! Its parts, each re-exported here (the paths callers use):
//! `file` reads the INI text and remembers every key's line ([`ConfFile`],
//! [`ConfError`]); `rules` is the one rule for sections and keys
//! ([`reject_unknown`]); `redis` turns `[redis]` into [`RedisSettings`] and
//! redis-rs clients; `env` lays the `DELAYER_*` environment variables over
//! the file ([`env::apply`]), before anything is checked. This file holds
//! what a client takes from the file.

pub mod env;
mod file;
mod redis;
mod rules;

pub use self::file::{ConfError, ConfFile, Source};
pub use self::redis::RedisSettings;
pub use self::rules::{closest, reject_unknown, webhook_topic, Ignored, IGNORED_1X, KNOWN_KEYS, WEBHOOK_KEYS};
use crate::keys::{Layout, Names, DEFAULT_PREFIX};
use std::path::Path;

/// What a client takes from the `delayer.conf` at `path`, with the
/// `DELAYER_*` environment variables over it ([`env`]): how to reach Redis
/// and the key names (prefix and layout), from a file that passes
/// [`reject_unknown`]. Delayer 1.x keys it ignores, and misspelt variables,
/// are let through silently (the SDK has no logger; the server reports
/// them).
pub fn for_client(path: impl AsRef<Path>) -> Result<(RedisSettings, Names), ConfError> {
    client_settings(ConfFile::load(path)?, std::env::vars_os())
}

/// [`for_client`] on a parsed file and the variables `vars` (the process's
/// environment there; given here so the shared cases can be run).
pub fn client_settings(
    mut file: ConfFile,
    vars: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Result<(RedisSettings, Names), ConfError> {
    reject_unknown(&file)?;
    env::overlay(&mut file, vars)?;
    let names = Names::new(&key_prefix(&file), layout(&file)?);
    let redis = RedisSettings::from_conf(&file)?;
    check_mode_and_layout(&file, &redis, names.layout())?;
    Ok((redis, names))
}

/// Refuses `mode = cluster` with the classic layout (its jobs share one key,
/// which one node holds).
pub fn check_mode_and_layout(file: &ConfFile, redis: &RedisSettings, layout: Layout) -> Result<(), ConfError> {
    if redis.cluster.is_some() && layout != Layout::Topic {
        return Err(file.error(Some("redis"), Some("mode"), crate::cluster::NEEDS_TOPIC_LAYOUT));
    }
    Ok(())
}

/// `[delayer] layout`: `classic` (the default) or `topic`. In the per-topic
/// layout neither the prefix nor (checked per call) a topic may hold `{` or
/// `}`: they would move the hash tag every key name relies on.
pub fn layout(conf: &ConfFile) -> Result<Layout, ConfError> {
    match conf.get("delayer", "layout").unwrap_or("") {
        "" | "classic" => Ok(Layout::Classic),
        "topic" => {
            let prefix = key_prefix(conf);
            if prefix.contains(['{', '}']) {
                let msg = format!("key_prefix {prefix:?} contains a brace, which the per-topic layout cannot use");
                return Err(conf.error(Some("delayer"), Some("key_prefix"), msg));
            }
            Ok(Layout::Topic)
        }
        other => Err(conf.error(Some("delayer"), Some("layout"), format!("{other:?} is not one of classic, topic"))),
    }
}

/// `[delayer] key_prefix`, or the default `delayer:`.
pub fn key_prefix(conf: &ConfFile) -> String {
    conf.get("delayer", "key_prefix").map(str::to_string).unwrap_or_else(|| DEFAULT_PREFIX.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Delayer 1.x's sample file, as its releases shipped it.
    pub(super) const ORIGINAL: &str = "[delayer]\npid = /var/run/delayer.pid      ; comment\ntimer_interval = 1000\n\n[redis]\nhost = 127.0.0.1                ; 连接地址\nport = 6379\ndatabase = 0\npassword =                      ; 密码\n";

    #[test]
    fn reads_the_original_file_with_inline_comments() {
        let conf = ConfFile::parse("d.conf".into(), ORIGINAL).expect("parses");
        assert_eq!(conf.get("delayer", "pid"), Some("/var/run/delayer.pid"));
        assert_eq!(conf.get("redis", "password"), Some(""));
        let s = RedisSettings::from_conf(&conf).expect("settings");
        assert_eq!(s.host, "127.0.0.1");
        assert_eq!(s.password, None);
        assert_eq!(conf.line_of(Some("redis"), "port"), Some(7));
        let quoted = ConfFile::parse("d.conf".into(), "[redis]\npassword = \";secret\"\n").expect("parses");
        assert_eq!(quoted.get("redis", "password"), Some(";secret"));
    }
}
