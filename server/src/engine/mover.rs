//! The mover: one tick ends every expired reservation, then moves every due
//! job, batch by batch.
//!
//! Each batch is one call of a script (`release.lua` in its expired mode,
//! then `move.lua`), atomic on Redis, so any number of servers can tick at
//! once without delivering an id twice. Expiry comes first, so a retry due
//! at once is moved in the same tick. A tick keeps
//! calling while batches come back full: a backlog drains at full speed,
//! the server holds one batch reply at a time (memory stays flat whatever the
//! backlog), and Redis serves other clients between calls.
//!
//! A key of the wrong type holds only the jobs that need it (move.lua's
//! guards): they stay at the pool's head, and the mover passes their count
//! (the held head) to the next call, which looks past them, so they hold up
//! no other topic. It looks from the pool's head again when a bad key is
//! fixed ([`BadKeys`]), when the script finds the head changed, and at
//! least every `LOOK_AGAIN`, so a held job moves once its key is fixed.
//!
//! Then the flow drain ([`FlowDrain`]) makes the set-aside ids of topics
//! that run again ready, a pool batch between its rounds.

use crate::badkeys::BadKeys;
use crate::flow::FlowDrain;
use crate::memory::MemoryWatch;
use crate::other_layout::OtherLayout;
use crate::scripts::{self, BadKey, ExpireReply, MoveReply};
use crate::telemetry;
use crate::wake::Announced;
use delayer_protocol::connection::{Conn, Manager};
use delayer_protocol::keys::Keys;
use log::{debug, info, warn};
use redis::ConnectionLike;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a tick did, and when the next job falls due.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TickReport {
    pub batches: u64,
    pub moved: u64,
    pub orphans: u64,
    pub malformed: u64,
    /// Expired reservations: scheduled again, and sent to dead letters.
    pub retried: u64,
    pub dead: u64,
    /// Earliest due time left in the pool (Unix seconds, Redis's clock).
    pub next_due: Option<f64>,
    /// Earliest reservation deadline left.
    pub next_deadline: Option<f64>,
    /// Redis's clock at the last batch (Unix seconds, to the microsecond).
    pub now: f64,
    /// When the last batch's reply arrived here: with `now`, it maps Redis's
    /// clock onto this machine's, to wake exactly at the next due time.
    pub now_seen_at: Option<Instant>,
}

impl TickReport {
    /// Counts an expire batch (both layouts' movers end reservations with
    /// the same script reply), and says it: metrics and the access log.
    pub(crate) fn expired(&mut self, reply: &ExpireReply) {
        telemetry::expired(reply);
        self.batches += 1;
        self.retried += reply.retried;
        self.dead += reply.dead;
        self.malformed += reply.malformed.len() as u64;
        log_expired(reply);
    }
}

/// Why a tick stopped early.
#[derive(Debug)]
pub enum TickError {
    /// No connection could be had (Redis down, refused, auth failed).
    Connect(redis::RedisError),
    /// A call failed (connection lost, script error, bad reply).
    Redis(redis::RedisError),
}

impl TickError {
    /// Whether Redis could not be reached or could not serve yet (down,
    /// restarting, loading its data, a replica), as opposed to a command it
    /// refused, such as a script meeting a key of the wrong type. The log
    /// should send an operator to the right place.
    pub fn is_unavailable(&self) -> bool {
        use redis::{ErrorKind, ServerErrorKind as S};
        match self {
            TickError::Connect(_) => !self.is_refused_credentials(),
            TickError::Redis(e) => {
                e.is_io_error()
                    || e.is_connection_refusal()
                    || e.is_connection_dropped()
                    || e.is_timeout()
                    || matches!(
                        e.kind(),
                        ErrorKind::Server(S::BusyLoading | S::TryAgain | S::ClusterDown | S::MasterDown | S::ReadOnly)
                    )
            }
        }
    }

    /// Whether a call waited out its timeout: Redis stalled, or the
    /// connection died without a word.
    pub fn is_timeout(&self) -> bool {
        match self {
            TickError::Connect(e) | TickError::Redis(e) => e.is_timeout(),
        }
    }

