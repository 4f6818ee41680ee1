//! `delayer.conf`: finding it, and the server's schema on top of the shared
//! INI reader (`delayer_protocol::conf`).
//!
//! Every key of Delayer 1.x is accepted with its meaning; keys we added have
//! defaults, so a 1.x file works unchanged. The few 1.x keys this version has
//! no use for are kept in [`Config::ignored`], for the server to log once its
//! logger runs. Anything else we cannot use — an unknown section or key, a
//! bad number, a missing file — is a [`ConfError`] naming the file, section,
//! key and line, and the server exits with code 2.

use delayer::PoolOptions;
use delayer_protocol::conf::{self, ConfError, ConfFile, Ignored, RedisSettings};
use log::LevelFilter;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where to look when `-c` is not given, in order.
pub const SEARCH_PATH: [&str; 2] = ["./delayer.conf", "/etc/delayer/delayer.conf"];

/// Longest wait for any reply from Redis (the mover, the wake-up
/// listener's PING, the gauges' reader, the operator commands): a reply
/// slower than this means a stalled Redis or a dead connection, which is
/// dropped, logged with how long Redis did not answer, and retried. Every
/// call the server makes is bounded by the batch size, so a live Redis
/// answers in milliseconds.
pub const REDIS_TIMEOUT: Duration = Duration::from_secs(5);

/// Largest batch: the move script LPUSHes up to a batch with one `unpack`,
/// which Lua limits to about 8000 values.
pub const MAX_BATCH_SIZE: u32 = 5000;

/// The server's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file they came from.
    pub path: PathBuf,
    /// Pid file; also keeps a second instance from starting on it.
    pub pid: Option<PathBuf>,
    /// Longest sleep between two looks at the pool.
    pub timer_interval: Duration,
    /// Where info lines go (stdout when unset).
    pub access_log: Option<PathBuf>,
    /// Where warnings and errors go (stderr when unset).
    pub error_log: Option<PathBuf>,
    pub log_level: LevelFilter,
    /// `log_format`: 1.x's text lines, or one JSON object per line.
    pub log_format: crate::logformat::LogFormat,
    /// Most ids moved by one script call.
    pub batch_size: u32,
    pub key_prefix: String,
    /// `[delayer] layout`: classic (1.x's keys) or per topic.
    pub layout: delayer::Layout,
    pub redis: RedisSettings,
    /// `[redis] require_noeviction`: refuse to start unless Redis's
    /// maxmemory-policy is `noeviction`.
    pub require_noeviction: bool,
    pub pool: PoolOptions,
    /// Where to serve Prometheus metrics (`None`: nowhere).
    pub metrics_addr: Option<SocketAddr>,
    /// The metrics endpoint's socket limits (the `http_*` limit keys).
    #[cfg(feature = "http")]
    pub metrics_limits: crate::http::settings::Limits,
    /// The HTTP API and dashboard (`None`: off, `http_addr` unset).
    #[cfg(feature = "http")]
    pub http: Option<crate::http::settings::HttpSettings>,
    /// Delayer 1.x keys in the file that this version does not use.
    pub ignored: Vec<Ignored>,
    /// Lines to log once the logger runs: no file, misspelt variables.
    pub notes: Vec<(log::Level, String)>,
}

/// The file to read: `explicit` if given, else the first of [`SEARCH_PATH`]
/// that exists (`None`: there is none, and the defaults and the environment
/// make the configuration); always as an absolute path, so the paths it
/// holds (relative to its directory) stay right for a daemon, which runs in
/// `/`.
pub fn locate(explicit: Option<&Path>) -> Result<Option<PathBuf>, ConfError> {
    let found = match explicit {
        Some(path) => path.to_path_buf(),
        None => match SEARCH_PATH.iter().map(PathBuf::from).find(|p| p.is_file()) {
            Some(found) => found,
            None => return Ok(None),
        },
    };
    std::path::absolute(&found).map(Some).map_err(|e| ConfError {
        file: found.clone(),
        section: None,
        key: None,
        line: None,
        message: format!("cannot tell where it is: {e}"),
    })
}

/// What stands for the file in messages when there is none.
pub const NO_FILE: &str = "(no configuration file)";

