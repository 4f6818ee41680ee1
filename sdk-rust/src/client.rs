//! The blocking client: push, pop, bpop, remove.
//!
//! Each operation validates its input, then runs one of the protocol's Lua
//! scripts on a pooled connection. See docs/PROTOCOL.md for the semantics.

use crate::conf::{self, ConfFile, RedisSettings};
use crate::connection::{build_pool, Manager, PoolOptions};
use crate::error::{Error, Result};
use crate::keys::{Keys, DEFAULT_PREFIX};
use crate::scripts;
use crate::validate::{self, DEFAULT_READY_MAX_LIFETIME};
use redis::{ConnectionInfo, IntoConnectionInfo, Value};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How many jobs `push_many` sends per pipeline.
const PUSH_CHUNK: usize = 1000;

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
    pub topic: String,
    pub id: String,
    pub delay: Duration,
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

    /// Checks the job against the protocol's input rules; returns the delay
    /// and lifetime in milliseconds, as the push script takes them.
    fn validated(&self) -> Result<(u64, u64)> {
        validate::name("topic", &self.topic)?;
        validate::name("id", &self.id)?;
        Ok((validate::delay_ms(self.delay)?, validate::ready_max_lifetime_ms(self.ready_max_lifetime)?))
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
    /// A client for the Redis at `url` (`redis://[user:password@]host:port/db`),
    /// with the default key prefix `delayer:`. Connects lazily.
    pub fn open(url: &str) -> Result<Delayer> {
        let info = url
            .into_connection_info()
            .map_err(|e| Error::InvalidArgument(format!("not a usable Redis URL: {e}")))?;
        Delayer::with_options(info, DEFAULT_PREFIX, &PoolOptions::default())
    }

    /// A client configured by a `delayer.conf`: its `[redis]` section and
    /// `[delayer] key_prefix`, as the server reads them.
    pub fn from_conf(path: impl AsRef<Path>) -> Result<Delayer> {
        let file = ConfFile::load(path)?;
        let settings = RedisSettings::from_conf(&file)?;
        let info = settings.connection_info().map_err(Error::from)?;
        Delayer::with_options(info, &conf::key_prefix(&file), &PoolOptions::default())
    }

    /// A client from explicit connection info, key prefix and pool options.
    pub fn with_options(info: ConnectionInfo, prefix: &str, pool: &PoolOptions) -> Result<Delayer> {
        let pool = build_pool(info, pool).map_err(Error::from)?;
        Ok(Delayer { pool, keys: Keys::new(prefix) })
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
        let (delay_ms, lifetime_ms) = job.validated()?;
        let mut inv = scripts::PUSH.prepare_invoke();
        inv.key(self.keys.job_pool()).key(self.keys.job_bucket(&job.id));
        inv.arg(&job.id).arg(&job.topic).arg(&job.body[..]).arg(delay_ms).arg(lifetime_ms);
        let due: String = inv.invoke(&mut *self.conn()?)?;
        parse_due(&due)
    }

    /// Schedules many jobs, pipelined in chunks: each job is atomic, the whole
    /// is not. All jobs are validated before anything is sent.
    pub fn push_many(&self, jobs: &[Job]) -> Result<Vec<SystemTime>> {
        let checked = jobs.iter().map(Job::validated).collect::<Result<Vec<_>>>()?;
        let mut conn = self.conn()?;
        let mut due = Vec::with_capacity(jobs.len());
        for (chunk, limits) in jobs.chunks(PUSH_CHUNK).zip(checked.chunks(PUSH_CHUNK)) {
            let mut pipe = redis::pipe();
            // Loads the script if Redis lost it; a no-op otherwise.
            pipe.cmd("SCRIPT").arg("LOAD").arg(scripts::PUSH_SRC).ignore();
            for (job, (delay_ms, lifetime_ms)) in chunk.iter().zip(limits) {
                pipe.cmd("EVALSHA")
                    .arg(scripts::PUSH.get_hash())
                    .arg(2)
                    .arg(self.keys.job_pool())
                    .arg(self.keys.job_bucket(&job.id))
                    .arg(&job.id)
                    .arg(&job.topic)
                    .arg(&job.body[..])
                    .arg(delay_ms)
                    .arg(lifetime_ms);
            }
            let replies: Vec<String> = pipe.query(&mut *conn)?;
            for r in replies {
                due.push(parse_due(&r)?);
            }
        }
        Ok(due)
    }

    /// Takes the next ready job of `topic`, if any. The job is deleted as it
    /// is handed out (at most once).
    pub fn pop(&self, topic: &str) -> Result<Option<Message>> {
        validate::name("topic", topic)?;
        let mut inv = scripts::POP.prepare_invoke();
        inv.key(self.keys.ready_queue(topic)).key(self.keys.malformed()).arg(self.keys.bucket_prefix());
        let reply: Value = inv.invoke(&mut *self.conn()?)?;
        parse_message(reply)
    }

    /// Like [`Delayer::pop`], but waits up to `timeout` for a job
    /// (`Duration::ZERO` waits forever). `None` when the time ran out.
    pub fn bpop(&self, topic: &str, timeout: Duration) -> Result<Option<Message>> {
        validate::name("topic", topic)?;
        let queue = self.keys.ready_queue(topic);
        let deadline = (!timeout.is_zero()).then(|| Instant::now() + timeout);
        let mut conn = self.conn()?;
        loop {
            let wait = match deadline {
                None => 0.0,
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(None);
                    }
                    // BRPOP takes seconds; 1 ms is its finest useful step.
                    left.as_secs_f64().max(0.001)
                }
            };
            // Raw bytes: an id is used as it is, even one that is not UTF-8.
            let popped: Option<(Vec<u8>, Vec<u8>)> = redis::cmd("BRPOP").arg(&queue).arg(wait).query(&mut *conn)?;
            let Some((_, id)) = popped else { return Ok(None) };
            let mut inv = scripts::TAKE.prepare_invoke();
            inv.key(self.keys.job_bucket_bytes(&id)).key(self.keys.malformed()).arg(&id[..]);
            let reply: Value = inv.invoke(&mut *conn)?;
            if let Some(message) = parse_message(reply)? {
                return Ok(Some(message));
            }
        }
    }

    /// Cancels job `id`: a waiting job is never delivered, a ready one is
    /// skipped by pop. `false` when there was nothing to cancel.
    pub fn remove(&self, id: &str) -> Result<bool> {
        validate::name("id", id)?;
        let mut inv = scripts::REMOVE.prepare_invoke();
        inv.key(self.keys.job_pool()).key(self.keys.job_bucket(id)).arg(id);
        let n: i64 = inv.invoke(&mut *self.conn()?)?;
        Ok(n == 1)
    }
}

