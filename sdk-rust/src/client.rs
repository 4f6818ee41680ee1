//! The blocking client: push, pop, bpop, remove, and the at-least-once calls.
//!
//! Each operation validates its input, then runs one of the protocol's Lua
//! scripts on a pooled connection. See docs/PROTOCOL.md for the semantics.
//! What to send and how to read the reply is `ops` and `wait`, shared with
//! the async client; this module only does the I/O.

use crate::conf;
use crate::connection::{build_pool_for, Manager, PoolOptions};
use crate::error::{is_lost_connection, Error, Result};
use crate::job::{Job, Message};
use crate::keys::{Layout, Names, DEFAULT_PREFIX};
use crate::ops::{self, DeadAction, Ending, FlowWait, Request, Step};
use crate::reliable::{DeadLetter, JobRef, Reserved};
use crate::target::{is_read_only, Target};
use crate::wait;
use delayer_protocol::op::{Error as OpError, Op};
use redis::Value;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// A Delayer client. Cheap to clone; clones share one connection pool.
///
/// A call that finds its pooled connection closed by Redis (a restart, an
/// idle timeout) is made once more on a new connection, so once Redis
/// answers again the next call works. While Redis is away, calls fail with
/// [`Error::Connection`]: a worker backs off and calls again (see
/// `examples/worker.rs`).
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
    /// Makes the connection a call moves to when its pooled one was stale.
    manager: Manager,
    /// The pool's bound on each reply, put back after a blocking wait.
    io_timeout: Option<Duration>,
    names: Names,
    /// Pushes wait this long for a replica's acknowledgement (`durable`).
    durable: Option<Duration>,
}

impl std::fmt::Debug for Delayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delayer").field("names", &self.names).finish_non_exhaustive()
    }
}

/// How long past its own wait a blocking command's reply may take before the
/// connection counts as dead (Redis answers a finished wait at once).
pub(crate) const BLOCKING_GRACE: Duration = Duration::from_secs(10);

/// The redis-rs client for `url`, as both clients' `open` take it: a URL
/// redis-rs cannot use is an invalid argument.
pub(crate) fn redis_client(url: &str) -> Result<redis::Client> {
    redis::Client::open(url).map_err(|e| Error::InvalidArgument(format!("not a usable Redis URL: {e}")))
}

/// A connection for one call: checked out of the pool, or made for the call
/// when the pooled one turned out to be closed.
enum Conn {
    /// From the pool; `fresh` until a reply has come on it in this call:
    /// until then, it may have been closed by Redis while idle.
    Pooled {
        conn: r2d2::PooledConnection<Manager>,
        fresh: bool,
    },
    Own(crate::connection::Conn),
}

impl Conn {
    fn get(&mut self) -> &mut crate::connection::Conn {
        match self {
            Conn::Pooled { conn, .. } => conn,
            Conn::Own(conn) => conn,
        }
    }
}

impl Delayer {
    /// A client for the Redis at `url` (`redis://[user:password@]host:port/db`,
    /// `rediss://` for TLS, `unix:///path/to/socket`), with the default key
    /// prefix `delayer:`. Connects lazily.
    pub fn open(url: &str) -> Result<Delayer> {
        Ok(Delayer::with_options(redis_client(url)?, DEFAULT_PREFIX, &PoolOptions::default()))
    }

    /// A client configured by a `delayer.conf`: its `[redis]` section and
    /// `[delayer] key_prefix` and `layout`, as the server reads them. A file
    /// the server refuses (an unknown section or key, a bad value) is
    /// refused here too. The `DELAYER_*` environment variables override
    /// the file as they do for the server (`DELAYER_REDIS_PORT`,
    /// `DELAYER_REDIS_PASSWORD_FILE`: [`conf::env`]).
    pub fn from_conf(path: impl AsRef<Path>) -> Result<Delayer> {
        let (redis, names) = conf::for_client(path)?;
        let client = Delayer::with_target(redis.target()?, names.prefix(), &PoolOptions::default());
        Ok(Delayer { names, ..client })
    }

    /// A client from a redis-rs client (any address, TLS settings), a key
    /// prefix and pool options.
    pub fn with_options(client: redis::Client, prefix: &str, pool: &PoolOptions) -> Delayer {
        Delayer::with_target(Target::fixed(client), prefix, pool)
    }

    /// A client for a [`Target`]: with [`crate::conf::RedisSettings::target`]
    /// in sentinel mode, it follows the master through failovers.
    pub fn with_target(target: Target, prefix: &str, pool: &PoolOptions) -> Delayer {
        Delayer {
            manager: Manager::with_target(target.clone(), pool.connect_timeout, pool.io_timeout),
            pool: build_pool_for(target, pool),
            io_timeout: pool.io_timeout,
            names: Names::new(prefix, Layout::default()),
            durable: None,
        }
    }

