//! The server's Lua scripts and their replies: `lua/move.lua` (due jobs to
//! their ready queues), `lua/move_topic.lua` (the same for one topic of the
//! per-topic layout), `lua/index.lua` (that layout's index after a drain) and
//! `lua/release.lua` (`release_topic.lua` in the per-topic layout) in its
//! "expired" mode (reservations past their deadline: retry or dead letters).
//!
//! The script texts live once in the repository's `lua/` folder, with their
//! KEYS and ARGV in their headers (`server/lua/move.lua` links to it, so
//! `cargo package` carries it). The release pair is the one the SDKs run for
//! release and bury, so an expired reservation is a failed attempt by the
//! very same rules. Scripts are sent by SHA and loaded again when Redis
//! answers NOSCRIPT (after a restart or SCRIPT FLUSH): by `redis::Script`
//! for a single call, by [`eval_each`] for the per-topic layout's calls,
//! which go many to a round trip.
//!
//! Replies are read as untrusted: every time in them passes
//! `delayer_protocol::numbers` (so it is finite and within 1970..9999) and an odd
//! one is said once per key ([`crate::oddities`]).

use crate::oddities;
use delayer_protocol::connection::{Batch, Conn};
use delayer_protocol::keys::{Keys, TopicKeys};
use delayer_protocol::numbers::{self, Odd, Read, Time};
use redis::{Cmd, Script, Value};
use std::sync::LazyLock;

/// `move.lua` (its header states its KEYS and ARGV).
pub static MOVE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/move.lua")));

/// `move_topic.lua` (its header states its KEYS and ARGV).
pub static MOVE_TOPIC: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/move_topic.lua")));

/// `index.lua`: the per-topic layout's index entries after a drain (its
/// header states its KEYS and ARGV).
pub static INDEX: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/index.lua")));

/// `release.lua`, run in its "expired" mode (its header states its KEYS and
/// ARGV; the SDKs' copy, via delayer-protocol).
pub static EXPIRE: &LazyLock<Script> = &delayer_protocol::scripts::RELEASE;

/// `release_topic.lua`, the per-topic layout's twin of [`EXPIRE`].
pub static EXPIRE_TOPIC: &LazyLock<Script> = &delayer_protocol::scripts::RELEASE_TOPIC;

/// What one expire call did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExpireReply {
    /// Reservations taken off the reserved set.
    pub taken: u64,
    /// Jobs scheduled again (after their backoff).
    pub retried: u64,
    /// Jobs past max_attempts, sent to their dead-letter list.
    pub dead: u64,
    /// Stale entries (job removed or pushed again) dropped.
    pub dropped: u64,
    /// Ids whose bucket had no topic, parked on the malformed list.
    pub malformed: Vec<String>,
    /// Earliest deadline left (Unix seconds).
    pub next_deadline: Option<f64>,
    /// Redis's clock when the script ran (Unix seconds).
    pub now: f64,
    /// Expired ids that could be neither ended nor parked (the malformed
    /// list holds the wrong type): their deadline moved on.
    pub held: u64,
    /// Keys of the wrong type the call met.
    pub bad_keys: Vec<BadKey>,
}

/// A key of the wrong type a script met (its reply's `bad_keys`), and what
/// its work was skipped for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct BadKey {
    pub key: String,
    /// What TYPE said it is.
    pub kind: String,
    /// What it should be: `list`, `zset`, `hash`, `set`, or `integers` for
    /// a count hash holding a field that is not one.
    pub expected: String,
}

/// Ends at most `batch_size` reservations whose deadline has passed.
pub fn expire_batch(conn: &mut Conn, keys: &Keys, batch_size: u32) -> redis::RedisResult<ExpireReply> {
    let value: Value = EXPIRE
        .key(keys.reserved())
        .key(keys.job_pool())
        .key(keys.malformed())
        .key(keys.scheduled_count())
        .key(keys.outcomes())
        .arg(keys.bucket_prefix())
        .arg(keys.dead_prefix())
        .arg("backoff")
        .arg("expired")
        .arg(batch_size)
        .invoke(conn)?;
    parse_expire(value, &keys.reserved()).map_err(|m| bad_reply("release.lua reply", m))
}

