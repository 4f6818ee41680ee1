//! The blocking client: push, pop, bpop, remove.
//!
//! Each operation validates its input, then runs one of the protocol's Lua
//! scripts on a pooled connection. See docs/PROTOCOL.md for the semantics.

use crate::conf::{self, ConfFile, RedisSettings};
use crate::connection::{build_pool, Manager, PoolOptions};
use crate::error::{Error, Result};
use crate::keys::{Keys, DEFAULT_PREFIX};
use crate::ops::{self, DeadAction, Ending};
use crate::reliable::{Backoff, DeadLetter, JobRef, Reserved};
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
    /// For reserve: reservations allowed before dead letters (0: no limit).
    /// `None` leaves it to reserve's default, 25.
    pub max_attempts: Option<u32>,
    /// For reserve: the wait before a retry. `None` leaves it to reserve's
    /// default, exponential from 1 s to 1 h.
    pub backoff: Option<Backoff>,
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
            max_attempts: None,
            backoff: None,
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

    /// Sets how many reservations the job gets before it goes to dead
    /// letters (0: no limit). Classic pop ignores it.
    pub fn max_attempts(mut self, n: u32) -> Job {
        self.max_attempts = Some(n);
        self
    }

    /// Sets the wait before each retry. Classic pop ignores it.
    pub fn backoff(mut self, backoff: Backoff) -> Job {
        self.backoff = Some(backoff);
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

    /// Moves waiting job `id` to be due `delay` from now. `None` when it is
    /// not waiting (ready, reserved, dead, gone or unknown).
    pub fn reschedule(&self, id: &str, delay: Duration) -> Result<Option<SystemTime>> {
        let due: Option<String> = ops::reschedule(&self.keys, id, delay)?.invoke(&mut *self.conn()?)?;
        due.map(|d| ops::parse_due(&d)).transpose()
    }

    /// Takes the next ready job of `topic` *reserved*: no other worker gets it
    /// until [`Delayer::ack`], [`Delayer::release`] or [`Delayer::bury`], or
    /// until `ttr` has passed, when the server hands it out again (at least
    /// once).
    ///
    /// ```no_run
    /// # fn work(_: &[u8]) -> Result<(), ()> { Ok(()) }
    /// # fn main() -> delayer::Result<()> {
    /// # let delayer = delayer::Delayer::open("redis://127.0.0.1/")?;
    /// use std::time::Duration;
    /// while let Some(job) = delayer.breserve("sms", Duration::from_secs(60), Duration::from_secs(5))? {
    ///     match work(&job.body) {
    ///         Ok(()) => delayer.ack(&job)?,
    ///         Err(()) => delayer.release(&job, None)?, // retry after its backoff
    ///     };
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn reserve(&self, topic: &str, ttr: Duration) -> Result<Option<Reserved>> {
        let inv = ops::reserve(&self.keys, topic, ttr)?;
        ops::parse_reserved(inv.invoke(&mut *self.conn()?)?)
    }

    /// Like [`Delayer::reserve`], but waits up to `timeout` for a job
    /// (`Duration::ZERO` waits forever). `None` when the time ran out.
    /// Waiting takes nothing from the queue, so a worker that dies while
    /// waiting loses nothing.
    pub fn breserve(&self, topic: &str, ttr: Duration, timeout: Duration) -> Result<Option<Reserved>> {
        let reserve = ops::reserve(&self.keys, topic, ttr)?;
        let deadline = ops::bpop_deadline(topic, timeout)?;
        let mut conn = self.conn()?;
        while let Some(wait) = ops::wait_ready(&self.keys, topic, deadline) {
            let ready: Option<Vec<u8>> = wait.query(&mut *conn)?;
            if ready.is_none() {
                break;
            }
            if let Some(job) = ops::parse_reserved(reserve.invoke(&mut *conn)?)? {
                return Ok(Some(job));
            }
        }
        Ok(None)
    }

    /// The job is done: deletes it. `false` when the reservation was not
    /// held (already ended, or expired and handed out again): then nothing
    /// changes. Takes a [`Reserved`] job, or an id (any current reservation).
    pub fn ack<'a>(&self, job: impl Into<JobRef<'a>>) -> Result<bool> {
        let n: i64 = ops::ack(&self.keys, job.into())?.invoke(&mut *self.conn()?)?;
        Ok(n == 1)
    }

    /// Still working on it: the reservation's deadline becomes `ttr` from
    /// now, so the job is not handed out again meanwhile. Returns the new
    /// deadline, or `None` when the reservation was not held (as for
    /// [`Delayer::ack`]). The attempt count does not change.
    pub fn touch<'a>(&self, job: impl Into<JobRef<'a>>, ttr: Duration) -> Result<Option<SystemTime>> {
        let deadline: Option<String> = ops::touch(&self.keys, job.into(), ttr)?.invoke(&mut *self.conn()?)?;
        deadline.map(|d| ops::parse_due(&d)).transpose()
    }

    /// A failed attempt: the job is due again after `delay`, or after its
    /// backoff when `None`; past its max_attempts it goes to dead letters
    /// instead. `false` when the reservation was not held.
    pub fn release<'a>(&self, job: impl Into<JobRef<'a>>, delay: Option<Duration>) -> Result<bool> {
        let ending = delay.map_or(Ending::Backoff, Ending::After);
        ops::parse_released(ops::release(&self.keys, job.into(), ending)?.invoke(&mut *self.conn()?)?)
    }

    /// Gives up on the job: it goes to its topic's dead letters now.
    /// `false` when the reservation was not held.
    pub fn bury<'a>(&self, job: impl Into<JobRef<'a>>) -> Result<bool> {
        ops::parse_released(ops::release(&self.keys, job.into(), Ending::Bury)?.invoke(&mut *self.conn()?)?)
    }

    /// Up to `count` (1 to 1000) of `topic`'s dead letters, newest first,
    /// from position `start`.
    pub fn dead_letters(&self, topic: &str, start: usize, count: usize) -> Result<Vec<DeadLetter>> {
        let inv = ops::dead_list(&self.keys, topic, start, count)?;
        ops::parse_dead_letters(inv.invoke(&mut *self.conn()?)?)
    }

    /// Puts dead letters back into the pool, due now, with their attempts
    /// reset: those with the given ids, or all with `None`. Returns how many.
    pub fn requeue_dead(&self, topic: &str, ids: Option<&[&str]>) -> Result<u64> {
        self.drain_dead(topic, DeadAction::Requeue, ids)
    }

    /// Deletes dead letters for good: those with the given ids, or all with
    /// `None`. Returns how many.
    pub fn purge_dead(&self, topic: &str, ids: Option<&[&str]>) -> Result<u64> {
        self.drain_dead(topic, DeadAction::Purge, ids)
    }

    fn drain_dead(&self, topic: &str, action: DeadAction, ids: Option<&[&str]>) -> Result<u64> {
        let calls = ops::dead_drain(&self.keys, topic, action, ids)?;
        let mut conn = self.conn()?;
        let mut total = 0;
        for call in calls {
            loop {
                let (done, taken) = ops::parse_drained(call.invoke(&mut *conn)?)?;
                total += done;
                if !ops::drain_again(ids, taken) {
                    break;
                }
            }
        }
        Ok(total)
    }
}
