//! Per-topic numbers without I/O: stats.lua in the classic layout; in the
//! per-topic layout the topics first, then their keys' sizes and flow
//! hashes, no script (PROTOCOL.md, "Operations in the per-topic layout").

use super::*;
use crate::connection::Batch;
use crate::keys::{Keys, Names};
use crate::numbers;
use crate::op::Request;
use crate::replies::{opt_text, raw, seconds, split_name, RateLimit};
use crate::scripts;
use redis::Value;

/// An inspecting operation.
type Op<'a, T> = crate::op::Op<'a, T, Error>;

/// The numbers of every known topic.
pub fn stats<'a>(names: &'a Names) -> Op<'a, Stats> {
    match names {
        Names::Classic(keys) => Op::call(stats_script(keys), parse_stats),
        Names::Topic(index) => {
            let mut batch = Batch::new();
            batch.add(redis::cmd("SMEMBERS").arg(index.topics()).clone());
            Op::call(Request::Batch(batch), move |reply| topic_numbers(names, reply))
                .then(|(topics, req)| Ok(Op::call(req, move |reply| parse_topic_numbers(topics, reply))))
        }
    }
}

/// The flow hash's fields the per-topic stats read, in stats.lua's order.
const FLOW_FIELDS: [&str; 3] = ["paused", "per_second", "burst"];

/// The per-topic layout's topics (SMEMBERS' reply),
/// sorted, and the request reading their numbers.
fn topic_numbers(names: &Names, reply: Value) -> Result<(Vec<String>, Request)> {
    let bad = |v: &dyn std::fmt::Debug| Error::BadReply(format!("stats: expected the topics, got {v:?}"));
    let members = match reply {
        Value::Array(mut replies) if replies.len() == 1 => replies.remove(0),
        other => return Err(bad(&other)),
    };
    let Value::Array(members) = members else { return Err(bad(&members)) };
    let mut topics =
        members.into_iter().map(|m| opt_text(m).map(Option::unwrap_or_default)).collect::<Result<Vec<String>>>()?;
    topics.sort();
    let mut batch = Batch::new();
    // Due jobs by this machine's clock: `held` is a count for people.
    let now = format!(
        "{:.3}",
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs_f64()
    );
    for t in &topics {
        batch.add(redis::Cmd::zcard(names.pool(t))).add(redis::Cmd::llen(names.ready(t)));
        batch.add(redis::Cmd::zcard(names.reserved(t))).add(redis::Cmd::llen(names.dead(t)));
        batch.add(redis::cmd("HMGET").arg(names.flow(t)).arg(&FLOW_FIELDS[..]).clone());
        batch.add(redis::cmd("ZCOUNT").arg(names.pool(t)).arg("-inf").arg(&now).clone());
    }
    Ok((topics, Request::Batch(batch)))
}

/// A topic's `paused` field as stats read it: `None` while it runs;
/// `Some(None)` when it is paused since a time that is not known (a value
/// that is no time, or `"?"`: stats.lua's word for a flow hash of the wrong
/// type, which pauses the topic too).
fn paused_field(v: Value) -> Option<Option<SystemTime>> {
    match v {
        Value::Nil => None,
        Value::ServerError(_) => Some(None),
        other => match opt_text(other) {
            Ok(None) => None,
            Ok(Some(text)) => Some(seconds(&text)),
            Err(_) => Some(None),
        },
    }
}

/// HMGET's `[paused, per_second, burst]` of a topic's flow hash: the pause
/// as [`paused_field`] reads it, and the limit. A hash of the wrong type
/// answers an error in place of the three: paused (as hand-outs take it),
/// with no limit.
fn flow_fields(v: Value) -> (Option<Option<SystemTime>>, Option<RateLimit>) {
    match v {
        Value::Array(fields) => {
            let mut fields = fields.into_iter();
            let mut next = || fields.next().unwrap_or(Value::Nil);
            (paused_field(next()), RateLimit::from_values(next(), next()))
        }
        Value::Nil => (None, None),
        other => (paused_field(other), None),
    }
}

/// The numbers of `topics` (the reply of [`topic_numbers`]'s request).
fn parse_topic_numbers(topics: Vec<String>, reply: Value) -> Result<Stats> {
    let bad = |v: &dyn std::fmt::Debug| Error::BadReply(format!("stats: unexpected reply {v:?}"));
    let values = match reply {
        Value::Array(values) if values.len() == topics.len() * 6 => values,
        other => return Err(bad(&other)),
    };
    let mut values = values.into_iter();
    let mut read = Vec::with_capacity(topics.len());
    for topic in topics {
        let mut n = [0u64; 4];
        for slot in &mut n {
            let v = values.next().unwrap_or(Value::Nil);
            *slot = numbers::count_value::<u64>(&v).value.ok_or_else(|| bad(&v))?;
        }
        // A key of the wrong type answers an error in its place: the
        // topic's other numbers stand.
        let (paused, rate_limit) = flow_fields(values.next().unwrap_or(Value::Nil));
        let due = numbers::count_value::<u64>(&values.next().unwrap_or(Value::Nil)).value.unwrap_or(0);
        // Held: due jobs left in the pool while a pause or a limit keeps
        // them there (while the topic runs freely, a due job there is only
        // waiting for the next move).
        let controlled = paused.is_some() || rate_limit.is_some();
        read.push(TopicStats {
            topic,
            scheduled: n[0],
            ready: n[1],
            reserved: Some(n[2]),
            dead: n[3],
            raw_topic: None,
            paused: paused.is_some(),
            paused_since: paused.flatten(),
            held: if controlled { due } else { 0 },
            rate_limit,
        });
    }
    let topics = read;
    Ok(Stats {
        scheduled_total: topics.iter().map(|t| t.scheduled).sum(),
        reserved_total: topics.iter().filter_map(|t| t.reserved).sum(),
        topics,
    })
}