    /// Whether Redis refused who we are (restarted with a new password, an
    /// ACL change): not "unavailable", since only the operator can fix it.
    pub fn is_refused_credentials(&self) -> bool {
        match self {
            TickError::Connect(e) => crate::credentials::refused_text(&e.to_string()),
            TickError::Redis(e) => crate::credentials::refused(e),
        }
    }
}

impl std::fmt::Display for TickError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_refused_credentials() {
            let advice = crate::credentials::advice(&crate::credentials::Source::Settings);
            write!(f, "redis refused our credentials ({advice}): ")?;
        }
        match self {
            TickError::Connect(e) => write!(f, "cannot connect: {e}"),
            TickError::Redis(e) => write!(f, "{e}"),
        }
    }
}

/// What the timer drives: one tick moves what is due and says when to come
/// back. One per key layout ([`Mover`] classic, the per-topic one in
/// [`crate::topic_mover`]).
pub trait Tick: Send + Sync {
    /// Moves batches until nothing more is due, or `stop` is set (the batch
    /// in flight always completes: it is one atomic script).
    fn tick(&self, stop: &AtomicBool) -> Result<TickReport, TickError>;
}

/// A mover's one connection of its own, not a pool's: ticks run one at a
/// time, and a pool's checkout waits on the pool's own reconnection schedule
/// (up to 1.5 s between attempts in r2d2), which kept a tick waiting long
/// after a restarted Redis answered. Connecting here is one bounded attempt;
/// the timer decides when to try again.
pub struct Link {
    manager: Manager,
    /// The connection and when it was opened; `None` after an error.
    conn: Mutex<Option<(Conn, Instant)>>,
    /// Reconnect once the connection is this old (`conn_max_lifetime`).
    max_lifetime: Option<Duration>,
}

impl Link {
    pub fn new(manager: Manager, max_lifetime: Option<Duration>) -> Link {
        Link { manager, conn: Mutex::new(None), max_lifetime: max_lifetime.filter(|d| !d.is_zero()) }
    }

    /// Runs `work` on the connection (opened first if needed). A connection
    /// that failed is dropped, so the next tick starts on a fresh one.
    pub fn with<T>(&self, work: impl FnOnce(&mut Conn) -> Result<T, TickError>) -> Result<T, TickError> {
        let mut slot = self.conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // None: at start, or after a failed call (a reconnect).
        let after_failure = slot.is_none();
        let reusable = slot
            .take()
            .filter(|(conn, opened)| conn.is_open() && self.max_lifetime.is_none_or(|max| opened.elapsed() < max));
        let (mut conn, opened) = match reusable {
            Some(held) => held,
            None => {
                let mut conn = self.manager.connect().map_err(TickError::Connect)?;
                // A short command first: Redis answers an unauthenticated
                // client's long command (the scripts' calls have over 10
                // arguments) with a protocol error, not NOAUTH, and hangs up.
                redis::cmd("PING").query::<()>(&mut conn).map_err(TickError::Redis)?;
                crate::eviction::check(&mut conn, after_failure);
                (conn, Instant::now())
            }
        };
        crate::eviction::check(&mut conn, false);
        let result = work(&mut conn);
        if result.is_ok() {
            *slot = Some((conn, opened));
        }
        result
    }
}

/// The longest the mover goes without looking at the held head from the
/// pool's head: a job a 1.x client pushed into it (with an earlier due time
/// than the held ones) waits at most this long.
const LOOK_AGAIN: Duration = Duration::from_secs(60);

/// Moves due jobs for one key prefix, in the classic layout.
pub struct Mover {
    link: Link,
    keys: Keys,
    batch_size: u32,
    /// Ask the script for per-job lateness (only when metrics are served).
    lateness: bool,
    other: OtherLayout,
    bad: BadKeys,
    memory: MemoryWatch,
    head: Mutex<Head>,
    flow: FlowDrain,
    /// Topics announced on the wake channel: a paused or limited one is
    /// asked again at once (a resume or a new limit announces its topic).
    announced: Arc<Announced>,
}

/// The pool's held head: due ids left at its head for a key of the wrong
/// type, which the move calls look past.
#[derive(Default)]
struct Head {
    held: u64,
    /// When the mover last looked from the pool's head.
    looked: Option<Instant>,
}

impl Tick for Mover {
    fn tick(&self, stop: &AtomicBool) -> Result<TickReport, TickError> {
        self.link.with(|conn| self.tick_on(conn, stop))
    }
}

