//! The async client: the blocking [`crate::Delayer`]'s methods, on tokio.
//!
//! Ordinary operations share one multiplexed connection that reconnects by
//! itself. `bpop` and `breserve` block their connection inside Redis, so
//! each takes a dedicated connection, kept for reuse afterwards: one waiting
//! consumer never stalls the others' pushes and pops. What is sent and how
//! replies read is shared with the blocking client (`ops`, `wait`).

use crate::aio_shared::AsyncConn;
use crate::aio_shared::Shared;
use crate::conf;
use crate::connection::DEFAULT_CONNECT_TIMEOUT as CONNECT_TIMEOUT;
use crate::error::{is_lost_connection, Error, Result};
use crate::keys::{Layout, Names, DEFAULT_PREFIX};
use crate::ops::{self, Request, Step};
use crate::target::{is_read_only, Target};
use delayer_protocol::op::{Error as OpError, Op};
use redis::aio::ConnectionManagerConfig;
use redis::{AsyncConnectionConfig, Client, Value};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Bound on an ordinary reply (a 1 MiB body or a 1000-job pipeline included).
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);
/// Idle blocking connections kept for the next bpop.
const MAX_IDLE_BLOCKING: usize = 16;

/// An async Delayer client. Cheap to clone; clones share connections.
///
/// ```no_run
/// use delayer::aio::Delayer;
/// use std::time::Duration;
///
/// # async fn run() -> delayer::Result<()> {
/// let delayer = Delayer::open("redis://127.0.0.1:6379/0")?;
/// delayer.push("close_order", "order:42", Duration::from_secs(1800)).await?;
/// if let Some(job) = delayer.bpop("close_order", Duration::from_secs(5)).await? {
///     println!("closing {}", job.id);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Delayer {
    target: Target,
    shared: Shared,
    blocking: Arc<Mutex<Vec<AsyncConn>>>,
    // The calls (crate::twins) read these two.
    pub(crate) names: Names,
    /// Pushes wait this long for a replica's acknowledgement (`durable`).
    pub(crate) durable: Option<Duration>,
}

impl std::fmt::Debug for Delayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("aio::Delayer").field("names", &self.names).finish_non_exhaustive()
    }
}

impl Delayer {
    /// A client for the Redis at `url`, key prefix `delayer:`. Connects on
    /// first use; call it inside a tokio runtime.
    pub fn open(url: &str) -> Result<Delayer> {
        Delayer::with_options(crate::client::redis_client(url)?, DEFAULT_PREFIX)
    }

    /// As [`crate::Delayer::from_conf`]: `[redis]`, `key_prefix` and
    /// `layout`, from a file the server would accept as to its sections and
    /// keys.
    pub fn from_conf(path: impl AsRef<Path>) -> Result<Delayer> {
        let (redis, names) = conf::for_client(path)?;
        let client = Delayer::with_target(redis.target()?, names.prefix())?;
        Ok(Delayer { names, ..client })
    }

    /// A client from a redis-rs client (any address, TLS settings) and a key
    /// prefix.
    pub fn with_options(client: Client, prefix: &str) -> Result<Delayer> {
        Delayer::with_target(Target::fixed(client), prefix)
    }

    /// A client for a [`Target`]: with [`crate::conf::RedisSettings::target`]
    /// in sentinel mode, it follows the master through failovers.
    pub fn with_target(target: Target, prefix: &str) -> Result<Delayer> {
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_number_of_retries(1);
        let shared = Shared::new(target.clone(), config)?;
        Ok(Delayer {
            target,
            shared,
            blocking: Arc::default(),
            names: Names::new(prefix, Layout::default()),
            durable: None,
        })
    }

    /// As [`crate::Delayer::durable`]: pushes wait for a replica. The write
    /// and its WAIT go on a connection of their own (as bpop's), so a WAIT
    /// never holds up the calls sharing the multiplexed connection.
    pub fn durable(&self, timeout: Duration) -> Delayer {
        Delayer { durable: Some(timeout), ..self.clone() }
    }

    /// As [`crate::Delayer::with_prefix`].
    pub fn with_prefix(mut self, prefix: &str) -> Delayer {
        self.names = self.names.with_prefix(prefix);
        self
    }

    /// As [`crate::Delayer::with_layout`].
    pub fn with_layout(mut self, layout: Layout) -> Result<Delayer> {
        self.names = ops::names(self.names.prefix(), layout)?;
        Ok(self)
    }

    /// The key names this client uses.
    pub fn keys(&self) -> &Names {
        &self.names
    }

    /// As [`crate::Delayer::eviction_policy`].
    #[doc(hidden)]
    pub async fn eviction_policy(&self) -> std::result::Result<String, String> {
        let (mut conn, _) = self.shared.get().await.map_err(|e| e.to_string())?;
        crate::eviction::read_async(&mut conn).await
    }

