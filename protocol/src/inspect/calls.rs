//! The inspecting calls without I/O: what lookup.lua, list.lua, stats.lua
//! (or, in the per-topic layout, each topic's key sizes) are sent, and how
//! their replies read.

use super::*;
use crate::connection::Batch;
use crate::keys::{check_topic, Names};
use crate::op::{Request, Step};
use crate::replies::{self, number, opt_text, raw, seconds, split_name};
use crate::scripts;
use crate::validate::{self, id_of};

/// An inspecting operation.
pub type Op<'a, T> = crate::op::Op<'a, T, Error>;
use redis::Value;
use std::time::UNIX_EPOCH;

/// lookup.lua for job `id` of `topic`.
pub fn lookup(names: &Names, topic: &str, id: &[u8]) -> Result<Op<'static, JobInfo>> {
    check_topic(names, topic)?;
    let id = id_of(id)?.to_vec();
    let mut inv = scripts::LOOKUP.prepare_invoke();
    inv.key(names.bucket_bytes(topic, &id)).key(names.pool(topic)).key(names.reserved(topic)).key(names.flow(topic));
    inv.arg(&id).arg(topic);
    inv.arg(names.flow_pool_prefix());
    Ok(Op::call(inv, move |reply| parse_lookup(&id, reply)))
}

/// lookup.lua's `{state, topic, body_size, attempts, max_attempts, time,
/// dead_reason, last_error, traceparent, flow}`.
pub fn parse_lookup(id: &[u8], reply: Value) -> Result<JobInfo> {
    let mut parts = match reply {
        Value::Array(parts) if parts.len() == 10 => parts,
        other => return Err(Error::BadReply(format!("lookup: expected 10 fields, got {other:?}"))),
    };
    let flow = TopicFlow::parse(parts.pop().map(opt_text).transpose()?.flatten().as_deref().unwrap_or(""));
    let traceparent = parts.pop();
    let mut f = parts.into_iter().map(opt_text);
    let mut next = || f.next().unwrap_or(Ok(None));
    let state = JobState::parse(&next()?.unwrap_or_default())?;
    let topic = next()?;
    let body_size = number(next()?);
    let attempts = number(next()?);
    let max_attempts = number(next()?);
    let time = next()?.and_then(|t| seconds(&t));
    let dead_reason = next()?;
    let last_error = next()?;
    let (id, raw_id) = split_name(id.to_vec());
    let traceparent = replies::traceparent(&id, traceparent)?;
    Ok(JobInfo {
        raw_id,
        id,
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
        traceparent,
        flow,
    })
}

/// Which ZSET a listing walks.
#[derive(Debug, Clone, Copy)]
pub enum Walked {
    /// The pool: scheduled jobs by due time.
    Pool,
    /// The reserved set: reservations by deadline.
    Reserved,
}

/// A page of list.lua calls: `ListScan::request` what to send, then
/// `ListScan::feed` each reply until it gives the page.
pub struct ListScan {
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
    /// A page of `topic`'s `walked` set from `cursor`, of at most `count`.
    pub fn new(names: &Names, walked: Walked, topic: &str, cursor: u64, count: usize) -> Result<ListScan> {
        check_topic(names, topic)?;
        let count = page_count(count)?;
        let cursor = validate::position("cursor", cursor)?;
        let (zset, in_ms) = match walked {
            Walked::Pool => (names.pool(topic), false),
            Walked::Reserved => (names.reserved(topic), true),
        };
        let (bucket_prefix, topic) = (names.bucket_prefix(topic), topic.to_string());
        Ok(ListScan { zset, in_ms, bucket_prefix, topic, rank: cursor, count, calls: 0, items: Vec::new() })
    }

