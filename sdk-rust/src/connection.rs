//! Pooled Redis connections with bounded waits.
//!
//! redis-rs's own r2d2 glue connects without a timeout and pings on every
//! checkout; this manager bounds connecting (a dead host fails fast instead of
//! hanging), optionally bounds each reply, and leaves health checks to the
//! errors the commands themselves return. The server and the SDK share it.

use redis::{Client, Connection, ConnectionLike, RedisError};
use std::time::Duration;

/// How long connecting (TCP, AUTH, SELECT) may take, unless told otherwise.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// An r2d2 connection manager for one Redis.
#[derive(Debug, Clone)]
pub struct Manager {
    client: Client,
    connect_timeout: Duration,
    io_timeout: Option<Duration>,
}

impl Manager {
    /// A manager for `client`'s Redis. `io_timeout` bounds every read and
    /// write (`None` for clients that block on BRPOP).
    pub fn new(client: Client, connect_timeout: Duration, io_timeout: Option<Duration>) -> Self {
        Manager { client, connect_timeout, io_timeout }
    }
}

impl r2d2::ManageConnection for Manager {
    type Connection = Connection;
    type Error = RedisError;

    fn connect(&self) -> Result<Connection, RedisError> {
        let conn = self.client.get_connection_with_timeout(self.connect_timeout)?;
        conn.set_read_timeout(self.io_timeout)?;
        conn.set_write_timeout(self.io_timeout)?;
        Ok(conn)
    }

    fn is_valid(&self, conn: &mut Connection) -> Result<(), RedisError> {
        redis::cmd("PING").query::<()>(conn)
    }

    fn has_broken(&self, conn: &mut Connection) -> bool {
        !conn.is_open()
    }
}

/// The pool's shape.
#[derive(Debug, Clone)]
pub struct PoolOptions {
    /// Most connections open at once.
    pub max_size: u32,
    /// Idle connections kept open.
    pub min_idle: u32,
    /// Close connections idle this long (`None`: never).
    pub idle_timeout: Option<Duration>,
    /// Close connections this old (`None`: never).
    pub max_lifetime: Option<Duration>,
    /// How long connecting, and waiting for a free connection, may take.
    pub connect_timeout: Duration,
    /// Bound on each reply (`None`: wait as long as Redis takes).
    pub io_timeout: Option<Duration>,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            max_size: 8,
            min_idle: 0,
            idle_timeout: Some(Duration::from_secs(300)),
            max_lifetime: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            io_timeout: None,
        }
    }
}

/// A connection pool: no connection is opened until one is needed, and
/// connection errors are returned to the caller rather than logged by r2d2.
pub fn build_pool(client: Client, opts: &PoolOptions) -> r2d2::Pool<Manager> {
    let manager = Manager::new(client, opts.connect_timeout, opts.io_timeout);
    r2d2::Pool::builder()
        .max_size(opts.max_size.max(1))
        .min_idle(Some(opts.min_idle.min(opts.max_size)))
        // r2d2 panics on zero durations; zero means "never" here.
        .idle_timeout(opts.idle_timeout.filter(|d| !d.is_zero()))
        .max_lifetime(opts.max_lifetime.filter(|d| !d.is_zero()))
        .connection_timeout(opts.connect_timeout.max(Duration::from_millis(1)))
        .test_on_check_out(false)
        .error_handler(Box::new(r2d2::NopErrorHandler))
        .build_unchecked(manager)
}