    /// The same client, whose pushes (push, push_job, push_many) are
    /// durable: after each write, on its connection, `WAIT 1 <timeout>`
    /// waits for a replica to have it, and when none does in time the push
    /// fails with [`Error::NotReplicated`] (the jobs are on the master, but a
    /// failover now could lose them). Costs a round trip and the replica's
    /// lag per push call; see bench/RESULTS.md.
    pub fn durable(&self, timeout: Duration) -> Delayer {
        Delayer { durable: Some(timeout), ..self.clone() }
    }

    /// The same client under another key prefix (same layout; in the
    /// per-topic layout a prefix with a brace makes every call fail).
    pub fn with_prefix(mut self, prefix: &str) -> Delayer {
        self.names = self.names.with_prefix(prefix);
        self
    }

    /// The same client in another key layout ([`Layout::Topic`]: PROTOCOL.md,
    /// "The per-topic layout"). Refused for a prefix with a brace.
    pub fn with_layout(mut self, layout: Layout) -> Result<Delayer> {
        self.names = ops::names(self.names.prefix(), layout)?;
        Ok(self)
    }

    /// The key names this client uses.
    pub fn keys(&self) -> &Names {
        &self.names
    }

    fn checkout(&self) -> Result<Conn> {
        Ok(Conn::Pooled { conn: self.pool.get()?, fresh: true })
    }

    /// Sends `req` on `conn`. A pooled connection found gone before its
    /// first reply was closed by Redis while it sat idle (a restart, Redis's
    /// idle timeout), so the request did not reach Redis: it is sent again
    /// on a new connection. (Had Redis died during this very request, the
    /// new connection finds it gone too, and the call fails.)
    fn send(&self, conn: &mut Conn, req: &Request) -> Result<Value> {
        let reply = self.send_once(conn.get(), req);
        let stale = matches!(conn, Conn::Pooled { fresh: true, .. }) && reply.as_ref().is_err_and(is_lost_connection);
        // A demoted master (sentinel mode) refused to write: nothing was
        // written, so the call goes to the master of the moment.
        let demoted = self.manager.target().follows_failover() && reply.as_ref().is_err_and(is_read_only);
        if stale || demoted {
            if let Conn::Pooled { conn, .. } = conn {
                conn.retire();
            }
            *conn = Conn::Own(self.manager.connect()?);
            return Ok(self.send_once(conn.get(), req)?);
        }
        if let Conn::Pooled { fresh, conn } = conn {
            *fresh = false;
            // A reply that timed out may still come: read by the next call
            // on this connection, it would answer the wrong request.
            if reply.as_ref().is_err_and(|e| e.is_timeout()) {
                conn.retire();
            }
        }
        Ok(reply?)
    }

    fn send_once(&self, conn: &mut crate::connection::Conn, req: &Request) -> redis::RedisResult<Value> {
        match req {
            Request::Script(inv) => inv.invoke(conn),
            Request::Batch(batch) => {
                let cluster = conn.is_cluster();
                batch.send(conn, cluster)
            }
            Request::Blocking(cmd, wait) => {
                // The pool's read timeout must not cut a wait short.
                conn.set_read_timeout(wait.map(|w| w + BLOCKING_GRACE))?;
                let reply = cmd.query(conn);
                conn.set_read_timeout(self.io_timeout)?;
                reply
            }
            Request::Replicas(cmd, wait, keys) => {
                conn.set_read_timeout(Some(*wait + BLOCKING_GRACE))?;
                let reply = conn.least_on_nodes_of(cmd, keys);
                conn.set_read_timeout(self.io_timeout)?;
                reply
            }
        }
    }

    /// Redis's maxmemory-policy (`delayer::eviction`), or why it cannot be
    /// read: the workers warn unless it is `noeviction`.
    #[doc(hidden)]
    pub fn eviction_policy(&self) -> std::result::Result<String, String> {
        let mut conn = self.checkout().map_err(|e| e.to_string())?;
        crate::eviction::read(conn.get())
    }

