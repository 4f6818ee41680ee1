//! Reading the scripts' replies: one decoder per script, named after it
//! (`parse_<script>`; take.lua answers as pop.lua), and the readers of
//! times, names and counts they share. Every reply is input: a damaged job
//! hash's numbers are read within range, text that is not UTF-8 is kept as
//! bytes, and anything else is [`Error::Protocol`] naming the script.

use crate::error::{Error, IdTaken, Result, Taken};
use crate::Job;
use crate::{DeadLetter, Reserved};
pub(crate) use delayer_protocol::replies::*;
use redis::Value;
use std::time::SystemTime;

/// pop.lua's (and take.lua's) `[id, topic, body, traceparent]` or nil; a
/// wait instruction (the topic is paused) is nothing handed out, as nil.
pub(crate) fn parse_pop(reply: Value) -> Result<Option<crate::Message>> {
    if reply == Value::Nil || flow_wait(&reply).is_some() {
        return Ok(None);
    }
    let mut p = array(reply, 4, "pop.lua's [id, topic, body, traceparent]")?.into_iter();
    let ((id, raw_id), (topic, raw_topic)) = (name(p.next())?, name(p.next())?);
    let body = bytes(p.next())?;
    let traceparent = traceparent(&id, p.next())?;
    Ok(Some(crate::Message { id, topic, body, raw_id, raw_topic, traceparent }))
}

/// reserve.lua's `[id, topic, body, attempts, max_attempts, receipt,
/// deadline, traceparent]`, or nil; a wait instruction as nil.
pub(crate) fn parse_reserve(reply: Value) -> Result<Option<Reserved>> {
    if reply == Value::Nil || flow_wait(&reply).is_some() {
        return Ok(None);
    }
    reserved_job(reply).map(Some)
}

/// One reserved job, `[id, topic, body, attempts, max_attempts, receipt,
/// deadline, traceparent]`.
fn reserved_job(reply: Value) -> Result<Reserved> {
    let mut p = array(reply, 8, "reserve.lua's reserved job")?.into_iter();
    let ((id, raw_id), (topic, raw_topic)) = (name(p.next())?, name(p.next())?);
    let (body, attempts, max_attempts) = (bytes(p.next())?, int(p.next())?, int(p.next())?);
    let (receipt, deadline) = (text(p.next())?, parse_due(&text(p.next())?)?);
    let traceparent = traceparent(&id, p.next())?;
    Ok(Reserved { id, topic, raw_id, raw_topic, body, attempts, max_attempts, receipt, deadline, traceparent })
}

/// dead.lua "list": `[[id, topic, body, attempts, reason, dead_at,
/// last_error], ...]`.
pub(crate) fn parse_dead_list(reply: Value) -> Result<Vec<DeadLetter>> {
    let Value::Array(entries) = reply else {
        return Err(Error::Protocol(format!("dead.lua: expected a list of dead letters, got {reply:?}")));
    };
    entries
        .into_iter()
        .map(|entry| {
            let mut p = array(entry, 7, "dead.lua's dead letter")?.into_iter();
            let ((id, raw_id), (topic, raw_topic)) = (name(p.next())?, name(p.next())?);
            Ok(DeadLetter {
                id,
                topic,
                raw_id,
                raw_topic,
                body: bytes(p.next())?,
                attempts: int(p.next())?,
                reason: text(p.next())?,
                dead_at: lenient_time(&text(p.next())?),
                // Bytes a worker wrote: shown lossily rather than failing the listing.
                last_error: Some(String::from_utf8_lossy(&bytes(p.next())?).into_owned()).filter(|e| !e.is_empty()),
            })
        })
        .collect()
}

/// remove.lua's 1 (cancelled) or 0 (nothing to cancel).
pub(crate) fn parse_remove(reply: Value) -> Result<bool> {
    Ok(flag(reply, "remove.lua")?)
}

/// ack.lua's 1 (done) or 0 (the reservation was not held).
pub(crate) fn parse_ack(reply: Value) -> Result<bool> {
    Ok(flag(reply, "ack.lua")?)
}

/// reschedule.lua's new due time, or nil (the job was not waiting).
pub(crate) fn parse_reschedule(reply: Value) -> Result<Option<SystemTime>> {
    Ok(maybe_due(reply)?)
}

/// touch.lua's new deadline, or nil (the reservation was not held).
pub(crate) fn parse_touch(reply: Value) -> Result<Option<SystemTime>> {
    Ok(maybe_due(reply)?)
}

