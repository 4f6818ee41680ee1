//! Read-only views of the queue for operators: `delayer stats`, `delayer
//! peek` and `delayer dead list`, read from Redis and written for people
//! (durations in human units) or for programs (JSON, bodies byte for byte).
//! They never write to Redis. (Re-queueing and purging dead letters go
//! through the SDK, which owns those scripts.)

use crate::jobview::{human, human_seconds, rfc3339, unix};
use delayer_protocol::connection::{Batch, Conn};
use delayer_protocol::keys::Names;
use delayer_protocol::{eviction, numbers};
use redis::Commands;
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
    /// Ready ids per topic (non-empty queues of known topics only).
    pub ready: BTreeMap<String, u64>,
    /// Ids parked on the malformed list.
    pub malformed: u64,
    /// Jobs reserved by workers and not yet acked.
    pub reserved: u64,
    /// Of those, how many are past their deadline (the server has yet to
    /// put them back).
    pub reserved_overdue: u64,
    /// Dead letters per topic (non-empty lists of known topics only).
    pub dead: BTreeMap<String, u64>,
    /// Redis's maxmemory-policy (`None` when it cannot be read).
    pub maxmemory_policy: Option<String>,
    /// Keys read here that hold the wrong type: (key, type, expected).
    pub bad_keys: Vec<(String, String, String)>,
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
            "redis": crate::eviction::json(self.maxmemory_policy.as_deref()),
            "bad_keys": self.bad_keys.iter().map(|(key, kind, expected)| {
                json!({"key": key, "type": kind, "expected": expected})
            }).collect::<Vec<_>>(),
        })
    }

    /// The totals for people; the per-topic table follows it (JSON keeps
    /// `ready` and `dead` per topic beside `topics`, for its readers).
    pub fn to_text(&self) -> String {
        let mut out = format!("pool            {} job(s) waiting\n", self.pool_size);
        match self.next_due {
            None => out.push_str("next due        -\n"),
            Some(due) if due > self.now => {
                out.push_str(&format!("next due        {} (in {})\n", rfc3339(due), human_seconds(due - self.now)))
            }
            Some(due) => out.push_str(&format!("next due        {} (due now)\n", rfc3339(due))),
        }
        out.push_str(&format!("behind          {}\n", human_seconds(self.behind())));
        out.push_str(&format!("malformed       {}\n", self.malformed));
        out.push_str(&format!("reserved        {} ({} past deadline)\n", self.reserved, self.reserved_overdue));
        out.push_str(&match self.maxmemory_policy.as_deref() {
            Some(policy) if eviction::is_safe(policy) => format!("eviction        none (maxmemory-policy {policy})\n"),
            Some(policy) => format!("eviction        UNSAFE: {}\n", eviction::warning(policy)),
            None => "eviction        unknown (maxmemory-policy cannot be read)\n".to_string(),
        });
        // The per-topic ready and dead counts are the topics table's
        // (`jobview::topics_text`), printed once there.
        if !self.bad_keys.is_empty() {
            out.push_str("keys of the wrong type (what needs them waits, nothing is lost; delete or fix them)\n");
            for (key, kind, expected) in &self.bad_keys {
                out.push_str(&format!("  {key:<30} {kind}, not {expected}\n"));
            }
        }
        out
    }
}

/// One job waiting in a ready queue.
#[derive(Debug, Clone, PartialEq)]
pub struct Peeked {
    /// As Redis holds it: any bytes (JSON shows one that is not UTF-8 as `id_base64`).
    pub id: Vec<u8>,
    /// None when the bucket is gone (pop will skip the id).
    pub body: Option<Vec<u8>>,
    /// Time left before the bucket expires.
    pub ttl: Option<Duration>,
}

fn redis_now(conn: &mut Conn) -> redis::RedisResult<f64> {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(conn)?;
    Ok(secs as f64 + micros as f64 / 1e6)
}

/// A pool's earliest score, read within 1970..9999 (`delayer_protocol::numbers`):
/// `-inf` is due now, `inf` the end of 9999.
fn first_due<Id>(head: &[(Id, f64)]) -> Option<f64> {
    head.first().and_then(|(_, score)| numbers::time_secs(*score).value).map(numbers::Time::secs)
}

