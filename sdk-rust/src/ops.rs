//! What each operation sends to Redis and how its reply reads, shared by the
//! blocking client ([`crate::Delayer`]) and the async one
//! ([`crate::aio::Delayer`]), which differ only in how they wait.

use crate::error::{Error, Result};
use crate::keys::Keys;
use crate::scripts;
use crate::validate;
use crate::Job;
use redis::{Cmd, Pipeline, ScriptInvocation, Value};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How many jobs one push_many.lua call takes.
pub(crate) const JOBS_PER_CALL: usize = 100;
/// How many calls `push_many` pipelines per round trip.
pub(crate) const CALLS_PER_PIPELINE: usize = 10;

/// Checks a job against the protocol's input rules; returns the delay and
/// lifetime in milliseconds, as push.lua takes them.
pub(crate) fn validate_job(job: &Job) -> Result<(u64, u64)> {
    validate::name("topic", &job.topic)?;
    validate::name("id", &job.id)?;
    Ok((validate::delay_ms(job.delay)?, validate::ready_max_lifetime_ms(job.ready_max_lifetime)?))
}

/// push.lua for one job.
pub(crate) fn push(keys: &Keys, job: &Job) -> Result<ScriptInvocation<'static>> {
    let (delay_ms, lifetime_ms) = validate_job(job)?;
    let mut inv = scripts::PUSH.prepare_invoke();
    inv.key(keys.job_pool()).key(keys.job_bucket(&job.id));
    inv.arg(&job.id).arg(&job.topic).arg(&job.body[..]).arg(delay_ms).arg(lifetime_ms);
    Ok(inv)
}

/// push_many.lua for many jobs: [`JOBS_PER_CALL`] jobs per call,
/// [`CALLS_PER_PIPELINE`] calls per pipeline, each pipeline starting with a
/// SCRIPT LOAD (a no-op unless Redis lost the script). Everything is
/// validated before anything is built. Each pipeline answers with one list
/// of due times per call.
pub(crate) fn push_many(keys: &Keys, jobs: &[Job]) -> Result<Vec<Pipeline>> {
    let limits = jobs.iter().map(validate_job).collect::<Result<Vec<_>>>()?;
    let per_pipeline = JOBS_PER_CALL * CALLS_PER_PIPELINE;
    let pipes = jobs
        .chunks(per_pipeline)
        .zip(limits.chunks(per_pipeline))
        .map(|(jobs, limits)| {
            let mut pipe = redis::pipe();
            pipe.cmd("SCRIPT").arg("LOAD").arg(scripts::PUSH_MANY_SRC).ignore();
            for (jobs, limits) in jobs.chunks(JOBS_PER_CALL).zip(limits.chunks(JOBS_PER_CALL)) {
                let call = pipe.cmd("EVALSHA").arg(scripts::PUSH_MANY.get_hash()).arg(1).arg(keys.job_pool());
                call.arg(keys.bucket_prefix());
                for (job, (delay_ms, lifetime_ms)) in jobs.iter().zip(limits) {
                    call.arg(&job.id).arg(&job.topic).arg(&job.body[..]).arg(delay_ms).arg(lifetime_ms);
                }
            }
            pipe
        })
        .collect();
    Ok(pipes)
}

/// pop.lua for one topic.
pub(crate) fn pop(keys: &Keys, topic: &str) -> Result<ScriptInvocation<'static>> {
    validate::name("topic", topic)?;
    let mut inv = scripts::POP.prepare_invoke();
    inv.key(keys.ready_queue(topic)).key(keys.malformed()).arg(keys.bucket_prefix());
    Ok(inv)
}

/// take.lua for an id BRPOP returned (raw bytes: used exactly as stored).
pub(crate) fn take(keys: &Keys, id: &[u8]) -> ScriptInvocation<'static> {
    let mut inv = scripts::TAKE.prepare_invoke();
    inv.key(keys.job_bucket_bytes(id)).key(keys.malformed()).arg(id);
    inv
}

/// remove.lua for one id.
pub(crate) fn remove(keys: &Keys, id: &str) -> Result<ScriptInvocation<'static>> {
    validate::name("id", id)?;
    let mut inv = scripts::REMOVE.prepare_invoke();
    inv.key(keys.job_pool()).key(keys.job_bucket(id)).arg(id);
    Ok(inv)
}

/// The deadline of a bpop; `None` waits forever (`Duration::ZERO`).
pub(crate) fn bpop_deadline(topic: &str, timeout: Duration) -> Result<Option<Instant>> {
    validate::name("topic", topic)?;
    Ok((!timeout.is_zero()).then(|| Instant::now() + timeout))
}

/// The next BRPOP of a bpop, or `None` when its time is up. BRPOP takes
/// seconds, and 0 means forever, so a remainder under 1 ms is sent as 1 ms.
pub(crate) fn brpop(keys: &Keys, topic: &str, deadline: Option<Instant>) -> Option<Cmd> {
    let wait = match deadline {
        None => 0.0,
        Some(d) => {
            let left = d.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            left.as_secs_f64().max(0.001)
        }
    };
    let mut cmd = redis::cmd("BRPOP");
    cmd.arg(keys.ready_queue(topic)).arg(wait);
    Some(cmd)
}

/// "1763750000.125" (Unix seconds, as push.lua returns it).
pub(crate) fn parse_due(s: &str) -> Result<SystemTime> {
    let bad = || Error::Protocol(format!("push returned {s:?}, not a due time"));
    let secs: f64 = s.parse().map_err(|_| bad())?;
    if !secs.is_finite() || secs < 0.0 {
        return Err(bad());
    }
    Ok(UNIX_EPOCH + Duration::from_millis((secs * 1000.0).round() as u64))
}

/// `[id, topic, body]` or nil, from pop.lua / take.lua.
pub(crate) fn parse_message(reply: Value) -> Result<Option<crate::Message>> {
    let parts = match reply {
        Value::Nil => return Ok(None),
        Value::Array(parts) if parts.len() == 3 => parts,
        other => return Err(Error::Protocol(format!("expected [id, topic, body], got {other:?}"))),
    };
    let mut fields = parts.into_iter().map(|v| match v {
        Value::BulkString(bytes) => Ok(bytes),
        other => Err(Error::Protocol(format!("expected a string in a job, got {other:?}"))),
    });
    let mut next = || fields.next().unwrap_or_else(|| Err(Error::Protocol("short job reply".into())));
    let (id, topic, body) = (next()?, next()?, next()?);
    // Ids and topics we write are UTF-8; one written by a foreign client that
    // is not must still reach the consumer, so it is converted, not refused.
    Ok(Some(crate::Message {
        id: String::from_utf8_lossy(&id).into_owned(),
        topic: String::from_utf8_lossy(&topic).into_owned(),
        body,
    }))
}