/// release.lua's "held" reply: whether the reservation was held (the new
/// due time, or "dead") or not (nil).
pub(crate) fn parse_release(reply: Value) -> Result<bool> {
    match reply {
        Value::Nil => Ok(false),
        reply @ (Value::BulkString(_) | Value::SimpleString(_)) => {
            let outcome = text(Some(reply))?;
            (outcome == "dead" || parse_due(&outcome).is_ok()).then_some(true).ok_or_else(|| {
                Error::Protocol(format!("release.lua: expected a due time or \"dead\", got {outcome:?}"))
            })
        }
        other => Err(Error::Protocol(format!("release.lua returned {other:?}"))),
    }
}

/// reserve.lua's batch reply `{acks, jobs}`: one flag per ack sent (`acks`
/// of them), then the jobs reserved; and, when the topic is paused, no jobs
/// and its wait instruction as a third item.
pub(crate) fn parse_reserve_many(reply: Value, acks: usize) -> Result<(Vec<bool>, Vec<Reserved>, Option<FlowWait>)> {
    let parts = match reply {
        Value::Array(parts) if parts.len() == 2 || parts.len() == 3 => parts,
        other => return Err(Error::Protocol(format!("reserve_many: expected {{acks, jobs}}, got {other:?}"))),
    };
    let flow = match parts.get(2) {
        None => None,
        Some(w) => {
            Some(flow_wait(w).ok_or_else(|| Error::Protocol(format!("reserve_many: expected a wait, got {w:?}")))?)
        }
    };
    let mut p = parts.into_iter();
    let (Some(Value::Array(flags)), Some(jobs)) = (p.next(), p.next()) else {
        return Err(Error::Protocol("reserve_many: expected a list of ack results".into()));
    };
    if flags.len() != acks {
        return Err(Error::Protocol(format!("reserve_many: {} ack results for {acks} acks", flags.len())));
    }
    let flags = flags.into_iter().map(parse_ack).collect::<Result<Vec<_>>>()?;
    let jobs = match jobs {
        Value::Array(jobs) => jobs.into_iter().map(reserved_job).collect::<Result<Vec<_>>>()?,
        // An empty table reaches Redis as an empty array, but a nil is no harm.
        Value::Nil => Vec::new(),
        other => return Err(Error::Protocol(format!("reserve_many: expected a list of jobs, got {other:?}"))),
    };
    Ok((flags, jobs, flow))
}

/// dead.lua "requeue" / "purge": `{done, taken}`.
pub(crate) fn parse_dead_drain(reply: Value) -> Result<(u64, u64)> {
    let mut parts = array(reply, 2, "dead.lua's {done, taken}")?.into_iter();
    Ok((int(parts.next())?, int(parts.next())?))
}

/// What push.lua (or push_many.lua, for one job) answered.
enum Pushed {
    /// Written: due at this time.
    Due(SystemTime),
    /// Not written: "if absent" found the id held by this topic's job, due
    /// then (`None`: not waiting).
    Taken(String, Option<SystemTime>),
}

/// `"s.mmm"`, or `{topic, due}` for a taken id (due "" when not waiting).
fn parse_pushed(reply: Value) -> Result<Pushed> {
    match reply {
        Value::Array(_) => {
            let mut p = array(reply, 2, "push.lua's {topic, due}")?.into_iter();
            let topic = text(p.next())?;
            let due = text(p.next())?;
            let due = if due.is_empty() { None } else { Some(parse_due(&due)?) };
            Ok(Pushed::Taken(topic, due))
        }
        other => Ok(Pushed::Due(parse_due(&text(Some(other))?)?)),
    }
}

/// push.lua's reply for `job`: its due time, or [`Error::IdTaken`].
pub(crate) fn parse_push(job: &Job, reply: Value) -> Result<SystemTime> {
    match parse_pushed(reply)? {
        Pushed::Due(due) => Ok(due),
        Pushed::Taken(topic, due) => {
            Err(Error::IdTaken(IdTaken { taken: vec![Taken { id: job.id.clone(), topic, due }], due: vec![None] }))
        }
    }
}

/// push_many.lua's replies (`parse_push_many`): collects them, pipeline after pipeline, for its jobs.
pub(crate) struct ParsePushMany<'a> {
    jobs: &'a [Job],
    due: Vec<Option<SystemTime>>,
    taken: Vec<Taken>,
}

