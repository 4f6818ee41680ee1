//! Seeing every job: where one job is ([`Delayer::job`]), pages of a
//! topic's scheduled, ready and reserved jobs, and per-topic numbers
//! ([`Delayer::stats`]).
//!
//! It exists so that "was order 42's auto-close scheduled, and when does it
//! fire?" needs no redis-cli and no knowledge of the keys. Everything here
//! only reads: `lookup.lua`, `list.lua` and `stats.lua` (see their headers
//! and docs/PROTOCOL.md, "Inspecting jobs"), and one `LRANGE` for the ready
//! listing. Requests are built and replies read here, without I/O, and the
//! blocking and async clients only send them.

use crate::connection::Batch;
use crate::error::{Error, Result};
use crate::keys::{Keys, Names};
use crate::ops::Request;
use crate::validate;
use crate::Delayer;
use redis::{Script, ScriptInvocation, Value};
use std::sync::LazyLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `lookup.lua`: KEYS bucket, pool, reserved; ARGV id, topic or "".
pub static LOOKUP: LazyLock<Script> = LazyLock::new(|| Script::new(LOOKUP_SRC));
/// `list.lua`: KEYS a ZSET (pool or reserved); ARGV bucket prefix, topic,
/// start rank, count, most entries examined.
pub static LIST: LazyLock<Script> = LazyLock::new(|| Script::new(LIST_SRC));
/// `stats.lua`: KEYS topics, scheduled_count, pool, reserved; ARGV ready
/// prefix, dead prefix, bucket prefix, cap on reserved ids read.
pub static STATS: LazyLock<Script> = LazyLock::new(|| Script::new(STATS_SRC));
/// Source of `lua/lookup.lua`.
pub const LOOKUP_SRC: &str = include_str!("../lua/lookup.lua");
/// Source of `lua/list.lua`.
pub const LIST_SRC: &str = include_str!("../lua/list.lua");
/// Source of `lua/stats.lua`.
pub const STATS_SRC: &str = include_str!("../lua/stats.lua");

/// The most entries one listing page holds.
pub const MAX_PAGE: usize = 1000;
/// Entries list.lua examines per call: bounds each call's time in Redis.
const EXAMINE_PER_CALL: usize = 1000;
/// Calls one page may take before it is handed back short (with a cursor to
/// go on from), so a page of a rare topic in a huge pool stays bounded.
const CALLS_PER_PAGE: usize = 10;
/// Per-topic reserved counts are read while the reserved set is no larger.
pub const RESERVED_CAP: usize = 1000;

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobState {
    /// Waiting in the pool for its due time.
    Scheduled,
    /// Due, in its topic's ready queue.
    Ready,
    /// Held by a worker until its deadline.
    Reserved,
    /// In its topic's dead-letter list.
    Dead,
    /// Its data has no topic, or is not a hash: an operator should look.
    Malformed,
    /// No such job (never pushed, done, removed or expired), or a job of
    /// another topic.
    Unknown,
}

impl JobState {
    /// The protocol's name: `scheduled`, `ready`, `reserved`, `dead`,
    /// `malformed` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Scheduled => "scheduled",
            JobState::Ready => "ready",
            JobState::Reserved => "reserved",
            JobState::Dead => "dead",
            JobState::Malformed => "malformed",
            JobState::Unknown => "unknown",
        }
    }

    fn parse(s: &str) -> Result<JobState> {
        Ok(match s {
            "scheduled" => JobState::Scheduled,
            "ready" => JobState::Ready,
            "reserved" => JobState::Reserved,
            "dead" => JobState::Dead,
            "malformed" => JobState::Malformed,
            "unknown" => JobState::Unknown,
            other => return Err(Error::Protocol(format!("lookup: unknown state {other:?}"))),
        })
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What [`Delayer::job`] found. Fields that do not apply to the state (or
/// are not known) are `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct JobInfo {
    /// The id looked up.
    pub id: String,
    /// Where the job is.
    pub state: JobState,
    /// Its topic.
    pub topic: Option<String>,
    /// Its body's length in bytes.
    pub body_size: Option<u64>,
    /// Reservations so far.
    pub attempts: Option<u64>,
    /// Reservations allowed (0: no limit), when set.
    pub max_attempts: Option<u64>,
    /// Scheduled: when it is due.
    pub due: Option<SystemTime>,
    /// Reserved: the reservation's deadline.
    pub deadline: Option<SystemTime>,
    /// Dead: when it died.
    pub dead_at: Option<SystemTime>,
    /// Dead: `buried` or `max_attempts`.
    pub dead_reason: Option<String>,
    /// The last failed attempt's error, when a worker gave one (or "ttr
    /// expired").
    pub last_error: Option<String>,
}

/// A scheduled or reserved job in a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    /// The job's id.
    pub id: String,
    /// Scheduled: its due time; reserved: its deadline.
    pub time: SystemTime,
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    /// The entries, in listing order.
    pub items: Vec<T>,
    /// The cursor of the next page, `None` at the end. A page may be
    /// shorter than asked (even empty) while `next` is `Some`: keep going.
    pub next: Option<u64>,
}

