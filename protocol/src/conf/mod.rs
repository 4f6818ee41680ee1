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
//! server. The SDK reads only the `[redis]` connection keys and the
//! `[delayer]` key names ([`for_client`]); the server layers its full schema
//! on top of [`ConfFile`].
//!
//! Its parts, each re-exported here (the paths callers use):
//! `file` reads the INI text and remembers every key's line ([`ConfFile`],
//! [`ConfError`]); `rules` is the one rule for sections and keys
//! ([`reject_unknown`]); `redis` turns `[redis]` into [`RedisSettings`] and
//! redis-rs clients; `env` lays the `DELAYER_*` environment variables over
//! the file ([`env::apply`]), before anything is checked; `client` is what
//! a client takes ([`for_client`]) and the layout's reading.

mod client;
pub mod env;
// Crate-visible so that the settings of sentinel and cluster mode, which
// `redis` reads in turn, take it without going through this module.
pub(crate) mod file;
mod redis;
mod rules;

pub use self::client::{check_mode_and_layout, client_settings, for_client, key_prefix, layout};
pub use self::file::{ConfError, ConfFile, Source};
pub(crate) use self::redis::use_default_crypto;
pub use self::redis::{RedisSettings, DEFAULT_CONNECT_TIMEOUT};
pub use self::rules::{closest, reject_unknown, webhook_topic, Ignored, IGNORED_1X, KNOWN_KEYS, WEBHOOK_KEYS};

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
