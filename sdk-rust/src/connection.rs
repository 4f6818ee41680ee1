//! Pooled Redis connections with bounded waits.
//!
//! redis-rs's own r2d2 glue connects without a timeout and pings on every
//! checkout; this manager bounds connecting (a dead host fails fast instead of
//! hanging), optionally bounds each reply, and leaves health checks to the
//! errors the commands themselves return. The server and the SDK share it.

use crate::target::Target;
use redis::{Client, Connection, ConnectionLike, RedisError};
use std::time::Duration;

/// How long connecting (TCP, AUTH, SELECT) may take, unless told otherwise.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// An r2d2 connection manager for one Redis, or for the master of a
/// Sentinel deployment (each new connection asks the sentinels).
#[derive(Debug, Clone)]
pub struct Manager {
    target: Target,
    connect_timeout: Duration,
    io_timeout: Option<Duration>,
}

impl Manager {
    /// A manager for `client`'s Redis. `io_timeout` bounds every read and
    /// write (`None` for clients that block on BRPOP).
    pub fn new(client: Client, connect_timeout: Duration, io_timeout: Option<Duration>) -> Self {
        Manager::with_target(Target::fixed(client), connect_timeout, io_timeout)
    }

    /// A manager for `target` (a fixed Redis, or the sentinels' master).
    pub fn with_target(target: Target, connect_timeout: Duration, io_timeout: Option<Duration>) -> Self {
        Manager { target, connect_timeout, io_timeout }
    }

    /// Where connections go.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// A new connection with this manager's timeouts (sentinel mode: to the
    /// master of the moment).
    pub fn connect(&self) -> Result<Connection, RedisError> {
        let conn = self.target.connect(self.connect_timeout)?;
        conn.set_read_timeout(self.io_timeout)?;
        conn.set_write_timeout(self.io_timeout)?;
        Ok(conn)
    }
}

/// A pooled connection that can be retired: one that met a demoted master
/// (`READONLY`) is still open, but must not go back into the pool.
pub struct PooledConn {
    conn: Connection,
    retired: bool,
}

impl PooledConn {
    /// Drops the connection from the pool once it is returned.
    pub fn retire(&mut self) {
        self.retired = true;
    }
}

impl std::ops::Deref for PooledConn {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        &self.conn
    }
}

impl std::ops::DerefMut for PooledConn {
    fn deref_mut(&mut self) -> &mut Connection {
        &mut self.conn
    }
}

impl r2d2::ManageConnection for Manager {
    type Connection = PooledConn;
    type Error = RedisError;

    fn connect(&self) -> Result<PooledConn, RedisError> {
        Ok(PooledConn { conn: Manager::connect(self)?, retired: false })
    }

    fn is_valid(&self, conn: &mut PooledConn) -> Result<(), RedisError> {
        redis::cmd("PING").query::<()>(&mut conn.conn)
    }

    fn has_broken(&self, conn: &mut PooledConn) -> bool {
        conn.retired || !conn.conn.is_open()
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
    build_pool_for(Target::fixed(client), opts)
}

/// As [`build_pool`], for a [`Target`] (sentinel mode included).
pub fn build_pool_for(target: Target, opts: &PoolOptions) -> r2d2::Pool<Manager> {
    let manager = Manager::with_target(target, opts.connect_timeout, opts.io_timeout);
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