    /// Runs an operation on one connection (its errors: this crate's, or
    /// `delayer_protocol`'s, as the inspecting calls').
    pub(crate) fn run<T: Send, E: From<OpError>>(&self, op: std::result::Result<Op<'_, T, E>, E>) -> Result<T>
    where
        Error: From<E>,
    {
        let (mut op, mut conn) = (op?, self.checkout()?);
        let mut step = op.start()?;
        loop {
            match step {
                Step::Done(out) => return Ok(out),
                Step::Send(req) => step = op.next(self.send(&mut conn, &req)?)?,
            }
        }
    }
}

twins! {
    /// Schedules an empty-bodied job `id` on `topic`, due after `delay`.
    /// Returns its due time (Redis's clock).
    ///
    /// Ids are global across topics (the Delayer 1.x layout): pushing an id
    /// that a job holds replaces that job, whatever its topic. Use
    /// [`Job::if_absent`] with [`Delayer::push_job`] to be told instead.
    #[aio]
    /// As [`crate::Delayer::push`].
    pub fn push(&self, topic: &str, id: &str, delay: Duration) -> Result<SystemTime> =
        ops::push(&self.names, &Job::new(topic, id, delay), self.durable);

    /// Schedules a job with a body and settings of its own. With
    /// [`Job::if_absent`] and the id taken, nothing is written and the
    /// result is [`Error::IdTaken`].
    #[aio]
    /// As [`crate::Delayer::push_job`]: with [`Job::if_absent`] and the id
    /// taken, [`crate::Error::IdTaken`].
    pub fn push_job(&self, job: &Job) -> Result<SystemTime> =
        ops::push(&self.names, job, self.durable);

    /// Schedules many jobs: 100 per script call, 10 calls per round trip.
    /// Each call's jobs are written atomically together; the whole is not.
    /// All jobs are validated before anything is sent. When jobs pushed
    /// [`Job::if_absent`] find their id taken, the others are written all
    /// the same and the result is [`Error::IdTaken`], with the due time of
    /// every job written.
    #[aio]
    /// As [`crate::Delayer::push_many`].
    pub fn push_many(&self, jobs: &[Job]) -> Result<Vec<SystemTime>> =
        ops::push_many(&self.names, jobs, self.durable);

    /// Takes the next ready job of `topic`, if any. The job is deleted as it
    /// is handed out (at most once).
    #[aio]
    /// As [`crate::Delayer::pop`].
    pub fn pop(&self, topic: &str) -> Result<Option<Message>> =
        ops::pop(&self.names, topic);

    /// Like [`Delayer::pop`], but waits up to `timeout` for a job
    /// (`Duration::ZERO` waits forever). `None` when the time ran out.
    #[aio]
    /// As [`crate::Delayer::bpop`]: waits up to `timeout`
    /// (`Duration::ZERO`: forever) on a connection of its own.
    pub fn bpop(&self, topic: &str, timeout: Duration) -> Result<Option<Message>> =
        wait::bpop(&self.names, topic, timeout);

    /// Cancels job `id`: a waiting job is never delivered, a ready one is
    /// skipped by pop. `false` when there was nothing to cancel. The
    /// per-topic layout needs the topic: [`Delayer::remove_in`].
    #[aio]
    /// As [`crate::Delayer::remove`].
    pub fn remove(&self, id: &str) -> Result<bool> =
        ops::remove(&self.names, None, id.as_bytes(), "remove_in(topic, id)");

    /// Cancels job `id` of `topic` (either layout).
    #[aio]
    /// As [`crate::Delayer::remove_in`].
    pub fn remove_in(&self, topic: &str, id: &str) -> Result<bool> =
        ops::remove(&self.names, Some(topic), id.as_bytes(), "");

    /// Cancels job `id` of `topic`, the id given as bytes, any bytes (an id that is not
    /// UTF-8, as a listing's `raw_id` shows it).
    #[aio]
    /// As [`crate::Delayer::remove_in_raw`].
    pub fn remove_in_raw(&self, topic: &str, id: &[u8]) -> Result<bool> =
        ops::remove(&self.names, Some(topic), id, "");

    /// Moves waiting job `id` to be due `delay` from now. `None` when it is
    /// not waiting (ready, reserved, dead, gone or unknown). The per-topic
    /// layout needs the topic: [`Delayer::reschedule_in`].
    #[aio]
    /// As [`crate::Delayer::reschedule`].
    pub fn reschedule(&self, id: &str, delay: Duration) -> Result<Option<SystemTime>> =
        ops::reschedule(&self.names, None, id.as_bytes(), delay, "reschedule_in(topic, id, delay)");

    /// Moves waiting job `id` of `topic` (either layout).
    #[aio]
    /// As [`crate::Delayer::reschedule_in`].
    pub fn reschedule_in(&self, topic: &str, id: &str, delay: Duration) -> Result<Option<SystemTime>> =
        ops::reschedule(&self.names, Some(topic), id.as_bytes(), delay, "");

    /// Moves waiting job `id` of `topic`, the id given as bytes, any bytes
    /// (an id that is not UTF-8, as a listing's `raw_id` shows it).
    #[aio]
    /// As [`crate::Delayer::reschedule_in_raw`].
    pub fn reschedule_in_raw(&self, topic: &str, id: &[u8], delay: Duration) -> Result<Option<SystemTime>> =
        ops::reschedule(&self.names, Some(topic), id, delay, "");

    /// Takes the next ready job of `topic` *reserved*: no other worker gets it
    /// until [`Delayer::ack`], [`Delayer::release`] or [`Delayer::bury`], or
    /// until `ttr` has passed, when the server hands it out again (at least
    /// once). `examples/reliable_worker.rs` is a whole worker.
    #[aio]
    /// As [`crate::Delayer::reserve`].
    pub fn reserve(&self, topic: &str, ttr: Duration) -> Result<Option<Reserved>> =
        ops::reserve(&self.names, topic, ttr);

    /// Like [`Delayer::reserve`], but waits up to `timeout` for a job
    /// (`Duration::ZERO` waits forever). `None` when the time ran out.
    /// Waiting takes nothing from the queue, so a worker that dies while
    /// waiting loses nothing.
    #[aio]
    /// As [`crate::Delayer::breserve`]: waits up to `timeout`
    /// (`Duration::ZERO`: forever) on a connection of its own.
    pub fn breserve(&self, topic: &str, ttr: Duration, timeout: Duration) -> Result<Option<Reserved>> =
        wait::breserve(&self.names, topic, ttr, timeout);

    /// Waits up to `timeout` until `topic` has a ready job, taking nothing:
    /// `false` when the time ran out. (A Worker's wait: it then fetches a
    /// batch with reserve_many, unless it was stopped meanwhile.)
    #[aio]
    /// As [`crate::Delayer`]'s `wait_ready`: until `topic` has a ready job,
    /// up to `timeout`, taking nothing; `false` when the time ran out.
    pub(crate) fn wait_ready(&self, topic: &str, timeout: Duration) -> Result<bool> =
        wait::ready(&self.names, topic, timeout);

    /// Waits on a paused topic's gate (the wait instruction its fetch
    /// answered) for its recheck time, at most `timeout`: whether a resume
    /// wrote it. (A Worker's wait while a topic is paused: it fetches again
    /// after it either way.)
    #[aio]
    /// As [`crate::Delayer`]'s `wait_gate`.
    pub(crate) fn wait_gate(&self, flow: &FlowWait, timeout: Duration) -> Result<bool> =
        Ok(delayer_protocol::wait::gate::<Error>(flow, timeout));

    /// pop, with a paused topic's wait instruction (a Worker's fetch).
    #[aio]
    /// As [`crate::Delayer`]'s `pop_or_wait`.
    pub(crate) fn pop_or_wait(&self, topic: &str) -> Result<(Option<Message>, Option<FlowWait>)> =
        ops::pop_or_wait(&self.names, topic);

    /// reserve_many, with a paused topic's wait instruction (a Worker's fetch).
    #[aio]
    /// As [`crate::Delayer`]'s `fetch_reserved`.
    pub(crate) fn fetch_reserved(&self, topic: &str, ttr: Duration, n: usize, acks: &[JobRef<'_>])
        -> Result<ops::ReservedBatch> =
        ops::reserve_many(&self.names, topic, ttr, n, acks);

    /// The job is done: deletes it. `false` when the reservation was not
    /// held (already ended, or expired and handed out again): then nothing
    /// changes. Takes a [`Reserved`] job, or an id (any current reservation).
    #[aio]
    /// As [`crate::Delayer::ack`].
    pub fn ack<'a>(&self, job: impl Into<JobRef<'a>>) -> Result<bool> =
        ops::ack(&self.names, job.into());

    /// Still working on it: the reservation's deadline becomes `ttr` from
    /// now, so the job is not handed out again meanwhile. Returns the new
    /// deadline, or `None` when the reservation was not held (as for
    /// [`Delayer::ack`]). The attempt count does not change.
    #[aio]
    /// As [`crate::Delayer::touch`].
    pub fn touch<'a>(&self, job: impl Into<JobRef<'a>>, ttr: Duration) -> Result<Option<SystemTime>> =
        ops::touch(&self.names, job.into(), ttr);

    /// A failed attempt: the job is due again after `delay`, or after its
    /// backoff when `None`; past its max_attempts it goes to dead letters
    /// instead. `false` when the reservation was not held.
    #[aio]
    /// As [`crate::Delayer::release`].
    pub fn release<'a>(&self, job: impl Into<JobRef<'a>>, delay: Option<Duration>) -> Result<bool> =
        ops::release(&self.names, job.into(), Ending::after(delay), "");