/// The call that ends at most `batch_size` of one topic's reservations whose
/// deadline has passed, in the per-topic layout (release_topic.lua: the
/// topic's keys, its dead-letter list as `KEYS[4]`). Send it with [`eval_each`]; read its reply
/// with [`read_expire`].
pub fn expire_topic_call(keys: &TopicKeys, topic: &str, batch_size: u32) -> Cmd {
    let script_keys =
        [keys.reserved(topic), keys.pool(topic), keys.malformed(topic), keys.dead(topic), keys.outcomes(topic)];
    let mut call = evalsha(EXPIRE_TOPIC, &script_keys);
    call.arg(keys.bucket_prefix(topic)).arg("backoff").arg("expired").arg(batch_size);
    call
}

/// release.lua's "expired" reply (`reserved`: the key its deadlines are
/// from, named if one is odd).
pub fn read_expire(value: Value, reserved: &str) -> redis::RedisResult<ExpireReply> {
    parse_expire(value, reserved).map_err(|m| bad_reply("release.lua reply", m))
}

/// `EVALSHA <sha> <numkeys> <keys...>` of `script`; the caller adds ARGV.
fn evalsha(script: &Script, keys: &[String]) -> Cmd {
    let mut call = redis::cmd("EVALSHA");
    call.arg(script.get_hash()).arg(keys.len()).arg(keys);
    call
}

/// Sends `calls` (EVALSHA of `script`) together: one pipeline, one round
/// trip, on one Redis (on a cluster each goes to its key's node), so Redis
/// runs them back to back. Each call's own reply or error: one topic's keys
/// of the wrong type do not hide the others' replies. When Redis has lost
/// the script (NOSCRIPT, after a restart or SCRIPT FLUSH) it is loaded and
/// the calls that met NOSCRIPT are sent again; the others ran.
pub fn eval_each(
    conn: &mut Conn,
    script: &Script,
    calls: &[Cmd],
) -> redis::RedisResult<Vec<redis::RedisResult<Value>>> {
    let send = |conn: &mut Conn, calls: &mut dyn Iterator<Item = &Cmd>| {
        let mut batch = Batch::new();
        calls.for_each(|c| {
            batch.add(c.clone());
        });
        batch.query_each::<Value>(conn)
    };
    let mut replies = send(conn, &mut calls.iter())?;
    let lost: Vec<usize> =
        (0..replies.len()).filter(|&i| matches!(&replies[i], Err(e) if e.code() == Some("NOSCRIPT"))).collect();
    if lost.is_empty() {
        return Ok(replies);
    }
    script.load(conn)?;
    let again = send(conn, &mut lost.iter().map(|&i| &calls[i]))?;
    for (i, reply) in lost.into_iter().zip(again) {
        replies[i] = reply;
    }
    Ok(replies)
}

pub(crate) fn bad_reply(what: &'static str, detail: String) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::UnexpectedReturnType, what, detail))
}

fn parse_expire(value: Value, reserved: &str) -> Result<ExpireReply, String> {
    let Value::Array(items) = value else { return Err(format!("not an array: {value:?}")) };
    let [taken, retried, dead, dropped, malformed, next_deadline, now, held, bad_keys]: [Value; 9] =
        items.try_into().map_err(|v: Vec<Value>| format!("{} elements, expected 9", v.len()))?;
    Ok(ExpireReply {
        held: int(held)?,
        bad_keys: read_bad_keys(bad_keys)?,
        taken: int(taken)?,
        retried: int(retried)?,
        dead: int(dead)?,
        dropped: int(dropped)?,
        malformed: strings(malformed)?,
        next_deadline: next_time(next_deadline, reserved, "the earliest reservation deadline")?,
        now: clock(now)?,
    })
}

