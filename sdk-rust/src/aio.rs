//! The async client: the blocking [`crate::Delayer`]'s methods, on tokio.
//!
//! Ordinary operations share one multiplexed connection that reconnects by
//! itself. `bpop` blocks its connection inside Redis (BRPOP), so it takes a
//! dedicated connection, kept for reuse afterwards: one waiting consumer
//! never stalls the others' pushes and pops.

use crate::conf::{self, ConfFile, RedisSettings};
use crate::connection::DEFAULT_CONNECT_TIMEOUT as CONNECT_TIMEOUT;
use crate::error::{Error, Result};
use crate::keys::{Keys, DEFAULT_PREFIX};
use crate::ops::{self, DeadAction, Ending};
use crate::{DeadLetter, Job, JobRef, Message, Reserved};
use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::{AsyncConnectionConfig, Client};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

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
    client: Client,
    shared: ConnectionManager,
    blocking: Arc<Mutex<Vec<MultiplexedConnection>>>,
    keys: Keys,
}

impl std::fmt::Debug for Delayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("aio::Delayer").field("keys", &self.keys).finish_non_exhaustive()
    }
}

impl Delayer {
    /// A client for the Redis at `url`, key prefix `delayer:`. Connects on
    /// first use; call it inside a tokio runtime.
    pub fn open(url: &str) -> Result<Delayer> {
        let client = Client::open(url).map_err(|e| Error::InvalidArgument(format!("not a usable Redis URL: {e}")))?;
        Delayer::with_options(client, DEFAULT_PREFIX)
    }

    /// A client configured by a `delayer.conf` (`[redis]` and `key_prefix`).
    pub fn from_conf(path: impl AsRef<Path>) -> Result<Delayer> {
        let file = ConfFile::load(path)?;
        let client = RedisSettings::from_conf(&file)?.client()?;
        Delayer::with_options(client, &conf::key_prefix(&file))
    }

    /// A client from a redis-rs client (any address, TLS settings) and a key
    /// prefix.
    pub fn with_options(client: Client, prefix: &str) -> Result<Delayer> {
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_number_of_retries(1);
        let shared = ConnectionManager::new_lazy_with_config(client.clone(), config)?;
        Ok(Delayer { client, shared, blocking: Arc::default(), keys: Keys::new(prefix) })
    }

    /// The same client under another key prefix.
    pub fn with_prefix(mut self, prefix: &str) -> Delayer {
        self.keys = Keys::new(prefix);
        self
    }

    /// The key names this client uses.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// As [`crate::Delayer::push`].
    pub async fn push(&self, topic: &str, id: &str, delay: Duration) -> Result<SystemTime> {
        self.push_job(&Job::new(topic, id, delay)).await
    }

    /// As [`crate::Delayer::push_job`].
    pub async fn push_job(&self, job: &Job) -> Result<SystemTime> {
        let due: String = ops::push(&self.keys, job)?.invoke_async(&mut self.shared.clone()).await?;
        ops::parse_due(&due)
    }

    /// As [`crate::Delayer::push_many`].
    pub async fn push_many(&self, jobs: &[Job]) -> Result<Vec<SystemTime>> {
        let mut conn = self.shared.clone();
        let mut due = Vec::with_capacity(jobs.len());
        for pipe in ops::push_many(&self.keys, jobs)? {
            let replies: Vec<Vec<String>> = pipe.query_async(&mut conn).await?;
            for r in replies.iter().flatten() {
                due.push(ops::parse_due(r)?);
            }
        }
        Ok(due)
    }

    /// As [`crate::Delayer::pop`].
    pub async fn pop(&self, topic: &str) -> Result<Option<Message>> {
        let inv = ops::pop(&self.keys, topic)?;
        ops::parse_message(inv.invoke_async(&mut self.shared.clone()).await?)
    }

    /// As [`crate::Delayer::bpop`]: waits up to `timeout`
    /// (`Duration::ZERO`: forever) on a connection of its own.
    pub async fn bpop(&self, topic: &str, timeout: Duration) -> Result<Option<Message>> {
        let deadline = ops::bpop_deadline(topic, timeout)?;
        let mut conn = self.blocking_connection().await?;
        let mut found = None;
        while let Some(brpop) = ops::brpop(&self.keys, topic, deadline) {
            let Some((_, id)): Option<(Vec<u8>, Vec<u8>)> = brpop.query_async(&mut conn).await? else { break };
            if let Some(message) = ops::parse_message(ops::take(&self.keys, &id).invoke_async(&mut conn).await?)? {
                found = Some(message);
                break;
            }
        }
        self.reuse(conn);
        Ok(found)
    }

    /// As [`crate::Delayer::breserve`]: waits up to `timeout`
    /// (`Duration::ZERO`: forever) on a connection of its own.
    pub async fn breserve(&self, topic: &str, ttr: Duration, timeout: Duration) -> Result<Option<Reserved>> {
        let reserve = ops::reserve(&self.keys, topic, ttr)?;
        let deadline = ops::bpop_deadline(topic, timeout)?;
        let mut conn = self.blocking_connection().await?;
        let mut found = None;
        while let Some(wait) = ops::wait_ready(&self.keys, topic, deadline) {
            let ready: Option<Vec<u8>> = wait.query_async(&mut conn).await?;
            if ready.is_none() {
                break;
            }
            if let Some(job) = ops::parse_reserved(reserve.invoke_async(&mut conn).await?)? {
                found = Some(job);
                break;
            }
        }
        self.reuse(conn);
        Ok(found)
    }