/// "1763750000.125" (Unix seconds, as the push script returns it).
fn parse_due(s: &str) -> Result<SystemTime> {
    let secs: f64 = s.parse().map_err(|_| Error::Protocol(format!("push returned {s:?}, not a due time")))?;
    if !secs.is_finite() || secs < 0.0 {
        return Err(Error::Protocol(format!("push returned {s:?}, not a due time")));
    }
    Ok(UNIX_EPOCH + Duration::from_millis((secs * 1000.0).round() as u64))
}

/// `[id, topic, body]` or nil, from pop.lua / take.lua.
fn parse_message(reply: Value) -> Result<Option<Message>> {
    let parts = match reply {
        Value::Nil => return Ok(None),
        Value::Array(parts) if parts.len() == 3 => parts,
        other => return Err(Error::Protocol(format!("expected [id, topic, body], got {other:?}"))),
    };
    let mut fields = parts.into_iter().map(|v| match v {
        Value::BulkString(bytes) => Ok(bytes),
        other => Err(Error::Protocol(format!("expected a string in a job, got {other:?}"))),
    });
    let mut next = || fields.next().unwrap_or_else(|| Err(Error::Protocol("short job reply".into())));
    let id = next()?;
    let topic = next()?;
    let body = next()?;
    // Ids and topics we write are UTF-8; one written by a foreign client that
    // is not must still reach the consumer, so it is converted, not refused.
    Ok(Some(Message {
        id: String::from_utf8_lossy(&id).into_owned(),
        topic: String::from_utf8_lossy(&topic).into_owned(),
        body,
    }))
}
