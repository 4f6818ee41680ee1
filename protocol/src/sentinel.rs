//! Redis Sentinel: the `[redis] mode = sentinel` settings, and asking the
//! sentinels which node is the master.
//!
//! A failover moves the master to another address, so in sentinel mode no
//! address is configured: every connection the SDK or the server opens
//! first asks the sentinels (`SENTINEL get-master-addr-by-name`), then checks
//! with `ROLE` that the node it reached is a master (a sentinel may still
//! name a demoted one for a moment). Callers open a new connection after a
//! connection error or a `READONLY` reply, so they follow a failover.
//!
//! The lookup is written here rather than taken from redis-rs's `sentinel`
//! module, which connects without a timeout (a sentinel host that vanished
//! would hang a caller).
//! The sync and async lookups share everything but the I/O.

use crate::conf::file::{ConfError, ConfFile};
use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo, RedisError, Value};
use std::fmt;
use std::time::Duration;

/// Keys that only mean something in sentinel mode.
const SENTINEL_ONLY: [&str; 5] = ["nodes", "master_name", "sentinel_username", "sentinel_password", "tls"];

/// The modes that read `key`, one of [`SENTINEL_ONLY`] (for the message).
fn modes_of(key: &str) -> &'static str {
    if matches!(key, "nodes" | "tls") {
        "sentinel or cluster"
    } else {
        "sentinel"
    }
}

/// Keys that name one fixed address, which sentinel mode does not have.
const FIXED_ONLY: [&str; 3] = ["url", "host", "port"];

/// How to find the master through Redis Sentinel.
#[derive(Clone, PartialEq, Eq)]
pub struct SentinelSettings {
    /// The sentinels, asked in this order.
    pub nodes: Vec<(String, u16)>,
    /// The name the sentinels monitor the master under (`sentinel monitor <name> ...`).
    pub master_name: String,
    /// ACL user for the sentinels (the master's `username` is separate).
    pub username: Option<String>,
    /// Password for the sentinels; never logged.
    pub password: Option<String>,
    /// TLS to the sentinels and to the master (`tls_*` files apply to both).
    pub tls: bool,
}

/// Never prints the password.
impl fmt::Debug for SentinelSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SentinelSettings")
            .field("nodes", &self.nodes)
            .field("master_name", &self.master_name)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("tls", &self.tls)
            .finish()
    }
}

/// Reads `[redis] mode` and the keys that go with it: `None` in standalone
/// mode (the default) and in cluster mode ([`crate::cluster::from_conf`]
/// reads that), the sentinel settings in sentinel mode. Refuses keys that
/// do not belong to the mode.
pub fn from_conf(conf: &ConfFile) -> Result<Option<SentinelSettings>, ConfError> {
    let err = |key: &str, message: String| conf.error(Some("redis"), Some(key), message);
    match conf.string("redis", "mode").as_deref() {
        None | Some("standalone") => match SENTINEL_ONLY.into_iter().find(|k| conf.string("redis", k).is_some()) {
            Some(key) => Err(err(key, format!("is only used with mode = {} (mode is standalone)", modes_of(key)))),
            None => Ok(None),
        },
        Some("cluster") => Ok(None),
        Some("sentinel") => {
            if let Some(key) = FIXED_ONLY.into_iter().find(|k| conf.string("redis", k).is_some()) {
                return Err(err(key, "not used with mode = sentinel: the sentinels name the master (nodes)".into()));
            }
            let nodes = conf.string("redis", "nodes").ok_or_else(|| {
                err("mode", "mode = sentinel needs nodes (the sentinels: host:port,host:port,...)".into())
            })?;
            let master_name = conf
                .string("redis", "master_name")
                .ok_or_else(|| err("mode", "mode = sentinel needs master_name".into()))?;
            let tls = read_tls(conf)?;
            Ok(Some(SentinelSettings {
                nodes: read_nodes(conf, &nodes)?,
                master_name,
                username: conf.string("redis", "sentinel_username"),
                password: conf.string("redis", "sentinel_password"),
                tls,
            }))
        }
        Some(other) => Err(err("mode", format!("{other:?} is not a mode: standalone, sentinel or cluster"))),
    }
}

