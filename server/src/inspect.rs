//! Read-only views of the queue for operators: `delayer stats`, `delayer
//! peek` and `delayer dead list`. They read the same delayer.conf as the
//! server and never write to Redis. (Re-queueing and purging dead letters
//! go through the SDK, which owns those scripts.)

use delayer::conf::RedisSettings;
use delayer::Keys;
use redis::{Commands, Connection};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;

/// A snapshot of the queue.
#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    /// Redis's clock, Unix seconds.
    pub now: f64,
    /// Jobs waiting in the pool (due or not).
    pub pool_size: u64,
    /// The earliest due time in the pool.
    pub next_due: Option<f64>,
    /// Ready ids per topic (non-empty queues only: Redis drops empty lists).
    pub ready: BTreeMap<String, u64>,
    /// Ids parked on the malformed list.
    pub malformed: u64,
    /// Jobs reserved by workers and not yet acked.
    pub reserved: u64,
    /// Of those, how many are past their deadline (the server has yet to
    /// put them back).
    pub reserved_overdue: u64,
    /// Dead letters per topic (non-empty lists only).
    pub dead: BTreeMap<String, u64>,
}

impl Stats {
    /// How far the oldest due job is past its due time: how far behind the
    /// servers are (0 when nothing is due).
    pub fn behind(&self) -> f64 {
        self.next_due.map(|due| (self.now - due).max(0.0)).unwrap_or(0.0)
    }

    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "now": self.now,
            "pool_size": self.pool_size,
            "next_due": self.next_due,
            "behind_seconds": self.behind(),
            "ready": self.ready,
            "malformed": self.malformed,
            "reserved": self.reserved,
            "reserved_overdue": self.reserved_overdue,
            "dead": self.dead,
        })
    }

    pub fn to_text(&self) -> String {
        let mut out = format!("pool            {} job(s) waiting\n", self.pool_size);
        match self.next_due {
            None => out.push_str("next due        -\n"),
            Some(due) if due > self.now => {
                out.push_str(&format!("next due        {} (in {:.3} s)\n", rfc3339(due), due - self.now))
            }
            Some(due) => out.push_str(&format!("next due        {} (due now)\n", rfc3339(due))),
        }
        out.push_str(&format!("behind          {:.3} s\n", self.behind()));
        out.push_str(&format!("malformed       {}\n", self.malformed));
        out.push_str(&format!("reserved        {} ({} past deadline)\n", self.reserved, self.reserved_overdue));
        for (title, lists) in [("ready queues", &self.ready), ("dead letters", &self.dead)] {
            out.push_str(title);
            out.push('\n');
            if lists.is_empty() {
                out.push_str("  (none)\n");
            }
            for (topic, n) in lists {
                out.push_str(&format!("  {topic:<30} {n}\n"));
            }
        }
        out
    }
}

/// One job waiting in a ready queue.
#[derive(Debug, Clone, PartialEq)]
pub struct Peeked {
    pub id: String,
    /// None when the bucket is gone (pop will skip the id).
    pub body: Option<Vec<u8>>,
    /// Time left before the bucket expires.
    pub ttl: Option<Duration>,
}

/// Connects once, with the server's settings.
pub fn connect(settings: &RedisSettings) -> Result<Connection, String> {
    let client = settings.client().map_err(|e| format!("bad redis settings: {e}"))?;
    client
        .get_connection_with_timeout(delayer::connection::DEFAULT_CONNECT_TIMEOUT)
        .map_err(|e| format!("cannot reach redis at {}: {e}", settings.describe()))
}

fn redis_now(conn: &mut Connection) -> redis::RedisResult<f64> {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(conn)?;
    Ok(secs as f64 + micros as f64 / 1e6)
}

/// Reads the queue's counters.
pub fn stats(conn: &mut Connection, keys: &Keys) -> redis::RedisResult<Stats> {
    let now = redis_now(conn)?;
    let pool_size: u64 = conn.zcard(keys.job_pool())?;
    let first: Vec<(String, f64)> = conn.zrange_withscores(keys.job_pool(), 0, 0)?;
    let malformed: u64 = conn.llen(keys.malformed())?;
    let reserved: u64 = conn.zcard(keys.reserved())?;
    let reserved_overdue: u64 = conn.zcount(keys.reserved(), "-inf", now)?;
    let ready = list_lengths(conn, &keys.ready_queue_pattern(), &keys.ready_queue_prefix())?;
    let dead = list_lengths(conn, &keys.dead_pattern(), &keys.dead_prefix())?;
    Ok(Stats {
        now,
        pool_size,
        next_due: first.first().map(|(_, s)| *s),
        ready,
        malformed,
        reserved,
        reserved_overdue,
        dead,
    })
}