impl Mover {
    pub fn new(
        manager: Manager,
        max_lifetime: Option<Duration>,
        keys: Keys,
        batch_size: u32,
        lateness: bool,
        announced: Arc<Announced>,
    ) -> Mover {
        let other = OtherLayout::new(delayer::Layout::Classic, keys.prefix());
        Mover {
            link: Link::new(manager, max_lifetime),
            keys: keys.clone(),
            batch_size,
            lateness,
            other,
            bad: BadKeys::default(),
            memory: MemoryWatch::default(),
            head: Mutex::default(),
            flow: FlowDrain::new(keys.clone(), batch_size, lateness),
            announced,
        }
    }

    fn tick_on(&self, conn: &mut Conn, stop: &AtomicBool) -> Result<TickReport, TickError> {
        let started = Instant::now();
        let mut report = TickReport::default();
        self.other.check(conn);
        self.memory.check(conn);
        let fixed = self.bad.fixed(conn).map_err(TickError::Redis)?;
        let mut head = self.head.lock().unwrap_or_else(|e| e.into_inner());
        if head.held > 0 && (!fixed.is_empty() || head.looked.is_none_or(|at| at.elapsed() >= LOOK_AGAIN)) {
            head.held = 0;
        }
        if head.held == 0 {
            head.looked = Some(Instant::now());
        }
        loop {
            let reply = scripts::expire_batch(conn, &self.keys, self.batch_size).map_err(TickError::Redis)?;
            self.bad.met(&reply.bad_keys, |bad| self.effect(bad));
            report.expired(&reply);
            report.next_deadline = reply.next_deadline;
            if reply.taken < u64::from(self.batch_size) || stop.load(Ordering::SeqCst) {
                break;
            }
        }
        let stopped = || stop.load(Ordering::SeqCst);
        let mut more = true;
        while more && !stopped() {
            more = self.pool_batch(conn, &mut head, &mut report)?;
        }
        // The flow drain, one pool batch between its rounds: other topics
        // wait one round at most while a resumed backlog drains.
        let (woken, rescan) = self.announced.take();
        self.flow.wake(woken.iter().map(|(topic, _)| topic.as_bytes()), rescan);
        let mut topics = self.flow.topics(conn).map_err(TickError::Redis)?;
        let mut next_allowed = None;
        while !topics.is_empty() && !stopped() {
            let started = Instant::now();
            let round = self.flow.round(conn, &topics).map_err(TickError::Redis)?;
            let took = started.elapsed();
            for (_, reply) in &round.replies {
                self.bad.met(&reply.bad_keys, |bad| self.effect(bad));
                telemetry::drained(reply, took);
                report.batches += 1;
                report.moved += reply.moved();
                report.orphans += reply.orphans;
                log_batch(reply);
            }
            next_allowed = crate::topic_mover::earlier(next_allowed, round.next_allowed);
            topics = round.more;
            if !topics.is_empty() {
                more = self.pool_batch(conn, &mut head, &mut report)?;
            }
        }
        while more && !stopped() {
            more = self.pool_batch(conn, &mut head, &mut report)?;
        }
        // A limited topic's next token is a due time like the pool's.
        report.next_due = crate::topic_mover::earlier(report.next_due, next_allowed);
        telemetry::tick(started.elapsed());
        Ok(report)
    }

    /// One move.lua call after the held head; whether there may be more.
    fn pool_batch(&self, conn: &mut Conn, head: &mut Head, report: &mut TickReport) -> Result<bool, TickError> {
        let batch_started = Instant::now();
        let from = head.held;
        let reply =
            scripts::move_batch(conn, &self.keys, self.batch_size, self.lateness, from).map_err(TickError::Redis)?;
        self.bad.met(&reply.bad_keys, |bad| self.effect(bad));
        // Topics with ids set aside now have work for the flow drain.
        self.flow.wake(reply.aside.iter().map(|(topic, _)| topic.as_bytes()), false);
        head.held = reply.head;
        // The head changed under us: look again from the pool's head.
        let again = from > 0 && reply.head == 0;
        if head.held == 0 {
            head.looked = Some(Instant::now());
        }
        telemetry::batch(&reply, batch_started.elapsed());
        report.batches += 1;
        report.moved += reply.moved();
        report.orphans += reply.orphans;
        report.malformed += reply.malformed.len() as u64;
        report.next_due = reply.next_due;
        report.now = reply.now;
        report.now_seen_at = Some(Instant::now());
        log_batch(&reply);
        Ok(again || reply.taken + reply.held >= u64::from(self.batch_size))
    }