/// One topic's numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicStats {
    /// The topic.
    pub topic: String,
    /// Jobs waiting in the pool (exact for Delayer 2 writers; see
    /// docs/PROTOCOL.md on 1.x writers).
    pub scheduled: u64,
    /// Ids in its ready queue.
    pub ready: u64,
    /// Jobs reserved by workers; `None` when the reserved set was too large
    /// to read ([`RESERVED_CAP`]).
    pub reserved: Option<u64>,
    /// Dead letters.
    pub dead: u64,
}

/// Per-topic numbers, and totals that count every job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stats {
    /// Jobs in the pool, whoever pushed them.
    pub scheduled_total: u64,
    /// Jobs reserved.
    pub reserved_total: u64,
    /// Each known topic, sorted by name.
    pub topics: Vec<TopicStats>,
}

/// lookup.lua for job `id` of `topic`.
pub(crate) fn lookup(names: &Names, topic: &str, id: &str) -> Result<ScriptInvocation<'static>> {
    crate::ops::check_topic(names, topic)?;
    validate::name("id", id)?;
    let mut inv = LOOKUP.prepare_invoke();
    inv.key(names.bucket(topic, id)).key(names.pool(topic)).key(names.reserved(topic)).arg(id).arg(topic);
    Ok(inv)
}

/// lookup.lua's `{state, topic, body_size, attempts, max_attempts, time,
/// dead_reason, last_error}`.
pub(crate) fn parse_lookup(id: &str, reply: Value) -> Result<JobInfo> {
    let parts = match reply {
        Value::Array(parts) if parts.len() == 8 => parts,
        other => return Err(Error::Protocol(format!("lookup: expected 8 fields, got {other:?}"))),
    };
    let mut f = parts.into_iter().map(opt_text);
    let mut next = || f.next().unwrap_or(Ok(None));
    let state = JobState::parse(&next()?.unwrap_or_default())?;
    let topic = next()?;
    let body_size = number(next()?)?;
    let attempts = number(next()?)?;
    let max_attempts = number(next()?)?;
    let time = next()?.map(|t| seconds(&t)).transpose()?;
    let dead_reason = next()?;
    let last_error = next()?;
    Ok(JobInfo {
        id: id.to_string(),
        state,
        topic,
        body_size,
        attempts,
        max_attempts,
        due: time.filter(|_| state == JobState::Scheduled),
        deadline: time.filter(|_| state == JobState::Reserved),
        dead_at: time.filter(|_| state == JobState::Dead),
        dead_reason,
        last_error,
    })
}

/// Which ZSET a listing walks.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Walked {
    Pool,
    Reserved,
}

/// A page of list.lua calls: [`ListScan::request`] what to send, then
/// [`ListScan::feed`] each reply until it gives the page.
pub(crate) struct ListScan {
    zset: String,
    /// The reserved set: scores in ms, which list.lua is asked to answer in seconds.
    in_ms: bool,
    bucket_prefix: String,
    topic: String,
    rank: u64,
    count: usize,
    calls: usize,
    items: Vec<Listed>,
}

