//! What a metrics exporter reads per topic besides [`super::Stats`]: the
//! reservations ended per outcome, as ack.lua, release.lua and reserve.lua
//! count them in the outcomes hash ([`crate::keys::Names::outcomes`]), and the
//! oldest ready job of each topic with its due time (the ready-queue age).
//!
//! Two round trips, no script ([`activity`]): `TIME`, the outcomes (`HGETALL`: one hash in
//! the classic layout, one per topic in the per-topic layout) and each
//! ready list's oldest id (`LINDEX -1`); then `HGET <bucket> due` for each
//! such id. O(topics + outcome fields), whatever the backlog. Every value is
//! input: a key of the wrong type or an odd number is reported in
//! [`Activity::odd`] (the reader logs it) and read as nothing.

use super::Op;
use crate::connection::Batch;
use crate::keys::{Names, OUTCOMES};
use crate::numbers;
use crate::op::{Error, Request};
use crate::replies::Result;
use redis::Value;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Ended reservations and the oldest ready jobs, per topic.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Activity {
    /// Ended reservations per (topic, outcome), the outcome one of
    /// [`OUTCOMES`]; counts as Redis holds them (they only grow, unless
    /// Redis lost or dropped the hash).
    pub outcomes: BTreeMap<(String, &'static str), u64>,
    /// The oldest ready job of each topic asked for whose ready list holds one.
    pub heads: BTreeMap<String, Head>,
    /// Redis's clock when the lists were read (`None`: its reply was odd).
    pub now: Option<SystemTime>,
    /// Odd things met, as (key, what was wrong), for the caller to log.
    pub odd: Vec<(String, String)>,
}

/// The oldest job of a ready list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// Its id, as Redis holds it.
    pub id: Vec<u8>,
    /// Its due time, from its bucket's `due` field; `None` when the bucket
    /// has none (pushed in the classic layout and never retried, or by a
    /// Delayer 1.x client), is gone, or holds no time.
    pub due: Option<SystemTime>,
}

impl Activity {
    /// How long the oldest ready job of `topic` has waited since it was due:
    /// `Some(0)` for an empty ready list, `None` when unknown (no due time,
    /// or no clock reading).
    pub fn ready_age(&self, topic: &str) -> Option<Duration> {
        match self.heads.get(topic) {
            None => Some(Duration::ZERO),
            Some(head) => Some(self.now?.duration_since(head.due?).unwrap_or(Duration::ZERO)),
        }
    }
}

/// The reservations ended per topic and outcome, and the oldest ready job
/// of each of `topics`: `first_batch`, then `HGET <bucket> due` of each
/// such job.
pub fn activity<'a>(names: &'a Names, topics: &'a [String]) -> Op<'a, Activity> {
    let first = Request::Batch(first_batch(names, topics));
    Op::call(first, move |reply| {
        let mut activity = Activity::default();
        let due_reads = read_first(names, topics, reply, &mut activity)?;
        Ok((activity, due_reads))
    })
    .then(move |(activity, due_reads)| {
        if due_reads.is_empty() {
            return Ok(Op::done(activity));
        }
        let mut batch = Batch::new();
        for (topic, id) in &due_reads {
            batch.add_hint(redis::cmd("HGET").arg(names.bucket_bytes(topic, id)).arg("due").clone());
        }
        Ok(Op::call(Request::Batch(batch), move |reply| read_heads(names, activity, due_reads, reply)))
    })
}

/// The `due` fields of the ready lists' oldest jobs, into `activity`.
fn read_heads(
    names: &Names,
    mut activity: Activity,
    due_reads: Vec<(String, Vec<u8>)>,
    reply: Value,
) -> Result<Activity> {
    let replies = replies(reply, due_reads.len())?;
    for ((topic, id), reply) in due_reads.into_iter().zip(replies) {
        let key = String::from_utf8_lossy(&names.bucket_bytes(&topic, &id)).into_owned();
        let due = match &reply {
            Value::Nil => None,
            Value::ServerError(e) => {
                activity.odd.push((key, format!("cannot be read: {e:?}")));
                None
            }
            other => {
                let read = numbers::time_value(other);
                if let Some(odd) = read.odd {
                    activity.odd.push((key, format!("field due {}", odd.taken_as())));
                }
                read.value.map(numbers::Time::system_time)
            }
        };
        activity.heads.insert(topic, Head { id, due });
    }
    Ok(activity)
}

/// TIME, the outcome hashes, then each topic's oldest ready id.
fn first_batch(names: &Names, topics: &[String]) -> Batch {
    let mut batch = Batch::new();
    batch.add_hint(redis::cmd("TIME"));
    for hash in names.outcome_hashes(topics) {
        batch.add_hint(redis::cmd("HGETALL").arg(hash).clone());
    }
    for t in topics {
        batch.add_hint(redis::cmd("LINDEX").arg(names.ready(t)).arg(-1).clone());
    }
    batch
}

/// The replies of a batch of `n` commands.
fn replies(reply: Value, n: usize) -> Result<Vec<Value>> {
    match reply {
        Value::Array(values) if values.len() == n => Ok(values),
        other => Err(Error::BadReply(format!("activity: expected {n} replies, got {other:?}"))),
    }
}

