//! The classic layout's flow drain: makes the set-aside ids of topics that
//! run again ready (docs/design/flow-control.md §4.2).
//!
//! In the classic layout every topic shares one pool, so `move.lua` sends a
//! flow-controlled topic's due ids to that topic's flow pool instead of its
//! ready queue: a paused topic's backlog leaves the shared pool once and
//! never holds up the others. This module calls `move_flow.lua` for each
//! topic of `<prefix>flow_topics`, all topics of a round in one pipeline; the
//! mover runs one pool batch between rounds, so a resume that drains a
//! million held jobs delays the other topics by one round at most.
//!
//! Redis is the only authority: a topic answered "paused" is only not asked
//! again until the wake channel announces it (a resume does, design hole 6)
//! or [`PAUSED_RECHECK`] has passed (a lost announcement), which bounds the
//! cost of many paused topics; one answered "limited" (its tokens are
//! spent) is not asked again before its next token or an announcement, nor
//! one with nothing set aside before move.lua sets ids aside for it.

use crate::oddities;
use crate::scripts::{self, bad_reply, clock, int, next_time, read_bad_keys, text, MoveReply, Pause};
use delayer_protocol::connection::Conn;
use delayer_protocol::keys::Keys;
use delayer_protocol::numbers;
use log::warn;
use redis::{Cmd, Script, Value};
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

/// How long a topic that answered "paused" is not asked again unless
/// announced: the bound on how late a resume whose announcement was lost
/// is seen (the per-topic layout's sweep has the same period).
pub const PAUSED_RECHECK: Duration = Duration::from_secs(10);

/// The most ids one `move_flow.lua` call takes: about half a millisecond of
/// Redis, so the pool batch between rounds is never far off.
pub const MAX_FLOW_BATCH: u32 = 250;

/// The most topics one round asks (the rest wait for the next tick's).
const MAX_TOPICS: usize = 1000;

/// The most topics of `flow_topics` read per tick, resting ones included:
/// those not resting are asked, so a busy topic is not left out by a draw
/// among thousands of idle ones.
const MAX_LISTED: usize = 10_000;

pub struct FlowDrain {
    keys: Keys,
    batch: u32,
    lateness: bool,
    /// Topics not to ask before a time: paused ones, limited ones.
    resting: Mutex<HashMap<Vec<u8>, Instant>>,
}

/// What one round did.
#[derive(Default)]
pub struct Round {
    /// Each asked topic's reply.
    pub replies: Vec<(Vec<u8>, MoveReply)>,
    /// Topics whose call took a whole batch: they may have more.
    pub more: Vec<Vec<u8>>,
    /// The earliest next token of a limited topic (Redis's clock, Unix
    /// seconds): the mover's next tick is due then.
    pub next_allowed: Option<f64>,
}

impl FlowDrain {
    pub fn new(keys: Keys, batch_size: u32, lateness: bool) -> FlowDrain {
        FlowDrain { keys, batch: batch_size.clamp(1, MAX_FLOW_BATCH), lateness, resting: Mutex::default() }
    }

    /// The topics with set-aside ids or under flow control, less those
    /// resting (paused, or limited until their next token), as bytes (a PHP client may name a topic that is not
    /// UTF-8). A `flow_topics` of the wrong type reads as none (move.lua names
    /// it, and sets nothing aside meanwhile).
    pub fn topics(&self, conn: &mut Conn) -> redis::RedisResult<Vec<Vec<u8>>> {
        let key = self.keys.flow_topics();
        // Bytes, not Values: RESP3 answers a set, RESP2 an array.
        let raw: Vec<Vec<u8>> = match redis::cmd("SRANDMEMBER").arg(&key).arg(MAX_LISTED).query(conn) {
            Ok(v) => v,
            Err(e) if e.code() == Some("WRONGTYPE") => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut resting = self.resting.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        resting.retain(|_, until| *until > now);
        Ok(raw.into_iter().filter(|t| !resting.contains_key(t)).take(MAX_TOPICS).collect())
    }

    /// Topics announced on the wake channel are asked at the next round;
    /// `all` (the listener subscribed again, and may have missed some):
    /// every topic is.
    pub fn wake<'a>(&self, topics: impl Iterator<Item = &'a [u8]>, all: bool) {
        let mut resting = self.resting.lock().unwrap_or_else(|e| e.into_inner());
        if all {
            resting.clear();
            return;
        }
        for topic in topics {
            resting.remove(topic);
        }
    }