    /// The page: list.lua calls until it is full, the walk ends, or
    /// `CALLS_PER_PAGE` calls were made.
    pub fn op(mut self) -> Op<'static, Page<Listed>> {
        Op::new(move |reply| {
            if let Some(page) = reply.map(|reply| self.feed(reply)).transpose()?.flatten() {
                return Ok(Step::Done(page));
            }
            Ok(Step::Send(self.request()))
        })
    }

    fn request(&self) -> Request {
        let mut inv = scripts::LIST.prepare_invoke();
        inv.key(&self.zset).arg(&self.bucket_prefix).arg(&self.topic).arg(self.rank);
        inv.arg(self.count - self.items.len()).arg(EXAMINE_PER_CALL);
        if self.in_ms {
            inv.arg("reserved"); // its scores are ms; list.lua answers in seconds
        }
        Request::Script(inv)
    }

    /// One reply; `Some(page)` when the page is done.
    fn feed(&mut self, reply: Value) -> Result<Option<Page<Listed>>> {
        let Value::Array(parts) = reply else {
            return Err(Error::BadReply(format!("list: expected a list, got {reply:?}")));
        };
        if parts.len() % 2 == 0 {
            return Err(Error::BadReply(format!("list: expected next rank then pairs, got {} values", parts.len())));
        }
        let mut parts = parts.into_iter();
        let next = parts.next().map(opt_text).unwrap_or(Ok(None))?;
        while let (Some(id), Some(time)) = (parts.next(), parts.next()) {
            let ((id, raw_id), time) = (split_name(raw(id)?), opt_text(time)?.unwrap_or_default());
            // A score that is no time (list.lua formats deadlines) lists as
            // the epoch rather than failing the page.
            self.items.push(Listed { id, time: seconds(&time).unwrap_or(UNIX_EPOCH), raw_id });
        }
        self.calls += 1;
        let next = match next {
            Some(rank) => Some(rank.parse::<u64>().map_err(|_| Error::BadReply(format!("list: bad rank {rank:?}")))?),
            None => None,
        };
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
pub fn list_ready(names: &Names, topic: &str, cursor: u64, count: usize) -> Result<Op<'static, Page<Vec<u8>>>> {
    check_topic(names, topic)?;
    let count = page_count(count)? as i64;
    let from = validate::position("cursor", cursor)? as i64;
    let mut batch = Batch::new();
    // One more than asked, to know whether a next page exists.
    batch.add(redis::cmd("LRANGE").arg(names.ready(topic)).arg(-from - count - 1).arg(-from - 1).clone());
    Ok(Op::call(Request::Batch(batch), move |reply| parse_ready(reply, cursor, count as usize)))
}

/// The ready listing's reply (one pipeline of one LRANGE).
fn parse_ready(reply: Value, cursor: u64, count: usize) -> Result<Page<Vec<u8>>> {
    let ids = match reply {
        Value::Array(mut replies) if replies.len() == 1 => replies.remove(0),
        other => return Err(Error::BadReply(format!("ready listing: expected one reply, got {other:?}"))),
    };
    let Value::Array(ids) = ids else {
        return Err(Error::BadReply(format!("ready listing: expected a list of ids, got {ids:?}")));
    };
    let mut ids = ids.into_iter().rev().map(raw).collect::<Result<Vec<_>>>()?;
    let more = ids.len() > count;
    ids.truncate(count);
    let next = more.then(|| cursor + count as u64);
    Ok(Page { items: ids, next })
}

/// A job's body, read when it is at most `limit` bytes: the bucket's topic,
/// the body's length, then (a second call, `body_read`) the body.
pub fn body<'a>(names: &Names, topic: &'a str, id: &[u8], limit: usize) -> Result<Op<'a, Body>> {
    check_topic(names, topic)?;
    let bucket = names.bucket_bytes(topic, id_of(id)?);
    let mut batch = Batch::new();
    batch.add(redis::cmd("HGET").arg(&bucket).arg("topic").clone());
    batch.add(redis::cmd("HSTRLEN").arg(&bucket).arg("body").clone());
    Ok(Op::call(Request::Batch(batch), move |reply| Ok(parse_body_size(topic, reply))).then(move |size| {
        Ok(match size {
            None => Op::done(Body::Absent),
            Some(size) if size > limit as u64 => Op::done(Body::TooLarge(size)),
            Some(_) => Op::call(body_read(bucket), move |reply| Ok(parse_body(topic, limit, reply))),
        })
    }))
}

/// [`body_size`]'s reply: the body's length when the bucket is `topic`'s
/// (in the classic layout an id is global: another topic's job is not this
/// one's); `None` otherwise, or when the key is not a hash.
fn parse_body_size(topic: &str, reply: Value) -> Option<u64> {
    let Value::Array(parts) = reply else { return None };
    let mut parts = parts.into_iter();
    let owner = raw(parts.next()?).ok()?;
    let size = match parts.next()? {
        Value::Int(n) => u64::try_from(n).ok()?,
        _ => return None,
    };
    (owner == topic.as_bytes()).then_some(size)
}

/// The body itself, with the topic again (the job may have been replaced
/// meanwhile by another topic's).
fn body_read(bucket: Vec<u8>) -> Request {
    let mut batch = Batch::new();
    batch.add(redis::cmd("HMGET").arg(bucket).arg("topic").arg("body").clone());
    Request::Batch(batch)
}

/// `body_read`'s reply: the body when the bucket is still `topic`'s and
/// the body still at most `limit` bytes.
fn parse_body(topic: &str, limit: usize, reply: Value) -> Body {
    let fields = match reply {
        Value::Array(mut replies) if replies.len() == 1 => replies.remove(0),
        _ => return Body::Absent,
    };
    let Value::Array(fields) = fields else { return Body::Absent };
    let mut fields = fields.into_iter().map(|v| raw(v).ok());
    match (fields.next().flatten(), fields.next().flatten()) {
        (Some(owner), Some(body)) if owner == topic.as_bytes() && body.len() <= limit => Body::Bytes(body),
        (Some(owner), Some(body)) if owner == topic.as_bytes() => Body::TooLarge(body.len() as u64),
        _ => Body::Absent,
    }
}