    /// One request on the shared connection. A request that fails because
    /// the connection is gone (Redis restarted or went away) is made once
    /// more: the connection manager has started a new connection meanwhile,
    /// so once Redis answers again the next call works.
    /// In sentinel mode a lost connection or a demoted master's `READONLY`
    /// (nothing written) sends the request to the master the sentinels name.
    pub(crate) async fn call(&self, req: &Request) -> Result<Value> {
        let (mut conn, generation) = self.shared.get().await?;
        match send(&mut conn, req).await {
            Err(e) if self.shared.follows_failover() && (is_lost_connection(&e) || is_read_only(&e)) => {
                let (mut conn, _) = self.shared.replace(generation).await?;
                Ok(send(&mut conn, req).await?)
            }
            Err(e) if is_lost_connection(&e) => Ok(send(&mut conn, req).await?),
            reply => Ok(reply?),
        }
    }

    /// Runs an operation: each request on the shared connection, or one
    /// that asks for it ([`Op::alone`]: a blocking wait, a durable push) on
    /// a connection of its own.
    pub(crate) async fn run<T: Send, E: From<OpError>>(&self, op: std::result::Result<Op<'_, T, E>, E>) -> Result<T>
    where
        Error: From<E>,
    {
        let mut op = op?;
        if op.own_connection {
            return self.run_alone(op).await;
        }
        let mut step = op.start()?;
        loop {
            match step {
                Step::Done(out) => return Ok(out),
                Step::Send(req) => step = op.next(self.call(&req).await?)?,
            }
        }
    }

    /// Runs an operation on a connection of its own (reused after a clean
    /// finish). An idle connection kept from an earlier wait may have been
    /// closed by Redis meanwhile: a request that finds it gone before its
    /// first reply is made again on a new connection.
    async fn run_alone<T: Send, E: From<OpError>>(&self, mut op: Op<'_, T, E>) -> Result<T>
    where
        Error: From<E>,
    {
        let idle = self.blocking.lock().ok().and_then(|mut idle| idle.pop());
        let (mut conn, mut fresh) = match idle {
            Some(conn) => (conn, true),
            None => (self.blocking_connection().await?, false),
        };
        let mut step = op.start()?;
        let out = loop {
            let req = match step {
                Step::Done(out) => break out,
                Step::Send(req) => req,
            };
            let reply = match send(&mut conn, &req).await {
                Err(e) if (fresh && is_lost_connection(&e)) || (self.target.follows_failover() && is_read_only(&e)) => {
                    conn = self.blocking_connection().await?;
                    send(&mut conn, &req).await?
                }
                reply => reply?,
            };
            fresh = false;
            step = op.next(reply)?;
        };
        self.reuse(conn);
        Ok(out)
    }

    /// Keeps a connection of its own that finished cleanly for the next
    /// operation that needs one.
    fn reuse(&self, conn: AsyncConn) {
        if let Ok(mut idle) = self.blocking.lock() {
            if idle.len() < MAX_IDLE_BLOCKING {
                idle.push(conn);
            }
        }
    }

    /// A new connection for blocking waits.
    async fn blocking_connection(&self) -> Result<AsyncConn> {
        // No response timeout: a blocking command answers when a job comes
        // or its own wait ends, however long that is.
        if self.target.is_cluster() {
            return Ok(AsyncConn::Cluster(self.target.connect_cluster_async(CONNECT_TIMEOUT, None).await?));
        }
        let config =
            AsyncConnectionConfig::new().set_connection_timeout(Some(CONNECT_TIMEOUT)).set_response_timeout(None);
        Ok(AsyncConn::Multiplexed(self.target.connect_async(CONNECT_TIMEOUT, &config).await?))
    }
}

/// Sends `req` on an async connection.
async fn send(conn: &mut AsyncConn, req: &Request) -> redis::RedisResult<Value> {
    match req {
        Request::Script(inv) => inv.invoke_async(conn).await,
        Request::Batch(batch) => {
            let cluster = conn.is_cluster();
            batch.send_async(conn, cluster).await
        }
        // The wait plus a grace, as the blocking client's read timeout: a
        // Redis that stalled, or a connection that died silently, must not
        // hold a worker's wait for ever (the connection is then dropped).
        Request::Blocking(cmd, Some(wait)) => {
            let bound = *wait + crate::client::BLOCKING_GRACE;
            tokio::time::timeout(bound, cmd.query_async(conn)).await.unwrap_or_else(|_| {
                let stalled = std::io::Error::new(std::io::ErrorKind::TimedOut, "redis did not answer a blocking wait");
                Err(redis::RedisError::from(stalled))
            })
        }
        Request::Blocking(cmd, None) => cmd.query_async(conn).await,
        Request::Replicas(cmd, _, keys) => conn.least_on_nodes_of(cmd, keys).await,
    }
}