impl ListScan {
    pub(crate) fn new(names: &Names, walked: Walked, topic: &str, cursor: u64, count: usize) -> Result<ListScan> {
        crate::ops::check_topic(names, topic)?;
        let count = page_count(count)?;
        let (zset, in_ms) = match walked {
            Walked::Pool => (names.pool(topic), false),
            Walked::Reserved => (names.reserved(topic), true),
        };
        let (bucket_prefix, topic) = (names.bucket_prefix(topic), topic.to_string());
        Ok(ListScan { zset, in_ms, bucket_prefix, topic, rank: cursor, count, calls: 0, items: Vec::new() })
    }

    pub(crate) fn request(&self) -> Request {
        let mut inv = LIST.prepare_invoke();
        inv.key(&self.zset).arg(&self.bucket_prefix).arg(&self.topic).arg(self.rank);
        inv.arg(self.count - self.items.len()).arg(EXAMINE_PER_CALL);
        if self.in_ms {
            inv.arg("reserved"); // its scores are ms; list.lua answers in seconds
        }
        Request::Script(inv)
    }

    /// One reply; `Some(page)` when the page is done.
    pub(crate) fn feed(&mut self, reply: Value) -> Result<Option<Page<Listed>>> {
        let Value::Array(parts) = reply else {
            return Err(Error::Protocol(format!("list: expected a list, got {reply:?}")));
        };
        if parts.len() % 2 == 0 {
            return Err(Error::Protocol(format!("list: expected next rank then pairs, got {} values", parts.len())));
        }
        let mut parts = parts.into_iter().map(opt_text);
        let next = parts.next().unwrap_or(Ok(None))?;
        while let (Some(id), Some(time)) = (parts.next(), parts.next()) {
            let (id, time) = (id?.unwrap_or_default(), time?.unwrap_or_default());
            self.items.push(Listed { id, time: seconds(&time)? });
        }
        self.calls += 1;
        let next = number(next)?;
        match next {
            Some(rank) if self.items.len() < self.count && self.calls < CALLS_PER_PAGE => {
                self.rank = rank;
                Ok(None)
            }
            next => Ok(Some(Page { items: std::mem::take(&mut self.items), next })),
        }
    }
}

/// The ready listing: `LRANGE` from the right end (next out first), `count`
/// ids from `cursor` ids in.
pub(crate) fn list_ready(names: &Names, topic: &str, cursor: u64, count: usize) -> Result<Request> {
    crate::ops::check_topic(names, topic)?;
    let count = page_count(count)? as i64;
    let from = i64::try_from(cursor).map_err(|_| Error::InvalidArgument(format!("cursor {cursor} is too large")))?;
    let mut batch = Batch::new();
    // One more than asked, to know whether a next page exists.
    batch.add(redis::cmd("LRANGE").arg(names.ready(topic)).arg(-from - count - 1).arg(-from - 1).clone());
    Ok(Request::Batch(batch))
}

/// The ready listing's reply (one pipeline of one LRANGE).
pub(crate) fn parse_ready(reply: Value, cursor: u64, count: usize) -> Result<Page<String>> {
    let ids = match reply {
        Value::Array(mut replies) if replies.len() == 1 => replies.remove(0),
        other => return Err(Error::Protocol(format!("ready listing: expected one reply, got {other:?}"))),
    };
    let Value::Array(ids) = ids else {
        return Err(Error::Protocol(format!("ready listing: expected a list of ids, got {ids:?}")));
    };
    let mut ids =
        ids.into_iter().rev().map(|v| opt_text(v).map(Option::unwrap_or_default)).collect::<Result<Vec<_>>>()?;
    let more = ids.len() > count;
    ids.truncate(count);
    let next = more.then(|| cursor + count as u64);
    Ok(Page { items: ids, next })
}

/// How the numbers are read: stats.lua in the classic layout; in the
/// per-topic layout the topics first ([`Counting::Topics`]), then their
/// keys' sizes, no script (PROTOCOL.md, "Operations in the per-topic layout").
pub(crate) enum Counting {
    Script(Request),
    Topics(Request),
}