impl<'a> ParsePushMany<'a> {
    pub(crate) fn new(jobs: &'a [Job]) -> Self {
        ParsePushMany { jobs, due: Vec::with_capacity(jobs.len()), taken: Vec::new() }
    }

    /// One pipeline's reply: a list per call, a reply per job.
    pub(crate) fn add(&mut self, reply: Value) -> Result<()> {
        let Value::Array(calls) = reply else {
            return Err(Error::Protocol(format!("push_many: expected a list of calls, got {reply:?}")));
        };
        for call in calls {
            let Value::Array(replies) = call else {
                return Err(Error::Protocol(format!("push_many: expected a list of due times, got {call:?}")));
            };
            for reply in replies {
                let job = self.jobs.get(self.due.len()).ok_or_else(|| {
                    Error::Protocol(format!("push_many: more replies than the {} jobs pushed", self.jobs.len()))
                })?;
                match parse_pushed(reply)? {
                    Pushed::Due(due) => self.due.push(Some(due)),
                    Pushed::Taken(topic, due) => {
                        self.taken.push(Taken { id: job.id.clone(), topic, due });
                        self.due.push(None);
                    }
                }
            }
        }
        Ok(())
    }

    /// Every job's due time, or [`Error::IdTaken`] when some ids were taken.
    pub(crate) fn finish(self) -> Result<Vec<SystemTime>> {
        if self.due.len() != self.jobs.len() {
            return Err(Error::Protocol(format!("push_many: {} replies for {} jobs", self.due.len(), self.jobs.len())));
        }
        if !self.taken.is_empty() {
            return Err(Error::IdTaken(IdTaken { taken: self.taken, due: self.due }));
        }
        Ok(self.due.into_iter().flatten().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    /// What a damaged job hash can make the scripts answer (a field of
    /// 20 digits comes back as the integer i64::MIN, Redis's rendering of a
    /// number no integer holds) is read, never refused or panicked on.
    #[test]
    fn hostile_numbers_in_replies_are_read_within_range() {
        let reserved = |attempts: Value, max: Value, deadline: &str| {
            let reply =
                Value::Array(vec![bulk("1"), bulk("t"), bulk("b"), attempts, max, bulk("7"), bulk(deadline), bulk("")]);
            parse_reserve(reply).expect("read").expect("a job")
        };
        let job = reserved(Value::Int(i64::MIN), Value::Int(-3), "inf");
        assert_eq!((job.attempts, job.max_attempts), (u32::MAX, 0));
        assert_eq!(job.deadline, UNIX_EPOCH + Duration::from_millis(253_402_300_799_999));
        let job = reserved(Value::Int(1 << 40), Value::Int(25), "-1");
        assert_eq!((job.attempts, job.deadline), (u32::MAX, UNIX_EPOCH));
        assert!(parse_reserve(Value::Array(vec![bulk("1"); 8])).is_ok(), "counts as text");
        let bad_deadline = Value::Array(vec![
            bulk("1"),
            bulk("t"),
            bulk("b"),
            Value::Int(1),
            Value::Int(1),
            bulk("7"),
            bulk("abc"),
            bulk(""),
        ]);
        assert!(matches!(parse_reserve(bad_deadline), Err(Error::Protocol(_))));

        let letter = |attempts: Value, dead_at: &str| {
            Value::Array(vec![bulk("1"), bulk("t"), bulk("b"), attempts, bulk("buried"), bulk(dead_at), bulk("")])
        };
        let letters = parse_dead_list(Value::Array(vec![
            letter(Value::Int(i64::MIN), "abc"),
            letter(Value::Int(2), ""),
            letter(Value::Int(-1), "1e300"),
        ]))
        .expect("every letter read");
        assert_eq!(letters.iter().map(|d| d.attempts).collect::<Vec<_>>(), [u32::MAX, 2, 0]);
        assert_eq!((letters[0].dead_at, letters[1].dead_at), (UNIX_EPOCH, UNIX_EPOCH));
        assert_eq!(letters[2].dead_at, UNIX_EPOCH + Duration::from_millis(253_402_300_799_999));
        for due in ["nan", "inf", "-inf", "1e20", "18446744073709551616"] {
            let _ = parse_reschedule(bulk(due));
        }
        assert!(parse_reschedule(bulk("nan")).is_err());
    }
}