/// Reads [`first_batch`]'s replies into `activity`; returns the (topic,
/// id) of each ready list's oldest job, whose due time is read next.
fn read_first(
    names: &Names,
    topics: &[String],
    reply: Value,
    activity: &mut Activity,
) -> Result<Vec<(String, Vec<u8>)>> {
    let hashes = names.outcome_hashes(topics);
    let mut values = replies(reply, 1 + hashes.len() + topics.len())?.into_iter();
    activity.now = values.next().as_ref().and_then(clock);
    for key in hashes {
        match values.next() {
            Some(Value::ServerError(e)) => activity.odd.push((key, format!("cannot be read: {e:?}"))),
            Some(Value::Array(fields)) => read_outcomes(&key, fields, activity),
            Some(Value::Map(pairs)) => {
                read_outcomes(&key, pairs.into_iter().flat_map(|(k, v)| [k, v]).collect(), activity)
            }
            other => return Err(Error::BadReply(format!("activity: HGETALL {key} answered {other:?}"))),
        }
    }
    let mut due_reads = Vec::new();
    for t in topics {
        match values.next() {
            Some(Value::BulkString(id)) => due_reads.push((t.clone(), id)),
            Some(Value::Nil) => {}
            Some(Value::ServerError(e)) => activity.odd.push((names.ready(t), format!("cannot be read: {e:?}"))),
            other => return Err(Error::BadReply(format!("activity: LINDEX {} answered {other:?}", names.ready(t)))),
        }
    }
    Ok(due_reads)
}

/// TIME's `[seconds, microseconds]`.
fn clock(reply: &Value) -> Option<SystemTime> {
    let Value::Array(parts) = reply else { return None };
    let [secs, micros] = parts.as_slice() else { return None };
    let secs = numbers::count_value::<u64>(secs).value?;
    let micros = numbers::count_value::<u64>(micros).value?;
    UNIX_EPOCH.checked_add(Duration::from_secs(secs))?.checked_add(Duration::from_micros(micros))
}

/// An outcome hash's fields, `<outcome>:<topic>` -> count; a field of
/// another shape, or a count that is no count, is odd and skipped.
fn read_outcomes(key: &str, flat: Vec<Value>, activity: &mut Activity) {
    for pair in flat.chunks(2) {
        let [field, count] = pair else { break };
        let Value::BulkString(field) = field else { continue };
        let field = String::from_utf8_lossy(field);
        let parsed = field.split_once(':').and_then(|(kind, topic)| {
            let kind = OUTCOMES.iter().find(|k| **k == kind)?;
            (!topic.is_empty()).then(|| (topic.to_string(), *kind))
        });
        let Some(series) = parsed else {
            activity.odd.push((key.to_string(), format!("field {field:?} is no <outcome>:<topic>: ignored")));
            continue;
        };
        let read = numbers::count_value::<u64>(count);
        if let Some(odd) = read.odd {
            activity.odd.push((key.to_string(), format!("field {field:?} {}", odd.taken_as())));
        }
        if let Some(n) = read.value {
            *activity.outcomes.entry(series).or_default() += n;
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
    fn outcome_fields_are_read_by_the_number_rules() {
        let mut a = Activity::default();
        let flat = ["acked:mail", "7", "buried:a:b", "-3", "nope", "1", "acked:x", "abc", "released:big", "1e30"]
            .map(bulk)
            .to_vec();
        read_outcomes("p:outcomes", flat, &mut a);
        assert_eq!(a.outcomes.get(&("mail".into(), "acked")), Some(&7));
        assert_eq!(a.outcomes.get(&("a:b".into(), "buried")), Some(&0));
        assert_eq!(a.outcomes.get(&("big".into(), "released")), Some(&u64::MAX));
        assert!(!a.outcomes.contains_key(&("x".into(), "acked")));
        assert_eq!(a.odd.len(), 4, "{:?}", a.odd);
    }

    #[test]
    fn ready_age_is_zero_when_empty_and_unknown_without_a_due_time() {
        let now = UNIX_EPOCH + Duration::from_secs(100);
        let mut a = Activity { now: Some(now), ..Default::default() };
        a.heads.insert("late".into(), Head { id: b"1".to_vec(), due: Some(now - Duration::from_secs(40)) });
        a.heads.insert("early".into(), Head { id: b"2".to_vec(), due: Some(now + Duration::from_secs(5)) });
        a.heads.insert("old".into(), Head { id: b"3".to_vec(), due: None });
        assert_eq!(a.ready_age("none"), Some(Duration::ZERO));
        assert_eq!(a.ready_age("late"), Some(Duration::from_secs(40)));
        assert_eq!(a.ready_age("early"), Some(Duration::ZERO));
        assert_eq!(a.ready_age("old"), None);
        assert_eq!(clock(&Value::Array(vec![bulk("100"), bulk("500000")])), Some(now + Duration::from_millis(500)));
        assert_eq!(clock(&Value::Array(vec![bulk("x"), bulk("1")])), None);
    }
}
