//! The blocking client: push, pop, bpop, remove.
//!
//! Each operation validates its input, then runs one of the protocol's Lua
//! scripts on a pooled connection. See docs/PROTOCOL.md for the semantics.

use crate::conf::{self, ConfFile, RedisSettings};
use crate::connection::{build_pool, Manager, PoolOptions};
use crate::error::{Error, Result};
use crate::keys::{Keys, DEFAULT_PREFIX};
use crate::ops;
use crate::validate::DEFAULT_READY_MAX_LIFETIME;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// A job handed to a consumer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The id given at push.
    pub id: String,
    /// The topic it was pushed to.
    pub topic: String,
    /// The body given at push (empty if none).
    pub body: Vec<u8>,
}

impl Message {
    /// The body as UTF-8 text, if it is.
    pub fn body_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.body).ok()
    }
}

/// A job to push: the common case is `Job::new(topic, id, delay)`, then
/// optionally a body and a ready_max_lifetime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// The ready queue the job goes to when due.
    pub topic: String,
    /// The caller's id for the job; one job per id.
    pub id: String,
    /// How long from now (Redis's clock) until it is due.
    pub delay: Duration,
    /// Opaque bytes for the consumer.
    pub body: Vec<u8>,
    /// How long the job's data is kept once due, if nobody pops it.
    pub ready_max_lifetime: Duration,
}

impl Job {
    /// A job with an empty body and the default ready_max_lifetime (7 days).
    pub fn new(topic: impl Into<String>, id: impl Into<String>, delay: Duration) -> Job {
        Job {
            topic: topic.into(),
            id: id.into(),
            delay,
            body: Vec::new(),
            ready_max_lifetime: DEFAULT_READY_MAX_LIFETIME,
        }
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Job {
        self.body = body.into();
        self
    }

    /// Sets how long the job's data is kept once due (whole seconds).
    pub fn ready_max_lifetime(mut self, lifetime: Duration) -> Job {
        self.ready_max_lifetime = lifetime;
        self
    }
}

/// A Delayer client. Cheap to clone; clones share one connection pool.
///
/// ```no_run
/// use delayer::Delayer;
/// use std::time::Duration;
///
/// # fn main() -> delayer::Result<()> {
/// let delayer = Delayer::open("redis://127.0.0.1:6379/0")?;
/// delayer.push("close_order", "order:42", Duration::from_secs(30 * 60))?;
/// // ... 30 minutes later, in a worker:
/// if let Some(job) = delayer.bpop("close_order", Duration::from_secs(5))? {
///     println!("closing {}", job.id);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Delayer {
    pool: r2d2::Pool<Manager>,
    keys: Keys,
}

impl std::fmt::Debug for Delayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delayer").field("keys", &self.keys).finish_non_exhaustive()
    }
}

impl Delayer {
    /// A client for the Redis at `url` (`redis://[user:password@]host:port/db`,
    /// `rediss://` for TLS, `unix:///path/to/socket`), with the default key
    /// prefix `delayer:`. Connects lazily.
    pub fn open(url: &str) -> Result<Delayer> {
        let client =
            redis::Client::open(url).map_err(|e| Error::InvalidArgument(format!("not a usable Redis URL: {e}")))?;
        Ok(Delayer::with_options(client, DEFAULT_PREFIX, &PoolOptions::default()))
    }

    /// A client configured by a `delayer.conf`: its `[redis]` section and
    /// `[delayer] key_prefix`, as the server reads them.
    pub fn from_conf(path: impl AsRef<Path>) -> Result<Delayer> {
        let file = ConfFile::load(path)?;
        let client = RedisSettings::from_conf(&file)?.client()?;
        Ok(Delayer::with_options(client, &conf::key_prefix(&file), &PoolOptions::default()))
    }

    /// A client from a redis-rs client (any address, TLS settings), a key
    /// prefix and pool options.
    pub fn with_options(client: redis::Client, prefix: &str, pool: &PoolOptions) -> Delayer {
        Delayer { pool: build_pool(client, pool), keys: Keys::new(prefix) }
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

    fn conn(&self) -> Result<r2d2::PooledConnection<Manager>> {
        Ok(self.pool.get()?)
    }

    /// Schedules an empty-bodied job `id` on `topic`, due after `delay`.
    /// Returns its due time (Redis's clock). Pushing an id that is still
    /// waiting replaces it.
    pub fn push(&self, topic: &str, id: &str, delay: Duration) -> Result<SystemTime> {
        self.push_job(&Job::new(topic, id, delay))
    }

    /// Schedules a job with a body and ready_max_lifetime of its own.
    pub fn push_job(&self, job: &Job) -> Result<SystemTime> {
        let inv = ops::push(&self.keys, job)?;
        let due: String = inv.invoke(&mut *self.conn()?)?;
        ops::parse_due(&due)
    }

    /// Schedules many jobs: 100 per script call, 10 calls per round trip.
    /// Each call's jobs are written atomically together; the whole is not.
    /// All jobs are validated before anything is sent.
    pub fn push_many(&self, jobs: &[Job]) -> Result<Vec<SystemTime>> {
        let pipes = ops::push_many(&self.keys, jobs)?;
        let mut conn = self.conn()?;
        let mut due = Vec::with_capacity(jobs.len());
        for pipe in pipes {
            let replies: Vec<Vec<String>> = pipe.query(&mut *conn)?;
            for r in replies.iter().flatten() {
                due.push(ops::parse_due(r)?);
            }
        }
        Ok(due)
    }

    /// Takes the next ready job of `topic`, if any. The job is deleted as it
    /// is handed out (at most once).
    pub fn pop(&self, topic: &str) -> Result<Option<Message>> {
        let inv = ops::pop(&self.keys, topic)?;
        ops::parse_message(inv.invoke(&mut *self.conn()?)?)
    }

    /// Like [`Delayer::pop`], but waits up to `timeout` for a job
    /// (`Duration::ZERO` waits forever). `None` when the time ran out.
    pub fn bpop(&self, topic: &str, timeout: Duration) -> Result<Option<Message>> {
        let deadline = ops::bpop_deadline(topic, timeout)?;
        let mut conn = self.conn()?;
        while let Some(brpop) = ops::brpop(&self.keys, topic, deadline) {
            let Some((_, id)): Option<(Vec<u8>, Vec<u8>)> = brpop.query(&mut *conn)? else { return Ok(None) };
            if let Some(message) = ops::parse_message(ops::take(&self.keys, &id).invoke(&mut *conn)?)? {
                return Ok(Some(message));
            }
        }
        Ok(None)
    }

    /// Cancels job `id`: a waiting job is never delivered, a ready one is
    /// skipped by pop. `false` when there was nothing to cancel.
    pub fn remove(&self, id: &str) -> Result<bool> {
        let n: i64 = ops::remove(&self.keys, id)?.invoke(&mut *self.conn()?)?;
        Ok(n == 1)
    }
}