    /// Keeps a blocking connection that finished cleanly for the next wait.
    fn reuse(&self, conn: MultiplexedConnection) {
        if let Ok(mut idle) = self.blocking.lock() {
            if idle.len() < MAX_IDLE_BLOCKING {
                idle.push(conn);
            }
        }
    }

    /// As [`crate::Delayer::reserve`].
    pub async fn reserve(&self, topic: &str, ttr: Duration) -> Result<Option<Reserved>> {
        let inv = ops::reserve(&self.keys, topic, ttr)?;
        ops::parse_reserved(inv.invoke_async(&mut self.shared.clone()).await?)
    }

    /// As [`crate::Delayer::ack`].
    pub async fn ack<'a>(&self, job: impl Into<JobRef<'a>>) -> Result<bool> {
        let n: i64 = ops::ack(&self.keys, job.into())?.invoke_async(&mut self.shared.clone()).await?;
        Ok(n == 1)
    }

    /// As [`crate::Delayer::touch`].
    pub async fn touch<'a>(&self, job: impl Into<JobRef<'a>>, ttr: Duration) -> Result<Option<SystemTime>> {
        let inv = ops::touch(&self.keys, job.into(), ttr)?;
        let deadline: Option<String> = inv.invoke_async(&mut self.shared.clone()).await?;
        deadline.map(|d| ops::parse_due(&d)).transpose()
    }

    /// As [`crate::Delayer::release`].
    pub async fn release<'a>(&self, job: impl Into<JobRef<'a>>, delay: Option<Duration>) -> Result<bool> {
        let inv = ops::release(&self.keys, job.into(), delay.map_or(Ending::Backoff, Ending::After))?;
        ops::parse_released(inv.invoke_async(&mut self.shared.clone()).await?)
    }

    /// As [`crate::Delayer::bury`].
    pub async fn bury<'a>(&self, job: impl Into<JobRef<'a>>) -> Result<bool> {
        let inv = ops::release(&self.keys, job.into(), Ending::Bury)?;
        ops::parse_released(inv.invoke_async(&mut self.shared.clone()).await?)
    }

    /// As [`crate::Delayer::reschedule`].
    pub async fn reschedule(&self, id: &str, delay: Duration) -> Result<Option<SystemTime>> {
        let inv = ops::reschedule(&self.keys, id, delay)?;
        let due: Option<String> = inv.invoke_async(&mut self.shared.clone()).await?;
        due.map(|d| ops::parse_due(&d)).transpose()
    }

    /// As [`crate::Delayer::dead_letters`].
    pub async fn dead_letters(&self, topic: &str, start: usize, count: usize) -> Result<Vec<DeadLetter>> {
        let inv = ops::dead_list(&self.keys, topic, start, count)?;
        ops::parse_dead_letters(inv.invoke_async(&mut self.shared.clone()).await?)
    }

    /// As [`crate::Delayer::requeue_dead`].
    pub async fn requeue_dead(&self, topic: &str, ids: Option<&[&str]>) -> Result<u64> {
        self.drain_dead(topic, DeadAction::Requeue, ids).await
    }

    /// As [`crate::Delayer::purge_dead`].
    pub async fn purge_dead(&self, topic: &str, ids: Option<&[&str]>) -> Result<u64> {
        self.drain_dead(topic, DeadAction::Purge, ids).await
    }

    async fn drain_dead(&self, topic: &str, action: DeadAction, ids: Option<&[&str]>) -> Result<u64> {
        let mut conn = self.shared.clone();
        let mut total = 0;
        for call in ops::dead_drain(&self.keys, topic, action, ids)? {
            loop {
                let (done, taken) = ops::parse_drained(call.invoke_async(&mut conn).await?)?;
                total += done;
                if !ops::drain_again(ids, taken) {
                    break;
                }
            }
        }
        Ok(total)
    }

    /// As [`crate::Delayer::remove`].
    pub async fn remove(&self, id: &str) -> Result<bool> {
        let n: i64 = ops::remove(&self.keys, id)?.invoke_async(&mut self.shared.clone()).await?;
        Ok(n == 1)
    }

    async fn blocking_connection(&self) -> Result<MultiplexedConnection> {
        let reused = self.blocking.lock().ok().and_then(|mut idle| idle.pop());
        if let Some(conn) = reused {
            return Ok(conn);
        }
        // No response timeout: BRPOP answers when a job comes or its own wait ends.
        let config =
            AsyncConnectionConfig::new().set_connection_timeout(Some(CONNECT_TIMEOUT)).set_response_timeout(None);
        Ok(self.client.get_multiplexed_async_connection_with_config(&config).await?)
    }
}