    /// [`Delayer::release`], recording why the attempt failed: `error`
    /// (its first 1000 bytes) becomes the job's last error, shown by dead
    /// letters and job lookups ("": none).
    #[aio]
    /// As [`crate::Delayer::release_with_error`]: `error` becomes the job's
    /// last error.
    pub fn release_with_error<'a>(&self, job: impl Into<JobRef<'a>>, delay: Option<Duration>, error: &str)
        -> Result<bool> =
        ops::release(&self.names, job.into(), Ending::after(delay), error);

    /// Gives up on the job: it goes to its topic's dead letters now.
    /// `false` when the reservation was not held.
    #[aio]
    /// As [`crate::Delayer::bury`].
    pub fn bury<'a>(&self, job: impl Into<JobRef<'a>>) -> Result<bool> =
        ops::release(&self.names, job.into(), Ending::Bury, "");

    /// [`Delayer::bury`], recording why as the job's last error (as
    /// [`Delayer::release_with_error`]).
    #[aio]
    /// As [`crate::Delayer::bury_with_error`].
    pub fn bury_with_error<'a>(&self, job: impl Into<JobRef<'a>>, error: &str) -> Result<bool> =
        ops::release(&self.names, job.into(), Ending::Bury, error);

    /// Acks `acks` (as [`Delayer::ack`] each), then reserves up to `n` (0 to
    /// 1000) ready jobs of `topic` for `ttr`, in one script call: a worker
    /// hands back what it finished and takes its next jobs in one round
    /// trip. Returns one flag per ack (`false`: that reservation was no
    /// longer held), and the jobs reserved (fewer than `n` when the queue
    /// ran out). In the per-topic layout acks of other topics cannot ride
    /// in `topic`'s call: each is sent alone first.
    #[aio]
    /// As [`crate::Delayer::reserve_many`]: acks, then up to `n` jobs, in
    /// one call.
    pub fn reserve_many(&self, topic: &str, ttr: Duration, n: usize, acks: &[JobRef<'_>])
        -> Result<(Vec<bool>, Vec<Reserved>)> =
        ops::reserve_many(&self.names, topic, ttr, n, acks).map(|op| op.map(|(flags, jobs, _)| Ok((flags, jobs))));

    /// Up to `count` (1 to 1000) of `topic`'s dead letters, newest first,
    /// from position `start` (at most [`crate::inspect::MAX_POSITION`]).
    #[aio]
    /// As [`crate::Delayer::dead_letters`].
    pub fn dead_letters(&self, topic: &str, start: usize, count: usize) -> Result<Vec<DeadLetter>> =
        ops::dead_list(&self.names, topic, start, count);

    /// Puts dead letters back into the pool, due now, with their attempts
    /// reset: those with the given ids, or all with `None`. Returns how many.
    #[aio]
    /// As [`crate::Delayer::requeue_dead`].
    pub fn requeue_dead(&self, topic: &str, ids: Option<&[&str]>) -> Result<u64> =
        ops::dead_drain(&self.names, topic, DeadAction::Requeue, ids.map(ops::raw_ids).as_deref());

    /// Deletes dead letters for good: those with the given ids, or all with
    /// `None`. Returns how many.
    #[aio]
    /// As [`crate::Delayer::purge_dead`].
    pub fn purge_dead(&self, topic: &str, ids: Option<&[&str]>) -> Result<u64> =
        ops::dead_drain(&self.names, topic, DeadAction::Purge, ids.map(ops::raw_ids).as_deref());

    /// [`Delayer::requeue_dead`] by ids given as bytes, any bytes (a dead
    /// letter's [`DeadLetter::id_bytes`]: an id that is not UTF-8).
    #[aio]
    /// As [`crate::Delayer::requeue_dead_raw`].
    pub fn requeue_dead_raw(&self, topic: &str, ids: &[&[u8]]) -> Result<u64> =
        ops::dead_drain(&self.names, topic, DeadAction::Requeue, Some(ids));

    /// [`Delayer::purge_dead`] by ids given as bytes, any bytes.
    #[aio]
    /// As [`crate::Delayer::purge_dead_raw`].
    pub fn purge_dead_raw(&self, topic: &str, ids: &[&[u8]]) -> Result<u64> =
        ops::dead_drain(&self.names, topic, DeadAction::Purge, Some(ids));
}
