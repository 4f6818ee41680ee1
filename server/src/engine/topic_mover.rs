//! The mover of the per-topic layout (`layout = topic`, PROTOCOL.md "The
//! per-topic layout"): which topics have work comes from the `<prefix>due`
//! index, and each is drained by move_topic.lua, which reads nothing per job,
//! after its reservations past their deadline are ended (release_topic.lua,
//! release.lua's per-topic twin). The index time of a topic is the earlier of its first
//! due time and its first reservation deadline. The due topics' calls go many
//! to a round trip ([`Waves`]): Redis, not the round trip, sets the pace of a
//! drain.
//!
//! The index is the server's alone: the scripts announce what they wrote on
//! the wake channel (`wake`), and each tick first writes the announcements
//! into the index (`announce`). An announcement can be lost (published
//! while the subscription was down), so four rules keep a job from waiting
//! for ever: after every (re)subscription the whole index is rebuilt from
//! the key space (`announce`: a full rescan); after draining a topic the
//! mover writes its next due time and then reads the pool head again,
//! lowering the index if a push landed in between; every known topic's pool
//! head is swept into the index (`sweep`, a full pass at most every 10 s);
//! and the key space is scanned for pools missing from `<prefix>topics`
//! (every 60 s). Idle topics cost nothing between sweeps.
//!
//! How late a lost announcement can make a job (PROTOCOL.md states it): a
//! cut subscription is noticed at once when its connection closes, else
//! after `wake::QUIET` (5 s) and a PING unanswered for `REDIS_TIMEOUT`
//! (5 s); the listener subscribes again after at most `BACKOFF_MAX`
//! (500 ms; 30 s while an ACL refuses the channel) and the next tick
//! rescans: the job moves within detection + backoff + the rescan's
//! duration, i.e. within about 0.5 s of its due time plus the rescan for a
//! killed connection, about 10.5 s plus the rescan for a silent one.
//! Without a cut (a PUBLISH an ACL refused, an index write Redis refused) the
//! sweeps bound it: a known topic within 10 s (when the known topics fit the
//! slices, 500 per tick, of those 10 s), a new one by the next key-space
//! pass (every 60 s, 500 keys per tick: longer on a large key space).
//!
//! A topic whose pool or ready list holds the wrong type is set aside (it
//! leaves the index, its jobs stay where they are), each bad key is named
//! once ([`BadKeys`]), and the topic goes back into the index when the key
//! is fixed. The index is written after a drain by index.lua, which Redis
//! takes even when it is out of memory (it removes each entry first), so
//! moving goes on in a full Redis; an index entry Redis refuses there (a
//! topic first met in a rescan, a sweep or an announcement) goes through it
//! too, so a topic unknown when Redis filled up is still moved. Only
//! `<prefix>topics` waits for memory (the key-space rescans add it then).

use crate::badkeys::BadKeys;
use crate::memory::MemoryWatch;
use crate::mover::{Link, Tick, TickError, TickReport};
use crate::oddities;
use crate::other_layout::OtherLayout;
use crate::scripts::{self, BadKey};
use crate::telemetry;
use crate::wake::Announced;
use crate::waves::{bad_keys, Waves};
use delayer_protocol::connection::{Batch, Conn, Manager};
use delayer_protocol::keys::TopicKeys;
use delayer_protocol::numbers::{self, Time};
use log::warn;
use redis::{RedisError, RedisResult};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Index entries read per round.
const DUE_PER_READ: isize = 100;
/// Rounds per tick at most (a topic whose index entry stays due, e.g. a job
/// due within the current millisecond, must not hold the tick).
const ROUNDS_PER_TICK: usize = 1000;
/// Topics, and keys, looked at per tick by each pass.
const SLICE: usize = 500;

/// Moves due jobs, topic by topic, for one key prefix.
/// A ZSET's head read WITHSCORES: its member's bytes (any bytes: an id
/// need not be UTF-8) and its score.
type Head = Vec<(Vec<u8>, f64)>;

pub struct TopicMover {
    link: Link,
    keys: TopicKeys,
    batch_size: u32,
    /// Record lateness (only when metrics are served).
    lateness: bool,
    passes: Mutex<sweep::Passes>,
    other: OtherLayout,
    bad: BadKeys,
    /// The topic of each bad key: indexed again when the key is fixed.
    bad_topics: Mutex<HashMap<String, String>>,
    memory: MemoryWatch,
    /// Topics announced by the scripts, from the wake-up listener.
    announced: Arc<Announced>,
    /// Topics this process has added to `<prefix>topics` (bounded).
    seen: Mutex<HashSet<String>>,
    /// Whether a refused index write was said, per key (`due`, `topics`).
    refused_said: [AtomicBool; 2],
}

