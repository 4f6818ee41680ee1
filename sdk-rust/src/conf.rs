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

use crate::keys::DEFAULT_PREFIX;
use crate::sentinel::{self, SentinelSettings};
use crate::target::Target;
use ini::{Ini, ParseOption};
use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo};
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

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
            "log_level",
            "metrics_addr",
            "http_addr",
            "http_token",
            "http_read_token",
            "http_allow_remote",
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
        ],
    ),
];

/// The keys of a `[webhook.<topic>]` section (one per topic that
/// `delayer webhook` delivers over HTTP). Every reader accepts such sections
/// so one file serves all; only the webhook process reads them.
pub const WEBHOOK_KEYS: &[&str] = &["url", "secret", "timeout", "concurrency", "ttr"];

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

/// What a client takes from the `delayer.conf` at `path`: how to reach Redis
/// and the key prefix, from a file that passes [`reject_unknown`]. Delayer
/// 1.x keys it ignores are accepted silently (the SDK has no logger; the
/// server reports them).
pub fn for_client(path: impl AsRef<Path>) -> Result<(RedisSettings, String), ConfError> {
    let file = ConfFile::load(path)?;
    reject_unknown(&file)?;
    Ok((RedisSettings::from_conf(&file)?, key_prefix(&file)))
}

/// A problem with a configuration file, located as precisely as known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfError {
    /// The file.
    pub file: PathBuf,
    /// The section, when the problem is in one.
    pub section: Option<String>,
    /// The key, when the problem is with one.
    pub key: Option<String>,
    /// The line (from 1), when known.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        write!(f, ":")?;
        match (&self.section, &self.key) {
            (Some(s), Some(k)) => write!(f, " [{s}] {k}:")?,
            (Some(s), None) => write!(f, " [{s}]:")?,
            (None, Some(k)) => write!(f, " {k}:")?,
            (None, None) => {}
        }
        write!(f, " {}", self.message)
    }
}

impl std::error::Error for ConfError {}

/// A parsed INI file that remembers where each key was written.
#[derive(Debug)]
pub struct ConfFile {
    path: PathBuf,
    ini: Ini,
    lines: KeyLines,
    section_lines: HashMap<String, usize>,
}

impl ConfFile {
    /// Reads and parses `path`.
    pub fn load(path: impl AsRef<Path>) -> Result<ConfFile, ConfError> {
        let path = path.as_ref().to_path_buf();
        let text = std::fs::read_to_string(&path).map_err(|e| ConfError {
            file: path.clone(),
            section: None,
            key: None,
            line: None,
            message: format!("cannot read the file: {e}"),
        })?;
        Self::parse(path, &text)
    }

    /// Parses `text` as if read from `path`.
    pub fn parse(path: PathBuf, text: &str) -> Result<ConfFile, ConfError> {
        // No escapes: Windows-style paths in log settings must stay as written.
        let opt = ParseOption { enabled_escape: false, ..ParseOption::default() };
        let ini = Ini::load_from_str_opt(&blank_comment_values(text), opt).map_err(|e| ConfError {
            file: path.clone(),
            section: None,
            key: None,
            line: Some(e.line), // rust-ini counts from 1
            message: format!("not valid INI: {}", e.msg),
        })?;
        let (lines, section_lines) = locate(text);
        Ok(ConfFile { path, ini, lines, section_lines })
    }

    /// The file this was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every section's name, in file order (an empty one included).
    pub fn sections(&self) -> impl Iterator<Item = &str> {
        self.ini.sections().flatten()
    }

    /// Every section (None for keys before the first header) and its keys.
    pub fn entries(&self) -> impl Iterator<Item = (Option<&str>, &str)> {
        self.ini.iter().flat_map(|(section, props)| props.iter().map(move |(key, _)| (section, key)))
    }

    /// The raw value of `key` in `[section]`, if written.
    pub fn get(&self, section: &str, key: &str) -> Option<&str> {
        self.ini.get_from(Some(section), key)
    }