/// What one move call did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MoveReply {
    /// Ids taken off the pool (moved + orphans + malformed).
    pub taken: u64,
    /// Ids whose bucket was gone, dropped.
    pub orphans: u64,
    /// Ids whose bucket had no topic, parked on the malformed list.
    pub malformed: Vec<String>,
    /// Ids moved, per topic.
    pub per_topic: Vec<(String, u64)>,
    /// Due time of the earliest job left in the pool (Unix seconds).
    pub next_due: Option<f64>,
    /// Redis's clock when the script ran (Unix seconds, to the microsecond).
    pub now: f64,
    /// Due time of the first id taken.
    pub oldest_due: Option<f64>,
    /// Ids left in the pool.
    pub pool_size: u64,
    /// For each id moved, milliseconds behind its due time (when asked for).
    pub lateness_ms: Vec<u64>,
    /// Ids left in the pool because the key they go to holds the wrong type.
    pub held: u64,
    /// Keys of the wrong type the call met.
    pub bad_keys: Vec<BadKey>,
    /// The pool's held head after the call (pass it to the next call), 0
    /// when it changed under us: the next call starts from the pool's head.
    pub head: u64,
    /// The topic is paused: nothing was moved, and its pool head is not its
    /// next time (per-topic layout).
    pub paused: bool,
    /// The topic's last pause, which jobs due before its end waited for.
    pub pause: Option<Pause>,
    /// For each id moved, milliseconds it was held by a pause (when
    /// `lateness_ms` is asked for; 0 for most).
    pub held_ms: Vec<u64>,
    /// Ids set aside in their topic's flow pool, per topic (classic layout:
    /// the topic is under flow control; `move_flow.lua` makes them ready).
    pub aside: Vec<(String, u64)>,
    /// The topic's rate limit left due jobs waiting: when its next token
    /// comes (Unix seconds), the topic's next time.
    pub next_allowed: Option<f64>,
    /// Since when due jobs had waited for tokens when the call began: the
    /// jobs it moved waited for the limit, not for the server.
    pub backlog: Option<f64>,
}

/// A topic's last pause, from its flow hash (Unix seconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pause {
    /// When it began, when known.
    pub began: Option<f64>,
    /// When it ended (the resume).
    pub resumed: f64,
}

impl MoveReply {
    /// Ids sent to ready queues.
    pub fn moved(&self) -> u64 {
        self.per_topic.iter().map(|(_, n)| n).sum()
    }

    /// How long after `due` (Unix seconds) a job of this call was moved,
    /// split into the server's own lateness and the time flow control held
    /// it: a job due before the last resume waited for the pause, and a
    /// histogram of lateness must not fill with "late by 3 hours" after one
    /// (issue 23). A job that waited for its rate limit's token has no
    /// lateness of the server's (None): all its wait was the limit's.
    /// Seconds, each at least 0.
    pub fn split(&self, due: f64) -> (Option<f64>, f64) {
        match self.pause {
            Some(p) if due < p.resumed => {
                let began = p.began.map_or(due, |b| b.clamp(due, p.resumed));
                (Some((began - due) + (self.now - p.resumed).max(0.0)), p.resumed - began)
            }
            _ if self.backlog.is_some() => (None, (self.now - due).max(0.0)),
            _ => (Some((self.now - due).max(0.0)), 0.0),
        }
    }

    /// What held this call's jobs, for `delayer_held_seconds{reason}`.
    pub fn held_reason(&self) -> &'static str {
        if self.backlog.is_some() && self.pause.is_none_or(|p| self.oldest_due.is_none_or(|d| d >= p.resumed)) {
            "limited"
        } else {
            "paused"
        }
    }

    /// The server's lateness of the first id moved (ids leave in due order:
    /// the batch's most), in seconds.
    pub fn first_lateness(&self) -> Option<f64> {
        self.oldest_due.and_then(|due| self.split(due).0)
    }

    /// Each moved job's wait, split ([`MoveReply::split`]) into
    /// `lateness_ms` and `held_ms`.
    pub(crate) fn push_waits(&mut self, dues: impl IntoIterator<Item = f64>) {
        let ms = |s: f64| (s * 1000.0).round() as u64;
        for due in dues {
            let (late, held) = self.split(due);
            if let Some(late) = late {
                self.lateness_ms.push(ms(late));
            }
            self.held_ms.push(ms(held));
        }
    }
}

/// Runs one move of at most `batch_size` due ids after the `from` held ids
/// at the pool's head (move.lua's header); with `lateness`, the reply lists
/// each moved id's lateness (it costs Redis time: metrics only).
pub fn move_batch(
    conn: &mut Conn,
    keys: &Keys,
    batch_size: u32,
    lateness: bool,
    from: u64,
) -> redis::RedisResult<MoveReply> {
    let value: Value = MOVE
        .key(keys.job_pool())
        .key(keys.malformed())
        .key(keys.scheduled_count())
        .key(keys.topics())
        .key(keys.reserved())
        .arg(keys.bucket_prefix())
        .arg(keys.ready_queue_prefix())
        .arg(batch_size)
        .key(keys.flow_topics())
        .arg(if lateness { "1" } else { "0" })
        .arg(from)
        .arg(keys.flow_pool_prefix())
        .invoke(conn)?;
    parse(value, &keys.job_pool()).map_err(|m| bad_reply("move.lua reply", m))
}

