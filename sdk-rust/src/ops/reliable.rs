//! The at-least-once calls: reserve (one or a batch, acks riding along),
//! ack, touch, release and bury.

use super::replies::{array, parse_flag, reserved_job};
use crate::error::{Error, Result};
use crate::keys::Keys;
use crate::scripts;
use crate::validate;
use crate::{JobRef, Reserved};
use redis::{ScriptInvocation, Value};
use std::time::Duration;

/// reserve.lua for one topic.
pub(crate) fn reserve(keys: &Keys, topic: &str, ttr: Duration) -> Result<ScriptInvocation<'static>> {
    validate::name("topic", topic)?;
    let ttr_ms = validate::ttr_ms(ttr)?;
    let mut inv = scripts::RESERVE.prepare_invoke();
    inv.key(keys.ready_queue(topic)).key(keys.reserved()).key(keys.malformed()).key(keys.receipt_seq());
    inv.key(keys.job_pool()).arg(keys.bucket_prefix()).arg(ttr_ms);
    Ok(inv)
}

/// reserve.lua in batch mode: first acks `acks` (each as ack.lua would),
/// then reserves up to `n` jobs of `topic`, in one call.
pub(crate) fn reserve_many(
    keys: &Keys,
    topic: &str,
    ttr: Duration,
    n: usize,
    acks: &[JobRef<'_>],
) -> Result<ScriptInvocation<'static>> {
    validate::name("topic", topic)?;
    let ttr_ms = validate::ttr_ms(ttr)?;
    let n = validate::reserve_count(n)?;
    let mut inv = scripts::RESERVE.prepare_invoke();
    inv.key(keys.ready_queue(topic)).key(keys.reserved()).key(keys.malformed()).key(keys.receipt_seq());
    inv.key(keys.job_pool()).arg(keys.bucket_prefix()).arg(ttr_ms).arg(n);
    for job in acks {
        let (id, receipt) = job_ref(*job)?;
        inv.arg(id).arg(receipt);
    }
    Ok(inv)
}

/// reserve.lua's batch reply `{acks, jobs}`: one flag per ack sent (`acks`
/// of them), then the jobs reserved.
pub(crate) fn parse_reserved_many(reply: Value, acks: usize) -> Result<(Vec<bool>, Vec<Reserved>)> {
    let mut p = array(reply, 2, "{acks, jobs}")?.into_iter();
    let (Some(Value::Array(flags)), Some(jobs)) = (p.next(), p.next()) else {
        return Err(Error::Protocol("reserve_many: expected a list of ack results".into()));
    };
    if flags.len() != acks {
        return Err(Error::Protocol(format!("reserve_many: {} ack results for {acks} acks", flags.len())));
    }
    let flags = flags.into_iter().map(parse_flag).collect::<Result<Vec<_>>>()?;
    let jobs = match jobs {
        Value::Array(jobs) => jobs.into_iter().map(reserved_job).collect::<Result<Vec<_>>>()?,
        // An empty table reaches Redis as an empty array, but a nil is no harm.
        Value::Nil => Vec::new(),
        other => return Err(Error::Protocol(format!("reserve_many: expected a list of jobs, got {other:?}"))),
    };
    Ok((flags, jobs))
}

fn job_ref<'a>(job: JobRef<'a>) -> Result<(&'a str, &'a str)> {
    validate::name("id", job.id)?;
    if job.receipt == Some("") {
        return Err(Error::InvalidArgument("receipt must not be empty: give none for any current reservation".into()));
    }
    Ok((job.id, job.receipt.unwrap_or("")))
}

/// ack.lua for one reservation.
pub(crate) fn ack(keys: &Keys, job: JobRef<'_>) -> Result<ScriptInvocation<'static>> {
    let (id, receipt) = job_ref(job)?;
    let mut inv = scripts::ACK.prepare_invoke();
    inv.key(keys.reserved()).key(keys.job_bucket(id)).key(keys.job_pool()).arg(id).arg(receipt);
    Ok(inv)
}

/// touch.lua for one reservation: its deadline becomes now + `ttr`.
pub(crate) fn touch(keys: &Keys, job: JobRef<'_>, ttr: Duration) -> Result<ScriptInvocation<'static>> {
    let (id, receipt) = job_ref(job)?;
    let ttr_ms = validate::ttr_ms(ttr)?;
    let mut inv = scripts::TOUCH.prepare_invoke();
    inv.key(keys.reserved()).key(keys.job_bucket(id)).key(keys.job_pool());
    inv.arg(id).arg(receipt).arg(ttr_ms);
    Ok(inv)
}

/// What release.lua does with a job whose reservation ends.
pub(crate) enum Ending {
    /// Due again after this delay.
    After(Duration),
    /// Due again after the job's own backoff.
    Backoff,
    /// To dead letters.
    Bury,
}

/// The most bytes of a failed attempt's error text release.lua keeps.
pub(crate) const MAX_ERROR_BYTES: usize = 1000;

/// `error` cut to [`MAX_ERROR_BYTES`] at a character boundary, so what the
/// bucket keeps is still UTF-8 (the script would cut bytes blindly).
fn error_text(error: &str) -> &str {
    let mut end = error.len().min(MAX_ERROR_BYTES);
    while !error.is_char_boundary(end) {
        end -= 1;
    }
    &error[..end]
}

/// release.lua ("held") for one reservation: release or bury, recording
/// `error` ("": none) as the job's last_error.
pub(crate) fn release(keys: &Keys, job: JobRef<'_>, ending: Ending, error: &str) -> Result<ScriptInvocation<'static>> {
    let (id, receipt) = job_ref(job)?;
    let action = match ending {
        Ending::After(delay) => validate::delay_ms(delay)?.to_string(),
        Ending::Backoff => "backoff".into(),
        Ending::Bury => "bury".into(),
    };
    let mut inv = scripts::RELEASE.prepare_invoke();
    inv.key(keys.reserved()).key(keys.job_pool()).key(keys.malformed()).key(keys.scheduled_count());
    inv.arg(keys.bucket_prefix()).arg(keys.dead_prefix()).arg(action);
    inv.arg("held").arg(id).arg(receipt).arg(keys.wake()).arg(error_text(error));
    Ok(inv)
}

/// Whether release.lua's "held" reply says the reservation was held (a due
/// time or "dead") or not (nil).
pub(crate) fn parse_released(reply: Value) -> Result<bool> {
    match reply {
        Value::Nil => Ok(false),
        Value::BulkString(_) | Value::SimpleString(_) => Ok(true),
        other => Err(Error::Protocol(format!("release returned {other:?}"))),
    }
}