/// The length of every list matching `pattern`, by name without `prefix`.
fn list_lengths(conn: &mut Connection, pattern: &str, prefix: &str) -> redis::RedisResult<BTreeMap<String, u64>> {
    let mut lists: Vec<String> = conn.scan_match::<_, String>(pattern)?.collect::<redis::RedisResult<_>>()?;
    lists.sort();
    lists.dedup(); // SCAN may return a key twice
    let mut pipe = redis::pipe();
    for l in &lists {
        pipe.llen(l);
    }
    let lengths: Vec<u64> = if lists.is_empty() { Vec::new() } else { pipe.query(conn)? };
    Ok(lists.iter().zip(lengths).map(|(l, n)| (l.strip_prefix(prefix).unwrap_or(l).to_string(), n)).collect())
}

pub fn dead_json(letters: &[delayer::DeadLetter]) -> serde_json::Value {
    let items: Vec<_> = letters
        .iter()
        .map(|d| {
            json!({
                "id": d.id,
                "topic": d.topic,
                "body": String::from_utf8_lossy(&d.body),
                "attempts": d.attempts,
                "reason": d.reason,
                "dead_at": unix(d.dead_at),
            })
        })
        .collect();
    json!(items)
}

pub fn dead_text(topic: &str, letters: &[delayer::DeadLetter]) -> String {
    if letters.is_empty() {
        return format!("no dead letters for topic {topic:?}\n");
    }
    let mut out = String::new();
    for d in letters {
        out.push_str(&format!(
            "{}  {}  attempts={} died {}  {}\n",
            d.id,
            d.reason,
            d.attempts,
            rfc3339(unix(d.dead_at)),
            preview(&d.body)
        ));
    }
    out
}

fn unix(t: std::time::SystemTime) -> f64 {
    t.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// The next `count` jobs a consumer of `topic` would pop, first first.
pub fn peek(conn: &mut Connection, keys: &Keys, topic: &str, count: usize) -> redis::RedisResult<Vec<Peeked>> {
    if count == 0 {
        return Ok(Vec::new());
    }
    // Consumers RPOP: the right end of the list comes first.
    let mut ids: Vec<String> = conn.lrange(keys.ready_queue(topic), -(count as isize), -1)?;
    ids.reverse();
    let mut pipe = redis::pipe();
    for id in &ids {
        pipe.hget(keys.job_bucket(id), "body").pttl(keys.job_bucket(id));
    }
    let replies: Vec<(Option<Vec<u8>>, i64)> = if ids.is_empty() { Vec::new() } else { pipe.query(conn)? };
    Ok(ids
        .into_iter()
        .zip(replies)
        .map(|(id, (body, pttl))| Peeked { id, body, ttl: (pttl >= 0).then(|| Duration::from_millis(pttl as u64)) })
        .collect())
}

pub fn peek_json(jobs: &[Peeked]) -> serde_json::Value {
    let items: Vec<_> = jobs
        .iter()
        .map(|j| {
            json!({
                "id": j.id,
                "body": j.body.as_ref().map(|b| String::from_utf8_lossy(b).into_owned()),
                "ttl_seconds": j.ttl.map(|t| t.as_secs_f64()),
            })
        })
        .collect();
    json!(items)
}

pub fn peek_text(topic: &str, jobs: &[Peeked]) -> String {
    if jobs.is_empty() {
        return format!("ready queue {topic:?} is empty\n");
    }
    let mut out = String::new();
    for (n, j) in jobs.iter().enumerate() {
        let body = match &j.body {
            None => "(bucket gone: pop will skip it)".to_string(),
            Some(b) => preview(b),
        };
        out.push_str(&format!("{:>3}. {}  {}\n", n + 1, j.id, body));
    }
    out
}

/// A one-line look at a body: text up to 80 characters, or its size.
fn preview(body: &[u8]) -> String {
    match std::str::from_utf8(body) {
        Ok(text) if !text.chars().any(char::is_control) => {
            let cut: String = text.chars().take(80).collect();
            if cut.len() < text.len() {
                format!("{cut:?}… ({} bytes)", text.len())
            } else {
                format!("{cut:?}")
            }
        }
        _ => format!("<{} bytes of binary>", body.len()),
    }
}

fn rfc3339(unix: f64) -> String {
    let t = std::time::UNIX_EPOCH + Duration::from_millis((unix.max(0.0) * 1000.0) as u64);
    humantime::format_rfc3339_millis(t).to_string()
}
