//! The dashboard's long history, shared through Redis: one sample per
//! [`STEP`] seconds, kept [`KEPT_SECONDS`], in the sorted set
//! `<prefix>history` (`lua/history.lua`), so every server, and a restarted
//! one, draws the same chart past the few minutes each process keeps in
//! memory (`history`).
//!
//! Every server (with or without the HTTP API: its mover's moves count)
//! writes its own part of the recent samples every `WRITE_EVERY`, and
//! reads what all of them wrote, on a thread of its own with a connection of
//! its own, bounded by the pool's timeouts. The HTTP handler answers from
//! the copy read last and never waits on Redis. Writes are idempotent (a
//! server's part of a sample is replaced, never added to), so writing a
//! sample still in progress, or again after a failure, counts nothing twice.
//! What is read is checked: a member that is not the script's JSON is
//! skipped, and a key of another type or an unreachable Redis is said once
//! (naming the key) and shown by `/v1/history`.

use crate::http::history;
use delayer_protocol::connection::{Conn, Manager};
use delayer_protocol::target::Target;
use redis::Script;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

/// Seconds per sample.
pub const STEP: u64 = 10;
/// Seconds of samples kept: a day.
pub const KEPT_SECONDS: u64 = 86_400;
/// Most samples kept (a clock gone wrong cannot grow the key past it).
const MOST_SAMPLES: u64 = KEPT_SECONDS / STEP;
/// How often this server writes its part and reads everyone's.
const WRITE_EVERY: Duration = Duration::from_secs(2);
/// Most servers' parts in one sample; the rest are added up together.
const MOST_SERVERS: u64 = 64;
/// How far back each read looks again: other servers write their parts of
/// a sample for a while after it began.
const REREAD_SECONDS: u64 = 120;
/// Bound on each Redis reply when the pool sets none.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

static SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/history.lua")));

/// The samples as last read, and why the last read failed.
#[derive(Default)]
struct Copy {
    key: String,
    /// Sample start -> [moved, lateness sum (ms), lateness count, most lateness (ms)].
    samples: BTreeMap<u64, [u64; 4]>,
    error: Option<String>,
    started: bool,
}

static COPY: Mutex<Copy> =
    Mutex::new(Copy { key: String::new(), samples: BTreeMap::new(), error: None, started: false });

fn copy() -> std::sync::MutexGuard<'static, Copy> {
    COPY.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Starts recording this process's moves and sharing them under `key`
/// (`<prefix>history`), on a thread of its own.
pub fn start(target: Target, key: String, connect_timeout: Duration, io_timeout: Option<Duration>) {
    history::enable();
    copy().key = key.clone();
    let manager = Manager::with_target(target, connect_timeout, Some(io_timeout.unwrap_or(IO_TIMEOUT)));
    let spawned = std::thread::Builder::new().name("history".into()).spawn(move || Sharer::new(key).run(&manager));
    if let Err(e) = spawned {
        log::warn!("history: cannot start the thread that shares the dashboard's history: {e}");
    }
}

/// The writing and reading thread's state.
struct Sharer {
    key: String,
    /// This process's name in the samples' parts.
    id: String,
    /// The parts last written, to write only what changed.
    written: BTreeMap<u64, [u64; 4]>,
    /// The start read from next (0: everything kept).
    read_from: u64,
    /// The last trouble said, to say each once.
    said: Option<String>,
}

impl Sharer {
    fn new(key: String) -> Sharer {
        let mut raw = [0u8; 8];
        let id = match getrandom::fill(&mut raw) {
            Ok(()) => raw.iter().map(|b| format!("{b:02x}")).collect(),
            Err(_) => format!("pid{}", std::process::id()),
        };
        Sharer { key, id, written: BTreeMap::new(), read_from: 0, said: None }
    }

    fn run(mut self, manager: &Manager) {
        let mut conn: Option<Conn> = None;
        loop {
            let result = match conn.as_mut() {
                Some(c) => self.round(c),
                None => manager.connect().and_then(|mut c| {
                    let done = self.round(&mut c);
                    conn = Some(c);
                    done
                }),
            };
            match result {
                Ok(()) => {
                    if self.said.take().is_some() {
                        log::info!("history: {} is written and read again", self.key);
                    }
                    copy().error = None;
                }
                Err(e) => {
                    // A refusal (a replica's READONLY, a key of another
                    // type) keeps the connection; a broken one is replaced.
                    if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() {
                        conn = None;
                    }
                    let message = format!("cannot share the dashboard's history in {}: {e}", self.key);
                    if self.said.as_deref() != Some(message.as_str()) {
                        log::warn!("history: {message}");
                        self.said = Some(message.clone());
                    }
                    copy().error = Some(message);
                }
            }
            std::thread::sleep(WRITE_EVERY);
        }
    }

    /// Writes this process's changed parts, then reads what is new (even
    /// when a write failed: a server on a read-only replica still shows
    /// what the others wrote).
    fn round(&mut self, conn: &mut Conn) -> redis::RedisResult<()> {
        let now = history::now_second();
        let written = self.write(conn, now);
        let read = self.read(conn, now);
        written.and(read)
    }