    /// What a bad key holds up, for its log line.
    fn effect(&self, bad: &BadKey) -> String {
        let k = &self.keys;
        let key = bad.key.as_str();
        if let Some(topic) = key.strip_prefix(&k.ready_queue_prefix()) {
            format!("due jobs of topic {topic:?} wait in the pool (none is lost); other topics move on")
        } else if let Some(topic) = key.strip_prefix(&k.dead_prefix()) {
            format!("jobs of topic {topic:?} out of attempts after their ttr are parked on the malformed list instead")
        } else if key == k.malformed() {
            "ids without a topic wait where they are (pool, or reserved set) instead of being parked on it".into()
        } else if key == k.scheduled_count() {
            "the per-topic scheduled counts are not kept meanwhile (stats may show them stale)".into()
        } else if key == k.topics() {
            "topics are not recorded in it meanwhile (stats may miss a topic)".into()
        } else if key == k.reserved() {
            "reservations can neither be ended by expiry nor cleaned up by moves".into()
        } else if let Some(topic) = key.strip_prefix(&k.flow_pool_prefix()) {
            format!("due jobs of topic {topic:?} wait in the pool, or where they are set aside (none is lost)")
        } else if let Some(topic) = key.strip_prefix(&format!("{}flow:", k.prefix())) {
            format!("topic {topic:?} hands out nothing and its set-aside jobs wait until it is fixed (none is lost)")
        } else if key == k.flow_topics() {
            "paused topics' due jobs go to their ready queues, where consumers still hold them".into()
        } else if key == k.job_pool() {
            "expired reservations cannot be retried, and nothing moves".into()
        } else {
            "its work is skipped".into()
        }
    }
}

/// One access-log line per expire batch that did something.
fn log_expired(reply: &ExpireReply) {
    if reply.taken == 0 {
        return;
    }
    info!(
        "expired {} reservation(s): retried={} dead={} dropped={} malformed={}",
        reply.taken,
        reply.retried,
        reply.dead,
        reply.dropped,
        reply.malformed.len()
    );
    if reply.dead > 0 {
        warn!("{} job(s) out of attempts after their ttr ran out: sent to dead letters", reply.dead);
    }
    if !reply.malformed.is_empty() {
        warn!(
            "expired reservation(s) that could not be ended (no topic, or a key of the wrong type) parked on the \
             malformed list, buckets kept: {}",
            reply.malformed.join(" ")
        );
    }
}

/// One debug line per batch that did something (counts per topic, not one
/// line per job); at info, the periodic summary counts it (`summary`).
fn log_batch(reply: &MoveReply) {
    if reply.taken == 0 {
        return;
    }
    crate::summary::record(reply);
    let topics: Vec<String> = reply.per_topic.iter().map(|(t, n)| format!("{t}={n}")).collect();
    let late_ms = crate::summary::late_ms(reply);
    let held = if reply.held > 0 { format!(" held={}", reply.held) } else { String::new() };
    let per_topic: serde_json::Map<String, serde_json::Value> =
        reply.per_topic.iter().map(|(t, n)| (t.clone(), serde_json::Value::from(*n))).collect();
    debug!(
        moved = reply.moved(),
        per_topic_json = serde_json::Value::Object(per_topic).to_string().as_str(),
        orphans = reply.orphans,
        late_ms = late_ms.round() as u64;
        "moved {} [{}] orphans={} malformed={}{held} oldest_late_ms={late_ms:.0}",
        reply.moved(),
        topics.join(" "),
        reply.orphans,
        reply.malformed.len(),
    );
    if !reply.malformed.is_empty() {
        warn!(
            "{} job(s) without a topic parked on the malformed list, buckets kept: {}",
            reply.malformed.len(),
            reply.malformed.join(" ")
        );
    }
    if reply.orphans > 0 {
        debug!("{} orphan id(s) dropped: their buckets had expired or were removed", reply.orphans);
    }
}