mod announce;
mod sweep;

impl Tick for TopicMover {
    fn tick(&self, stop: &AtomicBool) -> Result<TickReport, TickError> {
        self.link.with(|conn| {
            self.tick_on(conn, stop).inspect_err(|e| {
                if matches!(e, TickError::Redis(e) if bad_keys(e)) {
                    self.name_bad_index(conn);
                }
            })
        })
    }
}

impl TopicMover {
    pub fn new(
        manager: Manager,
        max_lifetime: Option<Duration>,
        keys: TopicKeys,
        batch_size: u32,
        lateness: bool,
        announced: Arc<Announced>,
    ) -> TopicMover {
        let other = OtherLayout::new(delayer::Layout::Topic, keys.prefix());
        TopicMover {
            link: Link::new(manager, max_lifetime),
            keys,
            batch_size,
            lateness,
            passes: Default::default(),
            other,
            bad: BadKeys::default(),
            bad_topics: Mutex::default(),
            memory: MemoryWatch::default(),
            announced,
            seen: Mutex::default(),
            refused_said: Default::default(),
        }
    }

    fn tick_on(&self, conn: &mut Conn, stop: &AtomicBool) -> Result<TickReport, TickError> {
        let started = Instant::now();
        let mut report = TickReport::default();
        let failed = TickError::Redis;
        self.apply_announced(conn).map_err(failed)?;
        self.passes_slice(conn).map_err(failed)?;
        self.other.check(conn);
        self.memory.check(conn);
        self.index_fixed(conn).map_err(failed)?;
        for _ in 0..ROUNDS_PER_TICK {
            let mut read = Batch::new();
            read.add(redis::cmd("TIME")).add(redis::Cmd::zrange_withscores(self.keys.due(), 0, DUE_PER_READ - 1));
            let ((secs, micros), head): ((u64, u64), Vec<(String, f64)>) = read.query(conn).map_err(failed)?;
            report.now = secs as f64 + micros as f64 / 1e6;
            let head = self.index_times(head);
            report.now_seen_at = Some(Instant::now());
            let due: Vec<String> = head.iter().filter(|(_, at)| *at <= report.now).map(|(t, _)| t.clone()).collect();
            report.next_due = head.iter().find(|(_, at)| *at > report.now).map(|(_, at)| *at);
            if due.is_empty() {
                break;
            }
            self.drain(conn, &due, stop, &mut report).map_err(failed)?;
            if stop.load(Ordering::SeqCst) {
                report.next_due = Some(report.now);
                return Ok(report);
            }
            // Entries past the first DUE_PER_READ, or lowered meanwhile:
            // read the head again.
            report.next_due = Some(report.now);
        }
        telemetry::tick(started.elapsed());
        Ok(report)
    }

    /// Ends the topics' expired reservations and moves their due jobs, then
    /// sets their index entries. The calls of a round go in one round trip
    /// ([`Waves`]), so Redis runs batch after batch without waiting for the
    /// mover between them.
    fn drain(&self, conn: &mut Conn, topics: &[String], stop: &AtomicBool, report: &mut TickReport) -> RedisResult<()> {
        let full = u64::from(self.batch_size);
        // Expiry first: a retry due at once is then moved by this drain.
        let expired = Waves::new(scripts::EXPIRE_TOPIC, self.batch_size).run(
            conn,
            topics,
            stop,
            |topic| scripts::expire_topic_call(&self.keys, topic, self.batch_size),
            |topic, value, _| {
                let reply = scripts::read_expire(value, &self.keys.reserved(topic))?;
                self.bad.met(&reply.bad_keys, |bad| self.effect(bad));
                report.expired(&reply);
                Ok(reply)
            },
            |reply| usize::from(reply.taken == full),
        )?;
        self.set_aside(conn, &expired.bad)?;
        let live: Vec<String> = expired.last.iter().map(|(topic, _)| topic.clone()).collect();
        let moved = Waves::new(&scripts::MOVE_TOPIC, self.batch_size).run(
            conn,
            &live,
            stop,
            |topic| scripts::move_topic_call(&self.keys, topic, self.batch_size),
            |topic, value, took| {
                let reply = scripts::read_move_topic(topic, &self.keys.pool(topic), value, self.lateness)?;
                self.bad.met(&reply.bad_keys, |bad| self.effect(bad));
                telemetry::batch(&reply, took);
                report.batches += 1;
                report.moved += reply.taken;
                crate::summary::topic_batch(topic, &reply);
                Ok(reply)
            },
            // As many calls as the ids left could fill (not all may be due:
            // a call that finds none costs Redis a few microseconds).
            |reply| if reply.taken == full { reply.pool_size.div_ceil(full).max(1) as usize } else { 0 },
        )?;
        self.set_aside(conn, &moved.bad)?;
        let deadlines: HashMap<&str, Option<f64>> =
            expired.last.iter().map(|(topic, reply)| (topic.as_str(), reply.next_deadline)).collect();
        let next: Vec<Next> = moved
            .last
            .iter()
            .map(|(topic, reply)| Next {
                topic: topic.as_str(),
                // A rate limit that left due jobs: the next token's time,
                // not the (due) pool head, is when the topic can move again.
                at: earlier(reply.next_allowed.or(reply.next_due), deadlines.get(topic.as_str()).copied().flatten()),
                held: reply.paused || reply.next_allowed.is_some(),
            })
            .collect();
        self.write_index(conn, &next)
    }