/// LLEN of `topic`'s dead-letter list.
pub fn dead_len(names: &Names, topic: &str) -> Result<Op<'static, u64>> {
    check_topic(names, topic)?;
    let mut batch = Batch::new();
    batch.add(redis::cmd("LLEN").arg(names.dead(topic)).clone());
    Ok(Op::call(Request::Batch(batch), parse_len))
}

/// [`dead_len`]'s reply.
fn parse_len(reply: Value) -> Result<u64> {
    match reply {
        Value::Array(replies) => match replies.as_slice() {
            [Value::Int(n)] => Ok(u64::try_from(*n).unwrap_or(0)),
            other => Err(Error::BadReply(format!("dead-letter length: expected a number, got {other:?}"))),
        },
        other => Err(Error::BadReply(format!("dead-letter length: expected one reply, got {other:?}"))),
    }
}

fn page_count(count: usize) -> Result<usize> {
    if count == 0 || count > MAX_PAGE {
        return Err(Invalid(format!("listings take 1 to {MAX_PAGE} entries at a time, not {count}")).into());
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Keys;
    use std::time::Duration;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn a_body_is_the_topics_and_bounded() {
        let size = |owner: Value, n: Value| parse_body_size("t", Value::Array(vec![owner, n]));
        assert_eq!(size(bulk("t"), Value::Int(5)), Some(5));
        assert_eq!(size(bulk("other"), Value::Int(5)), None, "another topic's job of the id");
        assert_eq!((size(Value::Nil, Value::Int(0)), size(bulk("t"), Value::Int(-1))), (None, None));
        let body =
            |owner: &str, body: Value| parse_body("t", 4, Value::Array(vec![Value::Array(vec![bulk(owner), body])]));
        assert_eq!(body("t", Value::BulkString(vec![0xff, 0])), Body::Bytes(vec![0xff, 0]));
        assert_eq!(body("t", bulk("12345")), Body::TooLarge(5), "grew meanwhile");
        assert_eq!(body("u", bulk("1")), Body::Absent, "replaced by another topic's");
        assert_eq!(body("t", Value::Nil), Body::Bytes(vec![]), "no body field: an empty body");
        assert_eq!(parse_len(Value::Array(vec![Value::Int(7)])).ok(), Some(7));
        assert!(parse_len(Value::Array(vec![bulk("7")])).is_err());
    }

    #[test]
    fn lookup_reply_reads_each_state_time_into_its_field() {
        let reply =
            Value::Array(["reserved", "t", "5", "2", "", "1700000000.125", "", "Boom: x", "", ""].map(bulk).to_vec());
        let info = parse_lookup(b"42", reply).unwrap();
        assert_eq!(info.state, JobState::Reserved);
        assert_eq!(info.flow, TopicFlow::Running);
        assert_eq!(info.deadline, Some(UNIX_EPOCH + Duration::from_millis(1_700_000_000_125)));
        assert_eq!((info.due, info.dead_at, info.max_attempts), (None, None, None));
        assert_eq!(info.last_error.as_deref(), Some("Boom: x"));
        // Fields of a damaged hash: not known, or clamped, never an error.
        let odd =
            ["scheduled", "t", "abc", "99999999999999999999", "-4", "inf", "", "", "00-x", "paused"].map(bulk).to_vec();
        let info = parse_lookup(b"42", Value::Array(odd)).unwrap();
        assert_eq!(info.flow, TopicFlow::Paused);
        let mut limited = ["ready", "t", "1", "0", "", "", "", "", "", "limited"].map(bulk).to_vec();
        assert_eq!(parse_lookup(b"42", Value::Array(limited.clone())).unwrap().flow, TopicFlow::Limited);
        limited[9] = bulk("throttled");
        assert_eq!(parse_lookup(b"42", Value::Array(limited)).unwrap().flow, TopicFlow::Running, "a word unknown");
        assert_eq!((info.body_size, info.attempts, info.max_attempts), (None, Some(u64::MAX), Some(0)));
        assert_eq!(info.due, Some(UNIX_EPOCH + Duration::from_millis(253_402_300_799_999)));
        assert_eq!(info.traceparent, None, "a malformed traceparent reads as absent");
        let unreadable = ["dead", "t", "1", "1", "1", "abc", "buried", "", "", ""].map(bulk).to_vec();
        assert_eq!(parse_lookup(b"42", Value::Array(unreadable)).unwrap().dead_at, None);
        let bad = Value::Array(["weird", "", "", "", "", "", "", "", "", ""].map(bulk).to_vec());
        assert!(matches!(parse_lookup(b"42", bad), Err(Error::BadReply(_))));
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