    fn write(&mut self, conn: &mut Conn, now: u64) -> redis::RedisResult<()> {
        let first = now.saturating_sub(history::SECONDS - STEP);
        let first = first - first % STEP;
        self.written.retain(|start, _| *start >= first);
        for (start, part) in history::windows(first, STEP) {
            if self.written.get(&start) == Some(&part) {
                continue;
            }
            let dropped: u64 = SCRIPT
                .key(&self.key)
                .arg(start)
                .arg(&self.id)
                .arg(&part[..])
                .arg(now.saturating_sub(KEPT_SECONDS))
                .arg(MOST_SAMPLES)
                .arg(MOST_SERVERS)
                .invoke(conn)?;
            if dropped > 0 {
                log::warn!("history: dropped {dropped} unreadable sample(s) of {} at {start}", self.key);
            }
            self.written.insert(start, part);
        }
        Ok(())
    }

    fn read(&mut self, conn: &mut Conn, now: u64) -> redis::RedisResult<()> {
        let from = self.read_from.max(now.saturating_sub(KEPT_SECONDS));
        let members: Vec<(Vec<u8>, f64)> = redis::cmd("ZRANGEBYSCORE")
            .arg(&self.key)
            .arg(from)
            .arg("+inf")
            .arg("WITHSCORES")
            .arg("LIMIT")
            .arg(0)
            .arg(MOST_SAMPLES + 1)
            .query(conn)?;
        let mut read = BTreeMap::new();
        let mut junk = Vec::new();
        for (member, score) in members {
            match sample(&member) {
                Some((t, numbers)) if t as f64 == score => {
                    read.insert(t, numbers);
                }
                _ => junk.push(member),
            }
        }
        if !junk.is_empty() {
            // Not a sample (not history.lua's JSON, or a score that is not
            // its start, such as inf): nothing reads it, so it goes.
            let _: u64 = redis::cmd("ZREM").arg(&self.key).arg(&junk).query(conn)?;
            log::warn!("history: dropped {} member(s) of {} that are not samples", junk.len(), self.key);
        }
        let mut copy = copy();
        copy.samples.retain(|t, _| *t < from && *t + KEPT_SECONDS >= now);
        copy.samples.extend(read);
        while copy.samples.len() as u64 > MOST_SAMPLES {
            copy.samples.pop_first();
        }
        copy.started = true;
        self.read_from = now.saturating_sub(REREAD_SECONDS);
        Ok(())
    }
}

/// A member's start and its servers' parts added up; `None` when it is not
/// the script's JSON.
fn sample(member: &[u8]) -> Option<(u64, [u64; 4])> {
    let value: Value = serde_json::from_slice(member).ok()?;
    let t = value.get("t")?.as_u64()?;
    let mut sum = [0u64; 4];
    for part in value.get("by")?.as_object()?.values() {
        let numbers = part.as_array()?;
        let n = |i: usize| numbers.get(i).and_then(Value::as_f64).map_or(0, whole);
        sum[0] = sum[0].saturating_add(n(0));
        sum[1] = sum[1].saturating_add(n(1));
        sum[2] = sum[2].saturating_add(n(2));
        sum[3] = sum[3].max(n(3));
    }
    Some((t, sum))
}

/// A JSON number as a count: negative and not-a-number as 0, huge ones capped.
fn whole(x: f64) -> u64 {
    if x.is_nan() || x <= 0.0 {
        0
    } else {
        x.min(1e15) as u64
    }
}

/// The last `seconds` (at most [`KEPT_SECONDS`]) as JSON, one sample per
/// [`STEP`] seconds, oldest first, seconds without moves as zeros.
pub fn snapshot(seconds: u64) -> Value {
    snapshot_at(history::now_second(), seconds.clamp(STEP, KEPT_SECONDS))
}

fn snapshot_at(now: u64, seconds: u64) -> Value {
    let copy = copy();
    let last = now - now % STEP;
    let first = last.saturating_sub(seconds - STEP);
    let first = first - first % STEP;
    let samples: Vec<Value> = (first..=last)
        .step_by(STEP as usize)
        .map(|t| {
            let [moved, sum, count, max] = copy.samples.get(&t).copied().unwrap_or_default();
            json!({"t": t, "moved": moved, "lateness_avg_ms": sum.checked_div(count).unwrap_or(0), "lateness_max_ms": max})
        })
        .collect();
    json!({
        "now": now,
        "step": STEP,
        "samples": samples,
        "shared": {"key": copy.key, "read": copy.started, "error": copy.error},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_read_as_untrusted() {
        let member = br#"{"t": 100, "by": {"a": [3, 30, 3, 20], "b": [2, 10, 2, 40], "_": [1, 1e300, -5, "x"]}}"#;
        assert_eq!(sample(member), Some((100, [6, 40 + 1_000_000_000_000_000, 5, 40])));
        for bad in [&b"not json"[..], br#"{"by": {}}"#, br#"{"t": -1, "by": {}}"#, br#"{"t": 1, "by": [1]}"#] {
            assert_eq!(sample(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(sample(br#"{"t": 5, "by": {"a": "many"}}"#), None);
    }
}