/// move.lua's reply; `pool` is the key its due times are from.
fn parse(value: Value, pool: &str) -> Result<MoveReply, String> {
    let Value::Array(items) = value else { return Err(format!("not an array: {value:?}")) };
    let [taken, orphans, malformed, per_topic, next_due, now, oldest_due, pool_size, lateness, held, bad_keys, head, aside]: [Value;
        13] = items.try_into().map_err(|v: Vec<Value>| format!("{} elements, expected 13", v.len()))?;
    let lateness_ms = match lateness {
        // A due time of -inf makes a lateness no integer holds (Redis
        // answers i64::MIN): that job's lateness is not known, and left out.
        Value::Array(items) => items
            .iter()
            .filter_map(|v| {
                let read = numbers::count_value::<u64>(v);
                let odd = read.odd.is_some();
                oddities::checked(read, "a moved job's lateness (ms)", || (pool.into(), format!("{v:?}")))
                    .filter(|_| !odd)
            })
            .collect(),
        other => return Err(format!("expected a list of lateness, got {other:?}")),
    };
    Ok(MoveReply {
        taken: int(taken)?,
        orphans: int(orphans)?,
        malformed: strings(malformed)?,
        per_topic: counts(per_topic)?,
        aside: counts(aside)?,
        next_due: next_time(next_due, pool, "the earliest due time")?,
        now: clock(now)?,
        oldest_due: next_time(oldest_due, pool, "the due time of a moved job")?,
        pool_size: int(pool_size)?,
        lateness_ms,
        held: int(held)?,
        bad_keys: read_bad_keys(bad_keys)?,
        head: int(head)?,
        ..MoveReply::default()
    })
}

/// A reply's flat `{topic1, count1, ...}`.
fn counts(v: Value) -> Result<Vec<(String, u64)>, String> {
    let flat = strings(v)?;
    let mut pairs = Vec::with_capacity(flat.len() / 2);
    for pair in flat.chunks(2) {
        let [topic, count] = pair else { return Err("odd per-topic list".into()) };
        pairs.push((topic.clone(), count.parse().map_err(|_| format!("bad count {count:?}"))?));
    }
    Ok(pairs)
}

/// A reply's flat `{key, type, expected, ...}`.
pub(crate) fn read_bad_keys(v: Value) -> Result<Vec<BadKey>, String> {
    let flat = strings(v)?;
    if flat.len() % 3 != 0 {
        return Err(format!("bad_keys: {} elements, not triples", flat.len()));
    }
    Ok(flat.chunks(3).map(|c| BadKey { key: c[0].clone(), kind: c[1].clone(), expected: c[2].clone() }).collect())
}

/// The call that moves at most `batch_size` due ids of one topic in the
/// per-topic layout. Send it with [`eval_each`]; read its reply with
/// [`read_move_topic`].
pub fn move_topic_call(keys: &TopicKeys, topic: &str, batch_size: u32) -> Cmd {
    let mut call = evalsha(&MOVE_TOPIC, &[keys.pool(topic), keys.ready(topic), keys.reserved(topic), keys.flow(topic)]);
    call.arg(batch_size);
    call
}

/// move_topic.lua's reply, read as move.lua's for the metrics; with
/// `lateness`, per-job lateness is spread evenly from the batch's oldest to
/// its newest due time (ids leave in due order): the script reads two
/// scores, not one per job.
/// `pool` is the topic's pool, the key its due times are from.
pub fn read_move_topic(topic: &str, pool: &str, value: Value, lateness: bool) -> redis::RedisResult<MoveReply> {
    parse_topic(topic, pool, value, lateness).map_err(|m| bad_reply("move_topic.lua reply", m))
}