/// The configuration file `explicit` (or the first of [`SEARCH_PATH`], or
/// none), with the `DELAYER_*` environment laid over it; and the lines to
/// log once the logger runs (no file; misspelt variables).
pub fn read(explicit: Option<&Path>) -> Result<(ConfFile, Vec<(log::Level, String)>), ConfError> {
    let mut notes = Vec::new();
    let mut file = match locate(explicit)? {
        Some(path) => ConfFile::load(path)?,
        None => {
            notes.push((
                log::Level::Info,
                format!(
                    "no configuration file (looked for {}): running on the defaults and DELAYER_* environment \
                     variables",
                    SEARCH_PATH.join(" and ")
                ),
            ));
            ConfFile::none(PathBuf::from(NO_FILE))
        }
    };
    let misspelt = conf::env::apply(&mut file)?;
    notes.extend(misspelt.into_iter().map(|warning| (log::Level::Warn, warning)));
    Ok((file, notes))
}

impl Config {
    /// Reads ([`read`]) and checks the configuration.
    pub fn load(explicit: Option<&Path>) -> Result<Config, ConfError> {
        let (file, notes) = read(explicit)?;
        Ok(Config { notes, ..Config::from_file(&file)? })
    }

    /// Checks a parsed file against the schema.
    pub fn from_file(file: &ConfFile) -> Result<Config, ConfError> {
        // The one rule of which sections and keys a file may hold, shared
        // with the SDKs' readers.
        let ignored = conf::reject_unknown(file)?;
        // Relative paths are relative to the configuration file (whose own
        // path is absolute, see `locate`), or to the working directory when
        // set in the environment.
        let path_of = |key: &str| file.path_value("delayer", key);

        let timer_ms: u64 = file.ranged("delayer", "timer_interval", 1, 3_600_000, "milliseconds")?.unwrap_or(1000);
        let batch_size = file.ranged("delayer", "batch_size", 1, MAX_BATCH_SIZE as u64, "ids")?.unwrap_or(1000) as u32;
        let log_level = match file.get("delayer", "log_level").unwrap_or("info") {
            "" | "info" => LevelFilter::Info,
            "error" => LevelFilter::Error,
            "warn" | "warning" => LevelFilter::Warn,
            "debug" => LevelFilter::Debug,
            "trace" => LevelFilter::Trace,
            other => {
                return Err(file.error(
                    Some("delayer"),
                    Some("log_level"),
                    format!("{other:?} is not one of error, warn, info, debug, trace"),
                ))
            }
        };
        let log_format = file.get("delayer", "log_format").unwrap_or("");
        let log_format = crate::logformat::LogFormat::parse(log_format).ok_or_else(|| {
            file.error(Some("delayer"), Some("log_format"), format!("{log_format:?} is not one of text, json"))
        })?;

        let max_active = file.ranged("redis", "max_active", 1, 10_000, "connections")?.unwrap_or(20) as u32;
        let max_idle = file.ranged("redis", "max_idle", 0, 10_000, "connections")?.unwrap_or(2) as u32;
        // 0 means "never", as in Delayer 1.x (Go's redigo pool).
        let seconds = |key: &str| -> Result<Option<Duration>, ConfError> {
            let secs = file.ranged("redis", key, 0, 315_360_000, "seconds")?.unwrap_or(3600);
            Ok((secs > 0).then(|| Duration::from_secs(secs)))
        };
        let pool = PoolOptions {
            max_size: max_active,
            min_idle: max_idle.min(max_active),
            idle_timeout: seconds("idle_timeout")?,
            max_lifetime: seconds("conn_max_lifetime")?,
            connect_timeout: delayer_protocol::connection::DEFAULT_CONNECT_TIMEOUT,
            // The server never blocks on Redis: a reply slower than this
            // means a stuck connection, which is dropped and replaced.
            io_timeout: Some(REDIS_TIMEOUT),
        };

        let layout = delayer_protocol::conf::layout(file)?;
        let redis = RedisSettings::from_conf(file)?;
        delayer_protocol::conf::check_mode_and_layout(file, &redis, layout)?;
        #[cfg(feature = "http")]
        let http = crate::http::settings::HttpSettings::from_file(file)?;
        #[cfg(not(feature = "http"))]
        without_http(file)?;
        let metrics_addr = metrics_addr(file)?;
        Ok(Config {
            path: file.path().to_path_buf(),
            pid: path_of("pid"),
            timer_interval: Duration::from_millis(timer_ms),
            access_log: path_of("access_log"),
            error_log: path_of("error_log"),
            log_level,
            log_format,
            batch_size,
            key_prefix: delayer_protocol::conf::key_prefix(file),
            layout,
            redis,
            require_noeviction: file.yes_no("redis", "require_noeviction")?,
            pool,
            metrics_addr,
            #[cfg(feature = "http")]
            metrics_limits: crate::http::settings::Limits::from_file(file)?.for_metrics(),
            #[cfg(feature = "http")]
            http,
            ignored,
            notes: Vec::new(),
        })
    }
}