/// Reads the queue's counters; the per-topic ones come from `topics`
/// (stats.lua through the SDK: no SCAN of the keyspace, however large).
/// In the per-topic layout each topic's keys are read (one pipeline).
pub fn stats(conn: &mut Conn, names: &Names, topics: &delayer::inspect::Stats) -> redis::RedisResult<Stats> {
    let now = redis_now(conn)?;
    // The reserved sets are scored in ms.
    let overdue_ms = (now * 1000.0).floor();
    let (pool_size, next_due, malformed, reserved, reserved_overdue) = match names {
        Names::Classic(keys) => {
            // Ids as bytes: one that is not UTF-8 may head the pool.
            let first: Vec<(Vec<u8>, f64)> = readable(conn.zrange_withscores(keys.job_pool(), 0, 0))?;
            (
                readable(conn.zcard(keys.job_pool()))?,
                first_due(&first),
                readable(conn.llen(keys.malformed()))?,
                readable(conn.zcard(keys.reserved()))?,
                readable(conn.zcount(keys.reserved(), "-inf", overdue_ms))?,
            )
        }
        Names::Topic(_) => {
            // Each topic's keys are in its own slot: a Batch, not one node's pipeline.
            let mut pipe = Batch::new();
            for t in &topics.topics {
                let t = &t.topic;
                pipe.add(redis::Cmd::zrange_withscores(names.pool(t), 0, 0)).add(redis::Cmd::llen(names.malformed(t)));
                pipe.add(redis::Cmd::zcount(names.reserved(t), "-inf", overdue_ms));
            }
            let answers: Vec<redis::RedisResult<redis::Value>> = pipe.query_each(conn)?;
            let mut answers = answers.into_iter().map(|a| readable(a.and_then(|v| Ok(redis::from_redis_value(v)?))));
            // Per topic: its pool's head, its malformed ids, its reservations past their deadline.
            let mut per_topic: Vec<TopicNumbers> = Vec::new();
            while let (Some(first), Some(m), Some(o)) = (answers.next(), answers.next(), answers.next()) {
                let number = |v: redis::RedisResult<redis::Value>| -> redis::RedisResult<u64> {
                    Ok(redis::from_redis_value(v?)?)
                };
                let first: Vec<(Vec<u8>, f64)> = match first? {
                    redis::Value::Nil => Vec::new(),
                    v => redis::from_redis_value(v)?,
                };
                per_topic.push((first, number(m).unwrap_or(0), number(o).unwrap_or(0)));
            }
            // A paused topic's due jobs wait on purpose: they do not make
            // the server look behind (the classic layout sets them aside).
            let next_due = per_topic
                .iter()
                .zip(&topics.topics)
                .filter(|(_, t)| !t.paused)
                .filter_map(|((first, _, _), _)| first_due(first))
                .reduce(f64::min);
            (
                topics.scheduled_total,
                next_due,
                per_topic.iter().map(|(_, m, _)| m).sum(),
                topics.reserved_total,
                per_topic.iter().map(|(_, _, o)| o).sum(),
            )
        }
    };
    let non_zero = |n: fn(&delayer::inspect::TopicStats) -> u64| -> BTreeMap<String, u64> {
        topics.topics.iter().filter(|t| n(t) > 0).map(|t| (t.topic.clone(), n(t))).collect()
    };
    let (ready, dead) = (non_zero(|t| t.ready), non_zero(|t| t.dead));
    let bad_keys = bad_keys(conn, names, topics)?;
    let maxmemory_policy = eviction::read(conn).ok();
    Ok(Stats {
        now,
        pool_size,
        next_due,
        ready,
        malformed,
        reserved,
        reserved_overdue,
        dead,
        maxmemory_policy,
        bad_keys,
    })
}

/// A topic's pool head, malformed count and overdue reservations.
type TopicNumbers = (Vec<(Vec<u8>, f64)>, u64, u64);

/// A read of a key of the wrong type reads as nothing (the key is named in
/// `bad_keys`): stats still gives every other number.
fn readable<T: Default>(read: redis::RedisResult<T>) -> redis::RedisResult<T> {
    match read {
        Err(e) if e.code() == Some("WRONGTYPE") => Ok(T::default()),
        other => other,
    }
}

/// The keys stats reads (the shared ones, and each known topic's) whose
/// type is wrong: one TYPE each, in one round trip. The movers hold or skip
/// what needs such a key and name it in their log; this names it too.
fn bad_keys(
    conn: &mut Conn,
    names: &Names,
    topics: &delayer::inspect::Stats,
) -> redis::RedisResult<Vec<(String, String, String)>> {
    let mut shapes: Vec<(String, &str)> = Vec::new();
    match names {
        Names::Classic(keys) => {
            shapes.extend([
                (keys.job_pool(), "zset"),
                (keys.malformed(), "list"),
                (keys.reserved(), "zset"),
                (keys.topics(), "set"),
                (keys.scheduled_count(), "hash"),
                (keys.receipt_seq(), "string"),
            ]);
            for t in &topics.topics {
                shapes.extend([(keys.ready_queue(&t.topic), "list"), (keys.dead(&t.topic), "list")]);
            }
        }
        Names::Topic(keys) => {
            shapes.extend([(keys.due(), "zset"), (keys.topics(), "set")]);
            for t in &topics.topics {
                let t = &t.topic;
                shapes.extend([
                    (keys.pool(t), "zset"),
                    (keys.ready(t), "list"),
                    (keys.reserved(t), "zset"),
                    (keys.dead(t), "list"),
                    (keys.malformed(t), "list"),
                    (keys.receipt_seq(t), "string"),
                ]);
            }
        }
    }
    let mut read = Batch::new();
    for (key, _) in &shapes {
        read.add(redis::cmd("TYPE").arg(key).clone());
    }
    let kinds: Vec<String> = read.query(conn)?;
    Ok(shapes
        .into_iter()
        .zip(kinds)
        .filter(|((_, want), kind)| kind != want && kind != "none")
        .map(|((key, want), kind)| (key, kind, want.to_string()))
        .collect())
}