/// The first request of a stats read.
pub(crate) fn counting(names: &Names) -> Counting {
    match names {
        Names::Classic(keys) => Counting::Script(stats(keys)),
        Names::Topic(index) => {
            let mut batch = Batch::new();
            batch.add(redis::cmd("SMEMBERS").arg(index.topics()).clone());
            Counting::Topics(Request::Batch(batch))
        }
    }
}

/// The per-topic layout's topics (the reply of [`Counting::Topics`]),
/// sorted, and the request reading their numbers.
pub(crate) fn topic_numbers(names: &Names, reply: Value) -> Result<(Vec<String>, Request)> {
    let bad = |v: &dyn std::fmt::Debug| Error::Protocol(format!("stats: expected the topics, got {v:?}"));
    let members = match reply {
        Value::Array(mut replies) if replies.len() == 1 => replies.remove(0),
        other => return Err(bad(&other)),
    };
    let Value::Array(members) = members else { return Err(bad(&members)) };
    let mut topics =
        members.into_iter().map(|m| opt_text(m).map(Option::unwrap_or_default)).collect::<Result<Vec<String>>>()?;
    topics.sort();
    let mut batch = Batch::new();
    for t in &topics {
        batch.add(redis::Cmd::zcard(names.pool(t))).add(redis::Cmd::llen(names.ready(t)));
        batch.add(redis::Cmd::zcard(names.reserved(t))).add(redis::Cmd::llen(names.dead(t)));
    }
    Ok((topics, Request::Batch(batch)))
}

/// The numbers of `topics` (the reply of [`topic_numbers`]'s request).
pub(crate) fn parse_topic_numbers(topics: Vec<String>, reply: Value) -> Result<Stats> {
    let bad = |v: &dyn std::fmt::Debug| Error::Protocol(format!("stats: unexpected reply {v:?}"));
    let values = match reply {
        Value::Array(values) if values.len() == topics.len() * 4 => values,
        other => return Err(bad(&other)),
    };
    let counts = values
        .into_iter()
        .map(|v| match v {
            Value::Int(n) if n >= 0 => Ok(n as u64),
            other => Err(bad(&other)),
        })
        .collect::<Result<Vec<u64>>>()?;
    let topics: Vec<TopicStats> = topics
        .into_iter()
        .zip(counts.chunks(4))
        .map(|(topic, n)| TopicStats { topic, scheduled: n[0], ready: n[1], reserved: Some(n[2]), dead: n[3] })
        .collect();
    Ok(Stats {
        scheduled_total: topics.iter().map(|t| t.scheduled).sum(),
        reserved_total: topics.iter().filter_map(|t| t.reserved).sum(),
        topics,
    })
}

/// stats.lua.
pub(crate) fn stats(keys: &Keys) -> Request {
    let mut inv = STATS.prepare_invoke();
    inv.key(keys.topics()).key(keys.scheduled_count()).key(keys.job_pool()).key(keys.reserved());
    inv.arg(keys.ready_queue_prefix()).arg(keys.dead_prefix()).arg(keys.bucket_prefix()).arg(RESERVED_CAP);
    Request::Script(inv)
}