    /// The topics' index entries: each one's next time (or none), written
    /// by index.lua (memory-neutral: Redis out of memory takes it), then the
    /// heads read again in case a push or reserve (whose own index write may
    /// already have run) came between the drain and this write. A paused
    /// topic's pool head is not its next time: only its reservations'
    /// deadlines are (expiry goes on); a resume announces it. Nor is a
    /// limited topic's with jobs waiting for tokens: its next token's time is.
    fn write_index(&self, conn: &mut Conn, next: &[Next]) -> RedisResult<()> {
        let due = self.keys.due();
        if next.is_empty() {
            return Ok(());
        }
        let mut write = scripts::INDEX.key(&due);
        let mut read = Batch::new();
        for n in next {
            write.arg(n.topic).arg(n.at.map(|at| at.to_string()).unwrap_or_default());
            self.read_head(&mut read, n.topic);
        }
        write.invoke::<()>(conn)?;
        let heads: Vec<Head> = read.query(conn)?;
        let mut lower = Vec::new();
        for (n, pair) in next.iter().zip(heads.chunks(2)) {
            let [pool_head, reserved_head] = pair else { break };
            let pool_head: &Head = if n.held { &Vec::new() } else { pool_head };
            if let Some(first) = self.head_time(n.topic, pool_head, reserved_head) {
                if n.at.is_none_or(|at| first < at) {
                    lower.push((n.topic, first));
                }
            }
        }
        self.lower_index(conn, &lower)
    }

    /// `ZADD <prefix>due LT` for each pair: a topic's index entry never later
    /// than the time given. Redis out of memory refuses a ZADD that adds an
    /// entry; then the same lowering goes through index.lua, which it takes
    /// (each entry's time read first, the earlier kept). Without that, a
    /// topic first met while Redis is full (at start, in a rescan) would not
    /// be indexed, and its due jobs would wait until memory freed.
    fn lower_index(&self, conn: &mut Conn, pairs: &[(&str, f64)]) -> RedisResult<()> {
        if pairs.is_empty() {
            return Ok(());
        }
        let due = self.keys.due();
        let mut write = Batch::new();
        for (topic, at) in pairs {
            write.add_ignored(redis::cmd("ZADD").arg(&due).arg("LT").arg(*at).arg(*topic).clone());
        }
        match write.query::<()>(conn) {
            Err(e) if out_of_memory(&e) => {}
            other => return other,
        }
        let topics: Vec<&str> = pairs.iter().map(|(topic, _)| *topic).collect();
        let held: Vec<Option<f64>> = redis::cmd("ZMSCORE").arg(&due).arg(&topics).query(conn)?;
        let mut index = scripts::INDEX.key(&due);
        for ((topic, at), held) in pairs.iter().zip(held) {
            index.arg(*topic).arg(held.map_or(*at, |held| held.min(*at)).to_string());
        }
        index.invoke::<()>(conn)
    }