    /// The line `key` was written on in `[section]` (1-based).
    pub fn line_of(&self, section: Option<&str>, key: &str) -> Option<usize> {
        self.lines.get(&(section.map(str::to_string), key.to_string())).copied()
    }

    /// The line the `[section]` header is on.
    pub fn section_line(&self, section: &str) -> Option<usize> {
        self.section_lines.get(section).copied()
    }

    /// An error about `key` in `[section]`, located in the file.
    pub fn error(&self, section: Option<&str>, key: Option<&str>, message: impl Into<String>) -> ConfError {
        let line = match key {
            Some(k) => self.line_of(section, k),
            None => section.and_then(|s| self.section_line(s)),
        };
        ConfError {
            file: self.path.clone(),
            section: section.map(str::to_string),
            key: key.map(str::to_string),
            line,
            message: message.into(),
        }
    }

    /// `key` parsed as a `T`, `None` when absent or empty; `expected` says
    /// what a good value looks like, for the error.
    pub fn parse_value<T: FromStr>(&self, section: &str, key: &str, expected: &str) -> Result<Option<T>, ConfError> {
        match self.get(section, key) {
            None | Some("") => Ok(None),
            Some(raw) => raw
                .parse()
                .map(Some)
                .map_err(|_| self.error(Some(section), Some(key), format!("{raw:?} is not {expected}"))),
        }
    }

    /// `key` as a string, `None` when absent or empty.
    pub fn string(&self, section: &str, key: &str) -> Option<String> {
        self.get(section, key).filter(|v| !v.is_empty()).map(str::to_string)
    }
}

/// Empties values that are only a comment (`password =   ; none`): Delayer
/// 1.x's sample file writes empty values that way, and rust-ini would read the
/// comment as the value. Quote a value that really starts with `;` or `#`.
fn blank_comment_values(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let t = line.trim_start();
        let is_entry = !(t.starts_with(';') || t.starts_with('#') || t.starts_with('['));
        match line.find('=').filter(|_| is_entry) {
            Some(eq) if line[eq + 1..].trim_start().starts_with([';', '#']) => {
                out.push_str(&line[..=eq]);
                if line.ends_with('\n') {
                    out.push('\n');
                }
            }
            _ => out.push_str(line),
        }
    }
    out
}

/// The line of each key, by (section, key).
type KeyLines = HashMap<(Option<String>, String), usize>;

/// Finds the line of every `key =` and `[section]` in the text.
fn locate(text: &str) -> (KeyLines, HashMap<String, usize>) {
    let mut keys = HashMap::new();
    let mut sections = HashMap::new();
    let mut section: Option<String> = None;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.starts_with(';') || line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let name = rest.split(']').next().unwrap_or("").trim().to_string();
            sections.entry(name.clone()).or_insert(n + 1);
            section = Some(name);
        } else if let Some(pos) = line.find(['=', ':']) {
            let key = line[..pos].trim().to_string();
            keys.entry((section.clone(), key)).or_insert(n + 1);
        }
    }
    (keys, sections)
}

/// How to reach Redis: the `[redis]` section's connection keys.
///
/// Either `url` (`redis://`, `rediss://` for TLS, `unix:///path`) or
/// `host` / `port` / `database`; `username` and `password`, when set,
/// override the URL's. TLS trusts the system's roots, or `tls_ca_file`
/// alone when set; `tls_cert_file` and `tls_key_file` add a client
/// certificate (mutual TLS).
#[derive(Clone, PartialEq, Eq)]
pub struct RedisSettings {
    /// `redis://`, `rediss://` or `unix://` URL, instead of host/port/database.
    pub url: Option<String>,
    /// Host name or address.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Database number.
    pub database: i64,
    /// ACL user name (overrides the URL's).
    pub username: Option<String>,
    /// Password (overrides the URL's); never logged.
    pub password: Option<String>,
    /// PEM: the certificate authority to trust instead of the system's.
    pub tls_ca: Option<Vec<u8>>,
    /// PEM: a client certificate and its key.
    pub tls_client: Option<(Vec<u8>, Vec<u8>)>,
    /// `mode = sentinel`: the master is the one these sentinels name, and
    /// url/host/port are unused.
    pub sentinel: Option<SentinelSettings>,
}

