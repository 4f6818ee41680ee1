//! Reading the scripts' replies: times, messages, reserved jobs, dead
//! letters, flags.

use crate::error::{Error, Result};
use crate::{DeadLetter, Reserved};
use redis::Value;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// "1763750000.125" (Unix seconds, as the scripts return times).
pub(crate) fn parse_due(s: &str) -> Result<SystemTime> {
    let bad = || Error::Protocol(format!("expected a time in Unix seconds, got {s:?}"));
    let secs: f64 = s.parse().map_err(|_| bad())?;
    if !secs.is_finite() || secs < 0.0 {
        return Err(bad());
    }
    Ok(UNIX_EPOCH + Duration::from_millis((secs * 1000.0).round() as u64))
}

/// `[id, topic, body]` or nil, from pop.lua / take.lua.
pub(crate) fn parse_message(reply: Value) -> Result<Option<crate::Message>> {
    if reply == Value::Nil {
        return Ok(None);
    }
    let mut p = array(reply, 3, "[id, topic, body]")?.into_iter();
    let ((id, raw_id), (topic, raw_topic)) = (name(p.next())?, name(p.next())?);
    Ok(Some(crate::Message { id, topic, body: bytes(p.next())?, raw_id, raw_topic }))
}

/// An id or topic read from Redis: its text (lossy when the bytes are not
/// UTF-8, which a Delayer 1.x or PHP client may write), and its exact
/// bytes in that case, so the job is handed out whole and named back.
pub(crate) fn name(v: Option<Value>) -> Result<(String, Option<Vec<u8>>)> {
    Ok(split_name(bytes(v)?))
}

/// A name's bytes as text, and the bytes themselves when they are not UTF-8.
pub(crate) fn split_name(bytes: Vec<u8>) -> (String, Option<Vec<u8>>) {
    match String::from_utf8(bytes) {
        Ok(text) => (text, None),
        Err(e) => (String::from_utf8_lossy(e.as_bytes()).into_owned(), Some(e.into_bytes())),
    }
}

/// A script's array reply of exactly `n` items; nil is `None`.
pub(super) fn array(reply: Value, n: usize, what: &str) -> Result<Vec<Value>> {
    match reply {
        Value::Array(parts) if parts.len() == n => Ok(parts),
        other => Err(Error::Protocol(format!("expected {what}, got {other:?}"))),
    }
}

pub(super) fn bytes(v: Option<Value>) -> Result<Vec<u8>> {
    match v {
        Some(Value::BulkString(b)) => Ok(b),
        Some(Value::SimpleString(s)) => Ok(s.into_bytes()),
        other => Err(Error::Protocol(format!("expected a string, got {other:?}"))),
    }
}

/// Ids and topics we write are UTF-8; one written by a foreign client that
/// is not must still reach the consumer, so it is converted, not refused.
pub(super) fn text(v: Option<Value>) -> Result<String> {
    Ok(String::from_utf8_lossy(&bytes(v)?).into_owned())
}

pub(super) fn int<T: TryFrom<i64>>(v: Option<Value>) -> Result<T> {
    match v {
        Some(Value::Int(n)) => T::try_from(n).map_err(|_| Error::Protocol(format!("{n} is out of range"))),
        other => Err(Error::Protocol(format!("expected an integer, got {other:?}"))),
    }
}

/// reserve.lua's `[id, topic, body, attempts, max_attempts, receipt,
/// deadline]`, or nil.
pub(crate) fn parse_reserved(reply: Value) -> Result<Option<Reserved>> {
    if reply == Value::Nil {
        return Ok(None);
    }
    reserved_job(reply).map(Some)
}

/// One reserved job, `[id, topic, body, attempts, max_attempts, receipt,
/// deadline]`.
pub(super) fn reserved_job(reply: Value) -> Result<Reserved> {
    let mut p = array(reply, 7, "a reserved job")?.into_iter();
    let ((id, raw_id), (topic, raw_topic)) = (name(p.next())?, name(p.next())?);
    Ok(Reserved {
        id,
        topic,
        raw_id,
        raw_topic,
        body: bytes(p.next())?,
        attempts: int(p.next())?,
        max_attempts: int(p.next())?,
        receipt: text(p.next())?,
        deadline: parse_due(&text(p.next())?)?,
    })
}

/// dead.lua "list": `[[id, topic, body, attempts, reason, dead_at], ...]`.
pub(crate) fn parse_dead_letters(reply: Value) -> Result<Vec<DeadLetter>> {
    let Value::Array(entries) = reply else {
        return Err(Error::Protocol(format!("expected a list of dead letters, got {reply:?}")));
    };
    entries
        .into_iter()
        .map(|entry| {
            let mut p = array(entry, 6, "a dead letter")?.into_iter();
            let ((id, raw_id), (topic, raw_topic)) = (name(p.next())?, name(p.next())?);
            Ok(DeadLetter {
                id,
                topic,
                raw_id,
                raw_topic,
                body: bytes(p.next())?,
                attempts: int(p.next())?,
                reason: text(p.next())?,
                dead_at: parse_due(&text(p.next())?)?,
            })
        })
        .collect()
}

/// A script's 1 (done) or 0 (nothing to do): ack, remove.
pub(crate) fn parse_flag(reply: Value) -> Result<bool> {
    match reply {
        Value::Int(n) => Ok(n == 1),
        other => Err(Error::Protocol(format!("expected 0 or 1, got {other:?}"))),
    }
}

/// A time `"s.mmm"`, or nil: touch, reschedule.
pub(crate) fn parse_maybe_due(reply: Value) -> Result<Option<SystemTime>> {
    match reply {
        Value::Nil => Ok(None),
        other => Ok(Some(parse_due(&text(Some(other))?)?)),
    }
}