/// In a build without the `http` feature: refuses the keys that ask for a
/// listener (nothing would serve them).
#[cfg(not(feature = "http"))]
fn without_http(file: &ConfFile) -> Result<(), ConfError> {
    match ["http_addr", "metrics_addr"].into_iter().find(|k| file.string("delayer", k).is_some()) {
        Some(key) => Err(file.error(Some("delayer"), Some(key), "this delayer was built without the http feature")),
        None => Ok(()),
    }
}

/// `metrics_addr`: beyond loopback only with `metrics_allow_remote = yes`
/// (its own key: a Prometheus elsewhere may scrape the numbers while the
/// API, which can change jobs, stays on loopback).
fn metrics_addr(file: &ConfFile) -> Result<Option<SocketAddr>, ConfError> {
    let addr: Option<SocketAddr> = file.parse_value("delayer", "metrics_addr", "an address such as 127.0.0.1:9464")?;
    let allowed = file.yes_no("delayer", "metrics_allow_remote")?;
    match addr {
        Some(addr) if !addr.ip().is_loopback() && !allowed => Err(file.error(
            Some("delayer"),
            Some("metrics_addr"),
            format!(
                "{addr} is not a loopback address; the metrics name every topic and its numbers, so serving them \
                 beyond this machine needs metrics_allow_remote = yes"
            ),
        )),
        addr => Ok(addr),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfError> {
        Config::from_file(&ConfFile::parse(PathBuf::from("/etc/d/delayer.conf"), text)?)
    }

    #[test]
    fn delayer_1x_file_is_accepted_with_defaults_for_new_keys() {
        let c = parse(
            "[delayer]\npid = /var/run/delayer.pid ; x\ntimer_interval = 1000\naccess_log = logs/access.log\nerror_log = logs/error.log\n\n[redis]\nhost = 127.0.0.1\nport = 6379\ndatabase = 0\npassword =      ; none\nmax_idle = 2\nmax_active = 20\nidle_timeout = 3600\nconn_max_lifetime = 3600\n",
        )
        .expect("valid");
        assert_eq!(c.timer_interval, Duration::from_millis(1000));
        assert_eq!(c.access_log, Some(PathBuf::from("/etc/d/logs/access.log")));
        assert_eq!(c.pid, Some(PathBuf::from("/var/run/delayer.pid")));
        assert_eq!(c.batch_size, 1000);
        assert_eq!(c.key_prefix, "delayer:");
        assert_eq!(c.redis.password, None);
        assert_eq!(c.pool.max_size, 20);
        assert_eq!(c.pool.min_idle, 2);
    }

    #[test]
    fn errors_name_section_key_and_line() {
        let e = parse("[delayer]\ntimer_interval = 1000\ntimer_intervall = 5\n").expect_err("unknown key");
        assert_eq!(
            (e.section.as_deref(), e.key.as_deref(), e.line),
            (Some("delayer"), Some("timer_intervall"), Some(3))
        );
        assert!(e.to_string().contains("unknown key (did you mean timer_interval?); [delayer] takes"), "{e}");
        let e = parse("[redis]\nmax_active = 0\n").expect_err("zero pool");
        assert_eq!((e.key.as_deref(), e.line), (Some("max_active"), Some(2)));
        let e = parse("[delayer]\nbatch_size = 9000\n").expect_err("too big");
        assert!(e.to_string().contains("out of range"), "{e}");
        let e = parse("[mysql]\nhost = x\n").expect_err("unknown section");
        assert_eq!((e.section.as_deref(), e.line), (Some("mysql"), Some(1)));
        let e = parse("[delayer]\nlog_level = loud\n").expect_err("bad level");
        assert_eq!(e.key.as_deref(), Some("log_level"));
        let e = parse("[delayer]\nlog_format = logfmt\n").expect_err("bad format");
        assert_eq!((e.key.as_deref(), e.line), (Some("log_format"), Some(2)));
        assert!(e.to_string().contains("\"logfmt\" is not one of text, json"), "{e}");
        let e = parse("[delayer]\nmetrics_addr = localhost\n").expect_err("bad address");
        assert_eq!(e.key.as_deref(), Some("metrics_addr"));
    }

    #[test]
    #[cfg(feature = "http")]
    fn metrics_beyond_loopback_need_saying_so() {
        let e = parse("[delayer]\nmetrics_addr = 0.0.0.0:9464\n").expect_err("remote");
        assert!(e.to_string().contains("metrics_allow_remote = yes"), "{e}");
        assert_eq!((e.key.as_deref(), e.line), (Some("metrics_addr"), Some(2)));
        let c = parse("[delayer]\nmetrics_addr = 0.0.0.0:9464\nmetrics_allow_remote = yes\n").expect("valid");
        assert!(c.metrics_addr.is_some());
        assert!(parse("[delayer]\nmetrics_addr = [::1]:9464\n").expect("valid").metrics_addr.is_some());
        assert!(parse("[delayer]\nmetrics_allow_remote = maybe\n").is_err());
        // The limits apply to the metrics socket too, with fewer connections.
        let c = parse("[delayer]\nhttp_max_connections = 1000\nhttp_header_timeout = 3\n").expect("valid");
        assert_eq!((c.metrics_limits.max_connections, c.metrics_limits.header_timeout.as_secs()), (64, 3));
    }

    #[test]
    fn the_file_is_located_by_its_absolute_path() {
        let cwd = std::env::current_dir().expect("cwd");
        let found = locate(Some(Path::new("conf/delayer.conf"))).expect("located").expect("given");
        assert_eq!(found, cwd.join("conf/delayer.conf"));
        let c =
            Config::from_file(&ConfFile::parse(found, "[delayer]\npid = run/d.pid\n").expect("parse")).expect("valid");
        assert_eq!(c.pid, Some(cwd.join("conf/run/d.pid")));
    }

    /// Each layout a Delayer 1.x release shipped (mix-basic/delayer's
    /// delayer.conf through its history) starts the server; what it does not
    /// use is listed for the log.
    #[test]
    fn every_1x_layout_is_accepted() {
        let early = parse(
            "[delayerd]\ninterval = 1000\naccess_log = logs/access.log\nerror_log = logs/error.log\n\n[redis]\nhost = 127.0.0.1\nport = 6379\ndatabase = 0\npassword =\ntimeout = 3\nmax_idle = 2\nmax_active = 20\n",
        )
        .expect("the first 1.0 layout");
        let keys: Vec<String> = early.ignored.iter().map(|i| format!("{}:{:?}", i.key, i.line)).collect();
        assert_eq!(keys, ["interval:Some(2)", "access_log:Some(3)", "error_log:Some(4)", "timeout:Some(11)"]);
        // Its logs were in the ignored section: the defaults apply.
        assert_eq!((early.access_log.as_ref(), early.timer_interval), (None, Duration::from_millis(1000)));
        let windows = parse(
            "[delayer]\npid = C:\\tmp\\delayer.pid            ;/var/run/delayer.pid      ; pid\ntimer_interval = 1000\n\n[redis]\nhost = 127.0.0.1\nidle_timeout = 3600\nconn_max_lifetime = 3600\n",
        )
        .expect("a 1.0.x layout with a Windows pid path");
        assert!(windows.ignored.is_empty());
    }

    #[test]
    fn require_noeviction_is_yes_or_no() {
        assert!(!parse("[redis]\nhost = h\n").expect("valid").require_noeviction);
        assert!(parse("[redis]\nrequire_noeviction = yes\n").expect("valid").require_noeviction);
        assert!(parse("[redis]\nrequire_noeviction = true\n").expect("valid").require_noeviction);
        let e = parse("[redis]\nrequire_noeviction = maybe\n").expect_err("not yes or no");
        assert_eq!((e.key.as_deref(), e.line), (Some("require_noeviction"), Some(2)));
    }

    #[test]
    fn zero_lifetimes_mean_never() {
        let c = parse("[redis]\nidle_timeout = 0\nconn_max_lifetime = 0\n").expect("valid");
        assert_eq!((c.pool.idle_timeout, c.pool.max_lifetime), (None, None));
    }
}