impl Default for RedisSettings {
    fn default() -> Self {
        RedisSettings {
            url: None,
            host: "127.0.0.1".into(),
            port: 6379,
            database: 0,
            username: None,
            password: None,
            tls_ca: None,
            tls_client: None,
            sentinel: None,
        }
    }
}

/// Never prints the password, the URL (it may hold one) or key material.
impl fmt::Debug for RedisSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisSettings")
            .field("target", &self.describe())
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("tls_ca", &self.tls_ca.as_ref().map(|_| "<pem>"))
            .field("tls_client", &self.tls_client.as_ref().map(|_| "<pem>"))
            .field("sentinel", &self.sentinel)
            .finish()
    }
}

impl RedisSettings {
    /// Reads the `[redis]` connection keys.
    pub fn from_conf(conf: &ConfFile) -> Result<RedisSettings, ConfError> {
        let d = RedisSettings::default();
        let sentinel = crate::sentinel::from_conf(conf)?;
        let url = conf.string("redis", "url");
        if let Some(url) = &url {
            if let Some(key) = ["host", "port", "database"].into_iter().find(|k| conf.string("redis", k).is_some()) {
                return Err(conf.error(Some("redis"), Some(key), "set either url or host/port/database, not both"));
            }
            redis::parse_redis_url(url)
                .filter(|u| ["redis", "rediss", "unix", "redis+unix"].contains(&u.scheme()))
                .ok_or_else(|| conf.error(Some("redis"), Some("url"), "not a redis://, rediss:// or unix:// URL"))?;
        }
        let database: i64 = conf.parse_value("redis", "database", "a database number")?.unwrap_or(d.database);
        if database < 0 {
            return Err(conf.error(Some("redis"), Some("database"), "a database number is 0 or more"));
        }
        let pem = |key: &str| -> Result<Option<Vec<u8>>, ConfError> {
            match conf.string("redis", key) {
                None => Ok(None),
                Some(path) => {
                    let base = conf.path().parent().map(Path::to_path_buf).unwrap_or_default();
                    std::fs::read(base.join(&path))
                        .map(Some)
                        .map_err(|e| conf.error(Some("redis"), Some(key), format!("cannot read {path}: {e}")))
                }
            }
        };
        let tls_client = match (pem("tls_cert_file")?, pem("tls_key_file")?) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            (Some(_), None) => return Err(conf.error(Some("redis"), Some("tls_cert_file"), "needs tls_key_file too")),
            (None, Some(_)) => return Err(conf.error(Some("redis"), Some("tls_key_file"), "needs tls_cert_file too")),
        };
        Ok(RedisSettings {
            url,
            host: conf.string("redis", "host").unwrap_or(d.host),
            port: conf.parse_value("redis", "port", "a port number (1-65535)")?.unwrap_or(d.port),
            database,
            username: conf.string("redis", "username"),
            password: conf.string("redis", "password"),
            tls_ca: pem("tls_ca_file")?,
            tls_client,
            sentinel,
        })
    }

    /// Where it connects, for logs: never credentials.
    pub fn describe(&self) -> String {
        if let Some(s) = &self.sentinel {
            let nodes: Vec<String> = s.nodes.iter().map(|(h, p)| format!("{h}:{p}")).collect();
            return format!("master {:?} of sentinels {}/{}", s.master_name, nodes.join(","), self.database);
        }
        match self.connection_info() {
            Ok(info) => format!("{}/{}", info.addr(), info.redis_settings().db()),
            Err(_) => format!("{}:{}/{}", self.host, self.port, self.database),
        }
    }

    /// The settings as redis-rs connection info (certificates aside).
    pub fn connection_info(&self) -> redis::RedisResult<ConnectionInfo> {
        let info = match &self.url {
            Some(url) => url.as_str().into_connection_info()?,
            None => ConnectionAddr::Tcp(self.host.clone(), self.port)
                .into_connection_info()?
                .set_redis_settings(RedisConnectionInfo::default().set_db(self.database)),
        };
        let mut redis = info.redis_settings().clone();
        if let Some(u) = &self.username {
            redis = redis.set_username(u);
        }
        if let Some(p) = &self.password {
            redis = redis.set_password(p);
        }
        Ok(info.set_redis_settings(redis))
    }

    /// A redis-rs client, with the TLS certificates when given. In sentinel
    /// mode, a client for the master the sentinels name now: it does not
    /// follow a failover (use [`RedisSettings::target`] for that).
    pub fn client(&self) -> redis::RedisResult<redis::Client> {
        if self.sentinel.is_some() {
            return self.target()?.client(crate::connection::DEFAULT_CONNECT_TIMEOUT);
        }
        self.client_for(self.connection_info()?)
    }

    /// Where connections go: this address, or the master the sentinels name
    /// at each connection (sentinel mode).
    pub fn target(&self) -> redis::RedisResult<Target> {
        match &self.sentinel {
            None => Ok(Target::fixed(self.client()?)),
            Some(_) => Ok(Target::sentinel(self.clone())),
        }
    }

    /// A client for the master at `host:port` (sentinel mode): this file's
    /// database, credentials and TLS settings.
    pub fn master_client(&self, host: &str, port: u16) -> redis::RedisResult<redis::Client> {
        let tls = self.sentinel.as_ref().is_some_and(|s| s.tls);
        let mut redis = RedisConnectionInfo::default().set_db(self.database);
        if let Some(u) = &self.username {
            redis = redis.set_username(u);
        }
        if let Some(p) = &self.password {
            redis = redis.set_password(p);
        }
        self.client_for(sentinel::address(host, port, tls).into_connection_info()?.set_redis_settings(redis))
    }

    /// A client for `info` with this file's TLS certificates.
    pub(crate) fn client_for(&self, info: ConnectionInfo) -> redis::RedisResult<redis::Client> {
        if self.tls_ca.is_none() && self.tls_client.is_none() {
            return redis::Client::open(info);
        }
        let certs = redis::TlsCertificates {
            client_tls: self
                .tls_client
                .clone()
                .map(|(client_cert, client_key)| redis::ClientTlsConfig { client_cert, client_key }),
            root_cert: self.tls_ca.clone(),
        };
        redis::Client::build_with_tls(info, certs)
    }
}

/// `[delayer] key_prefix`, or the default `delayer:`.
pub fn key_prefix(conf: &ConfFile) -> String {
    conf.get("delayer", "key_prefix").map(str::to_string).unwrap_or_else(|| DEFAULT_PREFIX.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORIGINAL: &str = "[delayer]\npid = /var/run/delayer.pid      ; comment\ntimer_interval = 1000\n\n[redis]\nhost = 127.0.0.1                ; 连接地址\nport = 6379\ndatabase = 0\npassword =                      ; 密码\n";

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

    #[test]
    fn bad_number_names_file_section_key_and_line() {
        let conf = ConfFile::parse("d.conf".into(), "[redis]\n\nport = sixty\n").expect("parses");
        let err = RedisSettings::from_conf(&conf).expect_err("bad port");
        assert_eq!(err.line, Some(3));
        assert_eq!(err.to_string(), "d.conf:3: [redis] port: \"sixty\" is not a port number (1-65535)");
    }

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
            "d.conf:3: [webhook.orders] secert: unknown key (did you mean secret?); [webhook.orders] takes url, secret, timeout, concurrency, ttr"
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

    #[test]
    fn debug_hides_password() {
        let s = RedisSettings { password: Some("hunter2".into()), ..Default::default() };
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}