/// move_topic.lua's `{taken, next_due, now, oldest_due, newest_due, pool_size, bad_keys, flow, resumed,
/// last_paused, next_allowed, backlog}`.
fn parse_topic(topic: &str, pool: &str, value: Value, lateness: bool) -> Result<MoveReply, String> {
    let Value::Array(items) = value else { return Err(format!("not an array: {value:?}")) };
    let [taken, next_due, now, oldest, newest, pool_size, bad_keys, flow, resumed, last_paused, next_allowed, backlog]: [Value;
        12] = items.try_into().map_err(|v: Vec<Value>| format!("{} elements, expected 12", v.len()))?;
    let (taken, now) = (int(taken)?, clock(now)?);
    let what = "the due time of a moved job";
    let (oldest_due, newest_due) = (next_time(oldest, pool, what)?, next_time(newest, pool, what)?);
    // The flow hash is anyone's to write: a time in it that is no time is
    // left out (the job's lateness is then counted whole).
    let flow_key = pool.strip_suffix("pool").map_or_else(|| pool.to_string(), |p| format!("{p}flow"));
    let resumed = next_time(resumed, &flow_key, "the time of the last resume")?;
    let began = next_time(last_paused, &flow_key, "the time the last pause began")?;
    let mut reply = MoveReply {
        taken,
        now,
        paused: text(flow)? == "paused",
        pause: resumed.map(|resumed| Pause { began, resumed }),
        next_allowed: next_time(next_allowed, &flow_key, "the time of the next token")?,
        backlog: next_time(backlog, &flow_key, "the time due jobs began to wait for tokens")?,
        ..MoveReply::default()
    };
    if let (true, Some(first), Some(last)) = (lateness, oldest_due, newest_due) {
        let step = if taken > 1 { (last - first) / (taken - 1) as f64 } else { 0.0 };
        reply.push_waits((0..taken).map(|i| first + step * i as f64));
    }
    Ok(MoveReply {
        taken,
        orphans: 0,
        malformed: Vec::new(),
        per_topic: if taken > 0 { vec![(topic.to_string(), taken)] } else { Vec::new() },
        oldest_due,
        pool_size: int(pool_size)?,
        next_due: next_time(next_due, pool, "the earliest due time")?,
        bad_keys: read_bad_keys(bad_keys)?,
        ..reply
    })
}

pub(crate) fn int(v: Value) -> Result<u64, String> {
    match v {
        Value::Int(n) if n >= 0 => Ok(n as u64),
        other => Err(format!("expected a count, got {other:?}")),
    }
}

pub(crate) fn text(v: Value) -> Result<String, String> {
    match v {
        Value::BulkString(b) => Ok(String::from_utf8_lossy(&b).into_owned()),
        // Lua numbers in a table come back as integers.
        Value::Int(n) => Ok(n.to_string()),
        other => Err(format!("expected a string, got {other:?}")),
    }
}

fn strings(v: Value) -> Result<Vec<String>, String> {
    match v {
        Value::Array(items) => items.into_iter().map(text).collect(),
        other => Err(format!("expected a list, got {other:?}")),
    }
}

/// A time a script answered ("" for none: an empty pool, no deadline), as
/// Unix seconds within 1970..9999 (`delayer_protocol::numbers`). An odd one is said
/// once for `key`: a time after 9999 reads as the end of 9999 (it waits);
/// one that is no time, or before 1970, reads as none, so the timer looks
/// again within timer_interval rather than ticking without pause (the
/// tick just moved whatever was due, so an early time is a misformatted
/// one: release.lua renders an `inf` deadline as `-9223372036854775808.…`).
pub(crate) fn next_time(v: Value, key: &str, what: &str) -> Result<Option<f64>, String> {
    let s = text(v)?;
    if s.is_empty() {
        return Ok(None);
    }
    let read = numbers::time_text(&s);
    match read.odd {
        None => Ok(read.value.map(Time::secs)),
        Some(Odd::Late) => {
            oddities::report(key, what, &s, "is after year 9999: waiting timer_interval at most");
            Ok(Some(Time::LATEST.secs()))
        }
        Some(_) => {
            oddities::report(key, what, &s, "is no time within 1970..9999: looking again within timer_interval");
            Ok(None)
        }
    }
}

/// Redis's clock in a reply (`TIME`, "s.uuuuuu"): a time there must be.
pub(crate) fn clock(v: Value) -> Result<f64, String> {
    let s = text(v)?;
    match numbers::time_text(&s) {
        Read { value: Some(now), odd: None } => Ok(now.secs()),
        _ => Err(format!("bad clock {s:?}")),
    }
}