    /// One `move_flow.lua` call per topic, in one round trip.
    pub fn round(&self, conn: &mut Conn, topics: &[Vec<u8>]) -> redis::RedisResult<Round> {
        let calls: Vec<_> = topics.iter().map(|t| move_flow_call(&self.keys, t, self.batch, self.lateness)).collect();
        let replies = scripts::eval_each(conn, &MOVE_FLOW, &calls)?;
        let mut round = Round::default();
        let mut resting = self.resting.lock().unwrap_or_else(|e| e.into_inner());
        for (topic, reply) in topics.iter().zip(replies) {
            let name = String::from_utf8_lossy(topic);
            let reply = match reply.and_then(|v| read_move_flow(&name, &self.keys, v)) {
                Ok(r) => r,
                Err(e) => {
                    warn!("moving the set-aside jobs of topic {name:?} failed: {e}; they wait (none is lost)");
                    continue;
                }
            };
            if reply.paused {
                resting.insert(topic.clone(), Instant::now() + PAUSED_RECHECK);
            } else if let Some(at) = reply.next_allowed {
                // Redis's clock to this machine's: the wait from the reply's now.
                let wait = Duration::try_from_secs_f64(at - reply.now).unwrap_or_default().min(PAUSED_RECHECK);
                resting.insert(topic.clone(), Instant::now() + wait);
                round.next_allowed = Some(round.next_allowed.map_or(at, |n: f64| n.min(at)));
            } else if reply.taken >= u64::from(self.batch) {
                round.more.push(topic.clone());
            } else if reply.taken == 0 && reply.pool_size == 0 {
                // A limited topic with nothing set aside: asked again when
                // move.lua sets ids aside for it (the mover wakes it), or it
                // is announced, not every tick.
                resting.insert(topic.clone(), Instant::now() + PAUSED_RECHECK);
            }
            round.replies.push((topic.clone(), reply));
        }
        Ok(round)
    }
}

/// `move_flow.lua`: a classic topic's set-aside ids made ready once it runs
/// (its header states its KEYS and ARGV).
pub static MOVE_FLOW: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/move_flow.lua")));

/// The call that makes at most `batch_size` of `topic`'s set-aside ids ready
/// (classic layout, `move_flow.lua`). Send it with [`eval_each`]; read its
/// reply with [`read_move_flow`].
/// The topic is bytes: a PHP or 1.x client may name one that is not UTF-8.
pub fn move_flow_call(keys: &Keys, topic: &[u8], batch_size: u32, lateness: bool) -> Cmd {
    let of = |kind: &str| [keys.prefix().as_bytes(), kind.as_bytes(), topic].concat();
    let mut call = redis::cmd("EVALSHA");
    call.arg(MOVE_FLOW.get_hash()).arg(7);
    call.arg(of("flow_pool:")).arg(of("ready_queue:")).arg(of("flow:"));
    call.arg(keys.job_pool()).arg(keys.reserved()).arg(keys.scheduled_count()).arg(keys.flow_topics());
    call.arg(topic).arg(keys.bucket_prefix()).arg(batch_size).arg(if lateness { "1" } else { "0" });
    call
}

/// move_flow.lua's reply as a [`MoveReply`]: `taken` counts the ids taken
/// off the flow pool (moved and dropped, as `orphans`), `pool_size` what is
/// left there, and each moved job's wait is split into held and late.
pub fn read_move_flow(topic: &str, keys: &Keys, value: Value) -> redis::RedisResult<MoveReply> {
    parse_flow(topic, keys, value).map_err(|m| bad_reply("move_flow.lua reply", m))
}

fn parse_flow(topic: &str, keys: &Keys, value: Value) -> Result<MoveReply, String> {
    let Value::Array(items) = value else { return Err(format!("not an array: {value:?}")) };
    let [moved, dropped, flow, left, now, resumed, last_paused, dues, bad_keys, head, next_allowed, backlog]: [Value;
        12] = items.try_into().map_err(|v: Vec<Value>| format!("{} elements, expected 12", v.len()))?;
    let (moved, dropped) = (int(moved)?, int(dropped)?);
    let (flow_key, pool) = (keys.flow(topic), keys.flow_pool(topic));
    let resumed = next_time(resumed, &flow_key, "the time of the last resume")?;
    let began = next_time(last_paused, &flow_key, "the time the last pause began")?;
    let mut reply = MoveReply {
        taken: moved + dropped,
        orphans: dropped,
        per_topic: if moved > 0 { vec![(topic.to_string(), moved)] } else { Vec::new() },
        now: clock(now)?,
        pool_size: int(left)?,
        paused: text(flow)? == "paused",
        pause: resumed.map(|resumed| Pause { began, resumed }),
        bad_keys: read_bad_keys(bad_keys)?,
        next_allowed: next_time(next_allowed, &flow_key, "the time of the next token")?,
        backlog: next_time(backlog, &flow_key, "the time due jobs began to wait for tokens")?,
        ..MoveReply::default()
    };
    // What is left was due when set aside: a head no clock reaches is junk
    // (the job waits there, not lost), said once.
    let head = text(head)?;
    if !head.is_empty() && numbers::time_text(&head).odd.is_some() {
        oddities::report(
            &pool,
            "the due time of a set-aside job",
            &head,
            "is no time within 1970..9999: that job waits in the flow pool (none is lost; fix or remove it)",
        );
    }
    let Value::Array(dues) = dues else { return Err("expected a list of due times".into()) };
    let mut times = Vec::with_capacity(dues.len());
    for due in dues {
        // A score that is no time is left out of the histograms.
        if let Some(due) = next_time(due, &pool, "the due time of a set-aside job")? {
            times.push(due);
        }
    }
    reply.oldest_due = times.first().copied();
    reply.push_waits(times);
    Ok(reply)
}