/// `[redis] tls` (sentinel and cluster mode): yes/true or no/false.
pub(crate) fn read_tls(conf: &ConfFile) -> Result<bool, ConfError> {
    match conf.string("redis", "tls").as_deref() {
        None | Some("no") | Some("false") => Ok(false),
        Some("yes") | Some("true") => Ok(true),
        Some(other) => Err(conf.error(Some("redis"), Some("tls"), format!("{other:?} is not yes or no"))),
    }
}

/// `[redis] nodes` (the sentinels, or a cluster's seeds), read by [`parse_nodes`].
pub(crate) fn read_nodes(conf: &ConfFile, text: &str) -> Result<Vec<(String, u16)>, ConfError> {
    parse_nodes(text).map_err(|bad| conf.error(Some("redis"), Some("nodes"), format!("{bad:?} is not host:port")))
}

/// `host:port,host:port,...` (`[::1]:26379` for IPv6); the first entry
/// that is not `host:port` is the error.
pub fn parse_nodes(text: &str) -> Result<Vec<(String, u16)>, String> {
    let mut nodes = Vec::new();
    for entry in text.split(',').map(str::trim) {
        let parsed = entry.rsplit_once(':').and_then(|(host, port)| {
            let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
            let port = port.parse::<u16>().ok().filter(|p| *p > 0)?;
            (!host.is_empty() && !host.contains([' ', '[', ']'])).then(|| (host.to_string(), port))
        });
        nodes.push(parsed.ok_or_else(|| entry.to_string())?);
    }
    Ok(nodes)
}

impl SentinelSettings {
    /// How to reach the sentinel at `host:port`.
    pub fn sentinel_info(&self, host: &str, port: u16) -> redis::RedisResult<ConnectionInfo> {
        let mut redis = RedisConnectionInfo::default();
        if let Some(u) = &self.username {
            redis = redis.set_username(u);
        }
        if let Some(p) = &self.password {
            redis = redis.set_password(p);
        }
        Ok(address(host, port, self.tls).into_connection_info()?.set_redis_settings(redis))
    }

    /// The question every sentinel is asked.
    fn question(&self) -> redis::Cmd {
        let mut cmd = redis::cmd("SENTINEL");
        cmd.arg("get-master-addr-by-name").arg(&self.master_name);
        cmd
    }

    fn unknown_master(&self) -> RedisError {
        unavailable(format!("no sentinel named a master for {:?}", self.master_name))
    }
}

/// A TCP address, with TLS when `tls`.
pub fn address(host: &str, port: u16, tls: bool) -> ConnectionAddr {
    if tls {
        ConnectionAddr::TcpTls { host: host.to_string(), port, insecure: false, tls_params: None }
    } else {
        ConnectionAddr::Tcp(host.to_string(), port)
    }
}

/// An error that callers treat as "Redis unavailable, try again": a failover
/// in progress looks like this for a moment.
pub fn unavailable(message: String) -> RedisError {
    RedisError::from(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, message))
}

/// Whether a `ROLE` reply is a master's.
pub fn is_master(role: &Value) -> bool {
    match role {
        Value::Array(items) => {
            matches!(items.first(), Some(Value::BulkString(b)) if b == b"master")
                || matches!(items.first(), Some(Value::SimpleString(s)) if s == "master")
        }
        _ => false,
    }
}

/// The error for a node that is not (or no longer) the master.
pub fn not_master(host: &str, port: u16) -> RedisError {
    unavailable(format!("{host}:{port} is not a master (a failover is under way)"))
}

/// Asks each sentinel in turn, through `connect` (a sentinel's connection
/// info to a connection), for the master's address. A sentinel that is down
/// or does not know the name is skipped.
pub fn master_address(
    settings: &SentinelSettings,
    timeout: Duration,
    connect: impl Fn(ConnectionInfo, Duration) -> redis::RedisResult<redis::Connection>,
) -> redis::RedisResult<(String, u16)> {
    let mut last = None;
    for (host, port) in &settings.nodes {
        let asked = settings.sentinel_info(host, *port).and_then(|info| connect(info, timeout)).and_then(|mut conn| {
            conn.set_read_timeout(Some(timeout))?;
            conn.set_write_timeout(Some(timeout))?;
            settings.question().query::<Option<(String, u16)>>(&mut conn)
        });
        match asked {
            Ok(Some(addr)) => return Ok(addr),
            Ok(None) => last = Some(settings.unknown_master()),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| settings.unknown_master()))
}