pub fn dead_json(letters: &[delayer::DeadLetter]) -> serde_json::Value {
    let items: Vec<_> = letters
        .iter()
        .map(|d| {
            let mut item = json!({
                "attempts": d.attempts,
                "reason": d.reason,
                "dead_at": unix(d.dead_at),
                "last_error": d.last_error,
            });
            if let serde_json::Value::Object(obj) = &mut item {
                crate::jobview::put_name(obj, "id", d.id_bytes());
                crate::jobview::put_name(obj, "topic", d.raw_topic.as_deref().unwrap_or(d.topic.as_bytes()));
            }
            add_body(&mut item, Some(&d.body));
            item
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
        let ago = d.dead_at.elapsed().map(|ago| format!(" ({} ago)", human(ago))).unwrap_or_default();
        out.push_str(&format!(
            "{}  {}  attempts={} died {}{ago}  {}\n",
            d.id,
            d.reason,
            d.attempts,
            rfc3339(unix(d.dead_at)),
            preview(&d.body)
        ));
        // Why it died, on a line of its own: a worker's error may be long.
        if let Some(error) = &d.last_error {
            out.push_str(&format!("    last error: {}\n", error.escape_debug()));
        }
    }
    out
}

/// The next `count` jobs a consumer of `topic` would pop, first first.
pub fn peek(conn: &mut Conn, names: &Names, topic: &str, count: usize) -> redis::RedisResult<Vec<Peeked>> {
    if count == 0 {
        return Ok(Vec::new());
    }
    // Consumers RPOP: the right end of the list comes first.
    let mut ids: Vec<Vec<u8>> = conn.lrange(names.ready(topic), -(count as isize), -1)?;
    ids.reverse();
    let mut pipe = Batch::new();
    for id in &ids {
        let bucket = names.bucket_bytes(topic, id);
        pipe.add(redis::Cmd::hget(&bucket, "body")).add(redis::Cmd::pttl(&bucket));
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
            let mut item = json!({ "ttl_seconds": j.ttl.map(|t| t.as_secs_f64()) });
            if let serde_json::Value::Object(obj) = &mut item {
                crate::jobview::put_name(obj, "id", &j.id);
            }
            add_body(&mut item, j.body.as_deref());
            item
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
        let expires = j.ttl.map(|t| format!("  (expires in {})", human(t))).unwrap_or_default();
        out.push_str(&format!("{:>3}. {}  {}{expires}\n", n + 1, String::from_utf8_lossy(&j.id), body));
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

/// A body in JSON, byte for byte: `body` when it is UTF-8 text,
/// `body_base64` (standard alphabet, padded) when it is not; `body: null`
/// when there is none.
pub(crate) fn add_body(item: &mut serde_json::Value, body: Option<&[u8]>) {
    let (key, value) = match body.map(std::str::from_utf8) {
        None => ("body", serde_json::Value::Null),
        Some(Ok(text)) => ("body", json!(text)),
        Some(Err(_)) => ("body_base64", json!(base64(body.unwrap_or_default()))),
    };
    item[key] = value;
}

/// Standard base64 (RFC 4648, with padding).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_the_standard_alphabet_with_padding() {
        let cases: [(&[u8], &str); 7] = [
            (b"", ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (b"foobar", "Zm9vYmFy"),
            (&[0xff, 0x00, b'a', 0xc3], "/wBhww=="),
            (&[0xfb, 0xff], "+/8="),
        ];
        for (bytes, encoded) in cases {
            assert_eq!(base64(bytes), encoded, "{bytes:?}");
        }
    }

    #[test]
    fn bodies_are_kept_byte_for_byte_in_json() {
        let body = |b: Option<&[u8]>| {
            let mut item = json!({"id": "x"});
            add_body(&mut item, b);
            item
        };
        assert_eq!(body(Some("héllo".as_bytes())), json!({"id": "x", "body": "héllo"}));
        assert_eq!(body(Some(&[0xc3])), json!({"id": "x", "body_base64": "ww=="}));
        assert_eq!(body(None), json!({"id": "x", "body": null}));
    }
}