    /// Topics whose keys hold the wrong type (written by hand, or by a
    /// foreign client) leave the index, so that they do not stop every other
    /// topic; each bad key is logged once ([`BadKeys`]), and the topic goes
    /// back into the index when it is fixed (or a sweep finds it).
    fn set_aside(&self, conn: &mut Conn, bad: &[(String, RedisError)]) -> RedisResult<()> {
        for (topic, e) in bad {
            self.note_bad_topic(conn, topic, e)?;
            redis::cmd("ZREM").arg(self.keys.due()).arg(topic).query::<()>(conn)?;
        }
        Ok(())
    }

    /// Finds which of `topic`'s keys hold the wrong type (Redis said so in
    /// `e`) and notes each.
    fn note_bad_topic(&self, conn: &mut Conn, topic: &str, e: &RedisError) -> RedisResult<()> {
        let k = &self.keys;
        let shapes = [
            (k.pool(topic), "zset"),
            (k.ready(topic), "list"),
            (k.reserved(topic), "zset"),
            (k.dead(topic), "list"),
            (k.flow(topic), "hash"),
        ];
        let mut read = Batch::new();
        shapes.iter().for_each(|(key, _)| {
            read.add(redis::cmd("TYPE").arg(key).clone());
        });
        let kinds: Vec<String> = read.query(conn)?;
        let found: Vec<BadKey> = shapes
            .iter()
            .zip(kinds)
            .filter(|((_, want), kind)| kind != want && kind != "none")
            .map(|((key, want), kind)| BadKey { key: key.clone(), kind, expected: want.to_string() })
            .collect();
        if found.is_empty() {
            warn!("topic {topic:?} cannot be moved: {e}; left out of the index until a sweep finds it");
        }
        let mut topics = self.bad_topics.lock().unwrap_or_else(|e| e.into_inner());
        for bad in &found {
            topics.insert(bad.key.clone(), topic.to_string());
        }
        drop(topics);
        self.bad.met(&found, |bad| self.effect(bad));
        Ok(())
    }

    /// Puts the topics of bad keys fixed since the last look back into the
    /// index, due now: the next round drains them.
    fn index_fixed(&self, conn: &mut Conn) -> RedisResult<()> {
        let fixed = self.bad.fixed(conn)?;
        let mut topics = self.bad_topics.lock().unwrap_or_else(|e| e.into_inner());
        let again: Vec<String> = fixed.iter().filter_map(|bad| topics.remove(&bad.key)).collect();
        drop(topics);
        let again: Vec<(&str, f64)> = again.iter().map(|topic| (topic.as_str(), 0.0)).collect();
        self.lower_index(conn, &again)
    }

    /// What a bad key of a topic holds up, for its log line.
    /// After a tick failed on a key of the wrong type: names the index keys
    /// (`<prefix>due`, `<prefix>topics`, shared by every topic) that hold
    /// one, once each, as the scripts' bad keys are named. Nothing of the
    /// layout can be found while `<prefix>due` is bad; the tick is retried.
    fn name_bad_index(&self, conn: &mut Conn) {
        let shapes = [(self.keys.due(), "zset"), (self.keys.topics(), "set")];
        let mut read = Batch::new();
        shapes.iter().for_each(|(key, _)| {
            read.add(redis::cmd("TYPE").arg(key).clone());
        });
        let Ok(kinds) = read.query::<Vec<String>>(conn) else { return };
        let bad: Vec<BadKey> = shapes
            .into_iter()
            .zip(kinds)
            .filter(|((_, want), kind)| kind != want && kind != "none")
            .map(|((key, want), kind)| BadKey { key, kind, expected: want.to_string() })
            .collect();
        self.bad.met(&bad, |bad| self.effect(bad));
    }

    fn effect(&self, bad: &BadKey) -> String {
        let key = bad.key.as_str();
        if key == self.keys.due() {
            return "no topic can be found or moved while it is; ticks are retried".into();
        }
        if key == self.keys.topics() {
            return "the 10 s sweep of known topics is skipped; the 60 s rescan of the key space finds their pools"
                .into();
        }
        let topic =
            key.strip_prefix(self.keys.prefix()).and_then(|k| k.strip_prefix('{')).and_then(|k| k.split_once("}:"));
        let Some((topic, kind)) = topic else { return "its work is skipped".into() };
        match kind {
            "pool" | "ready" => {
                format!(
                    "topic {topic:?} is set aside: its jobs wait where they are (none is lost); other topics move on"
                )
            }
            "flow" => format!(
                "topic {topic:?} is set aside and no consumer hands out its jobs (its pause cannot be read); they wait \
                 where they are; other topics move on"
            ),
            "reserved" => format!("reservations of topic {topic:?} can neither expire nor be cleaned up by moves"),
            "dead" => {
                format!("jobs of topic {topic:?} out of attempts after their ttr are parked on its malformed list")
            }
            "malformed" => format!("expired reservations of topic {topic:?} without a job wait in its reserved set"),
            _ => "its work is skipped".into(),
        }
    }