/// The async twin of [`master_address`].
#[cfg(feature = "aio")]
pub async fn master_address_async<F, Fut>(
    settings: &SentinelSettings,
    timeout: Duration,
    connect: F,
) -> redis::RedisResult<(String, u16)>
where
    F: Fn(ConnectionInfo, Duration) -> Fut,
    Fut: std::future::Future<Output = redis::RedisResult<redis::aio::MultiplexedConnection>>,
{
    let mut last = None;
    for (host, port) in &settings.nodes {
        let asked = match settings.sentinel_info(host, *port) {
            Ok(info) => match connect(info, timeout).await {
                Ok(mut conn) => settings.question().query_async::<Option<(String, u16)>>(&mut conn).await,
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        match asked {
            Ok(Some(addr)) => return Ok(addr),
            Ok(None) => last = Some(settings.unknown_master()),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| settings.unknown_master()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(text: &str) -> Result<Option<SentinelSettings>, ConfError> {
        from_conf(&ConfFile::parse("d.conf".into(), text).expect("parses"))
    }

    #[test]
    fn standalone_is_the_default_and_refuses_sentinel_keys() {
        assert_eq!(conf("[redis]\nport = 1\n"), Ok(None));
        assert_eq!(conf("[redis]\nmode = standalone\nnodes =\n"), Ok(None));
        let err = conf("[redis]\nport = 1\nnodes = a:1\n").expect_err("nodes");
        assert_eq!(
            err.to_string(),
            "d.conf:3: [redis] nodes: is only used with mode = sentinel or cluster (mode is standalone)"
        );
    }

    #[test]
    fn cluster_is_left_to_the_cluster_reader_and_a_typo_is_refused() {
        assert_eq!(conf("[redis]\n\nmode = cluster\nnodes = a:1\n"), Ok(None));
        let err = conf("[redis]\nmode = sentinal\n").expect_err("typo");
        assert_eq!(
            err.to_string(),
            "d.conf:2: [redis] mode: \"sentinal\" is not a mode: standalone, sentinel or cluster"
        );
    }

    #[test]
    fn sentinel_needs_nodes_and_master_name_and_no_fixed_address() {
        let ok = conf("[redis]\nmode = sentinel\nnodes = 127.0.0.1:26379, [::1]:26380,s3:1\nmaster_name = m\nsentinel_password = pw\ntls = yes\n")
            .expect("valid")
            .expect("sentinel");
        assert_eq!(ok.nodes, [("127.0.0.1".into(), 26379), ("::1".into(), 26380), ("s3".into(), 1)]);
        assert!(ok.tls);
        assert!(!format!("{ok:?}").contains("pw"));
        let err = conf("[redis]\nmode = sentinel\nmaster_name = m\n").expect_err("no nodes");
        assert_eq!(
            err.to_string(),
            "d.conf:2: [redis] mode: mode = sentinel needs nodes (the sentinels: host:port,host:port,...)"
        );
        let err = conf("[redis]\nmode = sentinel\nnodes = a:1\n").expect_err("no name");
        assert_eq!(err.to_string(), "d.conf:2: [redis] mode: mode = sentinel needs master_name");
        let err = conf("[redis]\nmode = sentinel\nnodes = a:1,b\nmaster_name = m\n").expect_err("bad node");
        assert_eq!(err.to_string(), "d.conf:3: [redis] nodes: \"b\" is not host:port");
        let err = conf("[redis]\nhost = h\nmode = sentinel\nnodes = a:1\nmaster_name = m\n").expect_err("host");
        assert_eq!(
            err.to_string(),
            "d.conf:2: [redis] host: not used with mode = sentinel: the sentinels name the master (nodes)"
        );
        assert!(parse_nodes("a:0").is_err() && parse_nodes("a:1,").is_err() && parse_nodes(":1").is_err());
    }
}