/// stats.lua.
fn stats_script(keys: &Keys) -> Request {
    let mut inv = scripts::STATS.prepare_invoke();
    inv.key(keys.topics())
        .key(keys.scheduled_count())
        .key(keys.job_pool())
        .key(keys.reserved())
        .key(keys.flow_topics());
    inv.arg(keys.ready_queue_prefix()).arg(keys.dead_prefix()).arg(keys.bucket_prefix()).arg(RESERVED_CAP);
    inv.arg(format!("{}flow:", keys.prefix())).arg(keys.flow_pool_prefix());
    Request::Script(inv)
}

/// stats.lua's `{pool_total, reserved_total, known, {topic, scheduled,
/// ready, reserved, dead, paused_since, held, per_second, burst}...}`.
pub fn parse_stats(reply: Value) -> Result<Stats> {
    let bad = |v: &dyn std::fmt::Debug| Error::BadReply(format!("stats: unexpected reply {v:?}"));
    let Value::Array(parts) = reply else { return Err(bad(&reply)) };
    let mut parts = parts.into_iter();
    let int = |v: Option<Value>| {
        let v = v.unwrap_or(Value::Nil);
        numbers::count_value::<u64>(&v).value.ok_or_else(|| bad(&v))
    };
    let scheduled_total = int(parts.next())?;
    let reserved_total = int(parts.next())?;
    let known = int(parts.next())? == 1;
    let topics = parts
        .map(|entry| {
            let Value::Array(fields) = entry else { return Err(bad(&entry)) };
            let [topic, scheduled, ready, reserved, dead, paused, held, per_second, burst] =
                <[Value; 9]>::try_from(fields).map_err(|f| bad(&f))?;
            let (topic, raw_topic) = split_name(raw(topic)?);
            let paused = paused_field(paused);
            Ok(TopicStats {
                topic,
                raw_topic,
                scheduled: int(Some(scheduled))?,
                ready: int(Some(ready))?,
                reserved: Some(int(Some(reserved))?).filter(|_| known),
                dead: int(Some(dead))?,
                paused: paused.is_some(),
                paused_since: paused.flatten(),
                held: int(Some(held))?,
                rate_limit: RateLimit::from_values(per_second, burst),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Stats { scheduled_total, reserved_total, topics })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn a_classic_row_reads_its_limit_and_an_unreadable_one_as_none() {
        let row = |rate: &str, burst: &str| {
            Value::Array(vec![
                Value::Int(3),
                Value::Int(0),
                Value::Int(1),
                Value::Array(["sms", "3", "1", "0", "0", "", "2", rate, burst].map(bulk).to_vec()),
            ])
        };
        let t = &parse_stats(row("0.5", "1")).expect("stats").topics[0];
        assert_eq!((t.rate_limit, t.held, t.paused), (Some(RateLimit { per_second: 0.5, burst: 1 }), 2, false));
        assert_eq!(parse_stats(row("", "")).expect("stats").topics[0].rate_limit, None);
        assert_eq!(parse_stats(row("lots", "1")).expect("stats").topics[0].rate_limit, None, "input, not an error");
        let seven = Value::Array(vec![
            Value::Int(0),
            Value::Int(0),
            Value::Int(1),
            Value::Array(["sms", "3", "1", "0", "0", "", "2"].map(bulk).to_vec()),
        ]);
        assert!(parse_stats(seven).is_err(), "the rows before limits had 7 fields");
    }

    #[test]
    fn per_topic_numbers_count_held_jobs_while_paused_or_limited() {
        let flow = |fields: [Value; 3]| Value::Array(fields.to_vec());
        let numbers = |flow: Value| {
            let reply =
                Value::Array(vec![Value::Int(5), Value::Int(0), Value::Int(0), Value::Int(0), flow, Value::Int(4)]);
            parse_topic_numbers(vec!["t".into()], reply).expect("numbers").topics.remove(0)
        };
        let limited = numbers(flow([Value::Nil, bulk("50"), bulk("10")]));
        assert_eq!((limited.held, limited.paused, limited.rate_limit.map(|r| r.burst)), (4, false, Some(10)));
        let running = numbers(flow([Value::Nil, Value::Nil, Value::Nil]));
        assert_eq!((running.held, running.rate_limit), (0, None), "due jobs of a running topic are not held");
        let paused = numbers(flow([bulk("1700000000.5"), Value::Nil, Value::Nil]));
        assert_eq!((paused.held, paused.paused, paused.paused_since.is_some()), (4, true, true));
        let error = redis::parse_redis_value(b"-WRONGTYPE Operation against a key holding the wrong kind\r\n");
        let error = error.expect("an error reply, as a value");
        assert!(matches!(error, Value::ServerError(_)));
        let wrong_type = numbers(error);
        assert_eq!((wrong_type.paused, wrong_type.rate_limit, wrong_type.held), (true, None, 4));
    }
}