    /// The index entries' times, read into 1970..9999 (`delayer::numbers`),
    /// each odd one said once: `-inf` reads as due now (the topic is
    /// drained, and its entry written anew), `inf` as the end of 9999.
    fn index_times(&self, head: Vec<(String, f64)>) -> Vec<(String, f64)> {
        let due = self.keys.due();
        let whence = |topic: &str, at: f64| (format!("{due} (member {topic:?})"), at.to_string());
        head.into_iter()
            .filter_map(|(topic, at)| {
                let time = oddities::checked(numbers::time_secs(at), "the index time", || whence(&topic, at))?;
                Some((topic, time.secs()))
            })
            .collect()
    }

    /// A topic's index time from its pool head (due time, seconds) and
    /// reserved head (deadline, Unix ms), each read into 1970..9999.
    fn head_time(&self, topic: &str, pool_head: &Head, reserved_head: &Head) -> Option<f64> {
        let due = pool_head.first().and_then(|(_, due)| {
            let whence = || (self.keys.pool(topic), due.to_string());
            oddities::checked(numbers::time_secs(*due), "the earliest due time", whence)
        });
        let deadline = reserved_head.first().and_then(|(_, ms)| {
            let whence = || (self.keys.reserved(topic), ms.to_string());
            oddities::checked(numbers::time_millis(*ms), "the earliest deadline (Unix ms)", whence)
        });
        earlier(due.map(Time::secs), deadline.map(Time::secs))
    }

    /// Adds the reads of a topic's pool head and reserved head to `batch`
    /// (read them with [`head_time`]).
    fn read_head(&self, batch: &mut Batch, topic: &str) {
        batch.add(redis::Cmd::zrange_withscores(self.keys.pool(topic), 0, 0));
        batch.add(redis::Cmd::zrange_withscores(self.keys.reserved(topic), 0, 0));
    }

    /// `ZADD <prefix>due LT <time> <topic>` for each topic with a job waiting
    /// or reserved: an index entry never later than the topic's first due
    /// time or deadline.
    fn index_heads(&self, conn: &mut Conn, topics: &[String]) -> redis::RedisResult<()> {
        if topics.is_empty() {
            return Ok(());
        }
        let mut read = Batch::new();
        topics.iter().for_each(|t| self.read_head(&mut read, t));
        // A key of the wrong type answers an error for itself alone.
        let heads: Vec<redis::RedisResult<Head>> = read.query_each(conn)?;
        let mut lower = Vec::new();
        for (topic, pair) in topics.iter().zip(heads.chunks(2)) {
            let [pool_head, reserved_head] = pair else { break };
            let (pool_head, reserved_head) = match (pool_head, reserved_head) {
                (Ok(p), Ok(r)) => (p, r),
                (Err(e), _) | (_, Err(e)) if bad_keys(e) => {
                    self.note_bad_topic(conn, topic, e)?;
                    continue;
                }
                (Err(e), _) | (_, Err(e)) => return Err(e.clone()),
            };
            if let Some(first) = self.head_time(topic, pool_head, reserved_head) {
                lower.push((topic.as_str(), first));
            }
        }
        self.lower_index(conn, &lower)
    }
}

/// A write that Redis refused for maxmemory is left for a later pass (the
/// memory watch says Redis is full); any other error stands.
fn out_of_memory_is_later(written: RedisResult<()>) -> RedisResult<()> {
    match written {
        Err(e) if out_of_memory(&e) => Ok(()),
        other => other,
    }
}

/// Whether Redis refused a write for maxmemory.
fn out_of_memory(e: &RedisError) -> bool {
    e.code() == Some("OOM") || e.to_string().contains("command not allowed when used memory")
}

/// A drained topic's next index time, and whether flow control holds its
/// due jobs (paused, or waiting for its rate limit's tokens).
struct Next<'a> {
    topic: &'a str,
    at: Option<f64>,
    held: bool,
}

/// The earlier of two optional times.
pub fn earlier(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