/// stats.lua's `{pool_total, reserved_total, known, {topic, scheduled,
/// ready, reserved, dead}...}`.
pub fn parse_stats(reply: Value) -> Result<Stats> {
    let bad = |v: &dyn std::fmt::Debug| Error::Protocol(format!("stats: unexpected reply {v:?}"));
    let Value::Array(parts) = reply else { return Err(bad(&reply)) };
    let mut parts = parts.into_iter();
    let int = |v: Option<Value>| match v {
        Some(Value::Int(n)) if n >= 0 => Ok(n as u64),
        other => Err(bad(&other)),
    };
    let scheduled_total = int(parts.next())?;
    let reserved_total = int(parts.next())?;
    let known = int(parts.next())? == 1;
    let topics = parts
        .map(|entry| {
            let Value::Array(fields) = entry else { return Err(bad(&entry)) };
            let [topic, scheduled, ready, reserved, dead] = <[Value; 5]>::try_from(fields).map_err(|f| bad(&f))?;
            Ok(TopicStats {
                topic: opt_text(topic)?.unwrap_or_default(),
                scheduled: int(Some(scheduled))?,
                ready: int(Some(ready))?,
                reserved: Some(int(Some(reserved))?).filter(|_| known),
                dead: int(Some(dead))?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Stats { scheduled_total, reserved_total, topics })
}

fn page_count(count: usize) -> Result<usize> {
    if count == 0 || count > MAX_PAGE {
        return Err(Error::InvalidArgument(format!("listings take 1 to {MAX_PAGE} entries at a time, not {count}")));
    }
    Ok(count)
}

/// A string reply, `None` when empty ("" is the scripts' "not known").
fn opt_text(v: Value) -> Result<Option<String>> {
    let s = match v {
        Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
        Value::SimpleString(s) => s,
        Value::Int(n) => n.to_string(),
        Value::Nil => String::new(),
        other => return Err(Error::Protocol(format!("expected a string, got {other:?}"))),
    };
    Ok(Some(s).filter(|s| !s.is_empty()))
}

fn number(v: Option<String>) -> Result<Option<u64>> {
    v.map(|s| s.parse::<u64>().map_err(|_| Error::Protocol(format!("expected a count, got {s:?}")))).transpose()
}

/// Unix seconds as a score or `"s.mmm"`, to the millisecond.
fn seconds(s: &str) -> Result<SystemTime> {
    let bad = || Error::Protocol(format!("expected a time in Unix seconds, got {s:?}"));
    let secs: f64 = s.parse().map_err(|_| bad())?;
    if !secs.is_finite() || secs < 0.0 {
        return Err(bad());
    }
    Ok(UNIX_EPOCH + Duration::from_millis((secs * 1000.0).round() as u64))
}

impl Delayer {
    /// Where job `id` of `topic` is, and what it carries: scheduled (with its
    /// due time), ready, reserved (with its deadline), dead (with why and
    /// when), malformed or unknown. A job of another topic is unknown. Only
    /// reads.
    pub fn job(&self, topic: &str, id: &str) -> Result<JobInfo> {
        parse_lookup(id, self.call(&lookup(self.keys(), topic, id)?.into())?)
    }

    /// A page of `topic`'s scheduled jobs, earliest due first, from `cursor`
    /// (0 to start; then the page's `next`), at most `count` (1 to 1000).
    pub fn list_scheduled(&self, topic: &str, cursor: u64, count: usize) -> Result<Page<Listed>> {
        self.scan(ListScan::new(self.keys(), Walked::Pool, topic, cursor, count)?)
    }

    /// A page of `topic`'s reserved jobs, earliest deadline first (paged as
    /// [`Delayer::list_scheduled`]).
    pub fn list_reserved(&self, topic: &str, cursor: u64, count: usize) -> Result<Page<String>> {
        let page = self.scan(ListScan::new(self.keys(), Walked::Reserved, topic, cursor, count)?)?;
        Ok(Page { items: page.items.into_iter().map(|l| l.id).collect(), next: page.next })
    }

    /// A page of `topic`'s reserved jobs with their deadlines.
    pub fn list_reserved_with_deadlines(&self, topic: &str, cursor: u64, count: usize) -> Result<Page<Listed>> {
        self.scan(ListScan::new(self.keys(), Walked::Reserved, topic, cursor, count)?)
    }

    /// A page of the ids in `topic`'s ready queue, next out first.
    pub fn list_ready(&self, topic: &str, cursor: u64, count: usize) -> Result<Page<String>> {
        parse_ready(self.call(&list_ready(self.keys(), topic, cursor, count)?)?, cursor, count)
    }

    /// Scheduled, ready, reserved and dead jobs per topic. Cheap on any
    /// backlog: no scan of the pool.
    pub fn stats(&self) -> Result<Stats> {
        match counting(self.keys()) {
            Counting::Script(req) => parse_stats(self.call(&req)?),
            Counting::Topics(req) => {
                let (topics, req) = topic_numbers(self.keys(), self.call(&req)?)?;
                parse_topic_numbers(topics, self.call(&req)?)
            }
        }
    }

    fn scan(&self, mut scan: ListScan) -> Result<Page<Listed>> {
        loop {
            if let Some(page) = scan.feed(self.call(&scan.request())?)? {
                return Ok(page);
            }
        }
    }
}

#[cfg(feature = "aio")]
impl crate::aio::Delayer {
    /// As [`crate::Delayer::job`].
    pub async fn job(&self, topic: &str, id: &str) -> Result<JobInfo> {
        parse_lookup(id, self.call(&lookup(self.keys(), topic, id)?.into()).await?)
    }

    /// As [`crate::Delayer::list_scheduled`].
    pub async fn list_scheduled(&self, topic: &str, cursor: u64, count: usize) -> Result<Page<Listed>> {
        self.scan(ListScan::new(self.keys(), Walked::Pool, topic, cursor, count)?).await
    }

    /// As [`crate::Delayer::list_reserved`].
    pub async fn list_reserved(&self, topic: &str, cursor: u64, count: usize) -> Result<Page<String>> {
        let page = self.scan(ListScan::new(self.keys(), Walked::Reserved, topic, cursor, count)?).await?;
        Ok(Page { items: page.items.into_iter().map(|l| l.id).collect(), next: page.next })
    }

    /// As [`crate::Delayer::list_reserved_with_deadlines`].
    pub async fn list_reserved_with_deadlines(&self, topic: &str, cursor: u64, count: usize) -> Result<Page<Listed>> {
        self.scan(ListScan::new(self.keys(), Walked::Reserved, topic, cursor, count)?).await
    }

    /// As [`crate::Delayer::list_ready`].
    pub async fn list_ready(&self, topic: &str, cursor: u64, count: usize) -> Result<Page<String>> {
        parse_ready(self.call(&list_ready(self.keys(), topic, cursor, count)?).await?, cursor, count)
    }

    /// As [`crate::Delayer::stats`].
    pub async fn stats(&self) -> Result<Stats> {
        match counting(self.keys()) {
            Counting::Script(req) => parse_stats(self.call(&req).await?),
            Counting::Topics(req) => {
                let (topics, req) = topic_numbers(self.keys(), self.call(&req).await?)?;
                parse_topic_numbers(topics, self.call(&req).await?)
            }
        }
    }

    async fn scan(&self, mut scan: ListScan) -> Result<Page<Listed>> {
        loop {
            if let Some(page) = scan.feed(self.call(&scan.request()).await?)? {
                return Ok(page);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn lookup_reply_reads_each_state_time_into_its_field() {
        let reply = Value::Array(["reserved", "t", "5", "2", "", "1700000000.125", "", "Boom: x"].map(bulk).to_vec());
        let info = parse_lookup("42", reply).unwrap();
        assert_eq!(info.state, JobState::Reserved);
        assert_eq!(info.deadline, Some(UNIX_EPOCH + Duration::from_millis(1_700_000_000_125)));
        assert_eq!((info.due, info.dead_at, info.max_attempts), (None, None, None));
        assert_eq!(info.last_error.as_deref(), Some("Boom: x"));
        let bad = Value::Array(["weird", "", "", "", "", "", "", ""].map(bulk).to_vec());
        assert!(matches!(parse_lookup("42", bad), Err(Error::Protocol(_))));
    }

    #[test]
    fn a_scan_stops_at_the_end_or_when_full() {
        let keys = Names::Classic(Keys::default());
        let mut scan = ListScan::new(&keys, Walked::Pool, "t", 0, 2).unwrap();
        let first = Value::Array(vec![bulk("1000"), bulk("a"), bulk("1.5")]);
        assert_eq!(scan.feed(first).unwrap(), None);
        let page = scan.feed(Value::Array(vec![bulk(""), bulk("b"), bulk("2")])).unwrap().unwrap();
        assert_eq!(page.items.iter().map(|l| l.id.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(page.next, None);
        assert!(ListScan::new(&keys, Walked::Pool, "t", 0, 0).is_err());
        assert!(ListScan::new(&keys, Walked::Pool, "", 0, 1).is_err());
    }
}
