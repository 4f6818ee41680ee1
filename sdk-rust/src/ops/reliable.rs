//! The at-least-once calls: reserve (one or a batch, acks riding along),
//! ack, touch, release and bury.

use super::index::IndexNote;
use super::replies::{array, parse_due, parse_flag, reserved_job, text};
use super::{check_topic, topic_of};
use crate::error::{Error, Result};
use crate::keys::Names;
use crate::scripts;
use crate::validate;
use crate::{JobRef, Reserved};
use redis::{ScriptInvocation, Value};
use std::time::{Duration, SystemTime};

/// reserve.lua's keys and bucket prefix for `topic`.
fn reserve_call(names: &Names, topic: &str) -> ScriptInvocation<'static> {
    let mut inv = scripts::RESERVE.prepare_invoke();
    inv.key(names.ready(topic)).key(names.reserved(topic)).key(names.malformed(topic));
    inv.key(names.receipt_seq(topic)).key(names.pool(topic)).key(names.outcomes(topic));
    inv.arg(names.bucket_prefix(topic));
    inv
}

/// reserve.lua for one topic.
pub(crate) fn reserve(names: &Names, topic: &str, ttr: Duration) -> Result<ScriptInvocation<'static>> {
    check_topic(names, topic)?;
    let ttr_ms = validate::ttr_ms(ttr)?;
    let mut inv = reserve_call(names, topic);
    inv.arg(ttr_ms);
    Ok(inv)
}

/// reserve.lua in batch mode: first acks `acks` (each as ack.lua would),
/// then reserves up to `n` jobs of `topic`, in one call.
/// In the per-topic layout the acks must be jobs of `topic` (one call
/// touches one topic's keys; [`AckPlan`] sends the others alone); a job ref
/// without a topic is taken as one.
pub(crate) fn reserve_many(
    names: &Names,
    topic: &str,
    ttr: Duration,
    n: usize,
    acks: &[JobRef<'_>],
) -> Result<ScriptInvocation<'static>> {
    check_topic(names, topic)?;
    let ttr_ms = validate::ttr_ms(ttr)?;
    let n = validate::reserve_count(n)?;
    let mut inv = reserve_call(names, topic);
    inv.arg(ttr_ms).arg(n);
    for job in acks {
        if names.index().is_some() && job.topic.is_some_and(|t| t != topic) {
            return Err(Error::InvalidArgument(format!(
                "reserve_many on {topic:?} cannot ack job {:?} of topic {:?} in the per-topic layout: ack it alone",
                job.id,
                job.topic.unwrap_or_default()
            )));
        }
        let (id, receipt) = job_ref(*job)?;
        inv.arg(id).arg(receipt);
    }
    Ok(inv)
}

/// Which acks of a reserve_many ride along in its call and which go alone:
/// in the per-topic layout one call touches one topic's keys, so an ack of
/// another topic (a Worker's, holding jobs of several topics) is sent as an
/// ack.lua call of its own; in the classic layout every ack rides along.
pub(crate) struct AckPlan<'a> {
    /// Acks for the reserve_many call.
    pub(crate) riding: Vec<JobRef<'a>>,
    /// Acks sent alone, before it.
    pub(crate) alone: Vec<JobRef<'a>>,
    /// For each ack, in order: whether it rides along.
    rides: Vec<bool>,
}

impl<'a> AckPlan<'a> {
    pub(crate) fn new(names: &Names, topic: &str, acks: &[JobRef<'a>]) -> AckPlan<'a> {
        let rides: Vec<bool> =
            acks.iter().map(|a| names.index().is_none() || a.topic.is_none_or(|t| t == topic)).collect();
        let pick = |ride: bool| acks.iter().zip(&rides).filter(|(_, r)| **r == ride).map(|(a, _)| *a).collect();
        AckPlan { riding: pick(true), alone: pick(false), rides }
    }

    /// Every ack's flag, in the order given, from the call's and the lone ones'.
    pub(crate) fn merge(&self, riding: Vec<bool>, alone: Vec<bool>) -> Vec<bool> {
        let (mut riding, mut alone) = (riding.into_iter(), alone.into_iter());
        self.rides.iter().map(|r| if *r { riding.next() } else { alone.next() }.unwrap_or(false)).collect()
    }
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

/// The id (its exact bytes: [`JobRef::id_bytes`]) and receipt of a job ref.
fn job_ref<'a>(job: JobRef<'a>) -> Result<(&'a [u8], &'a str)> {
    let id = job.id_bytes();
    if id.is_empty() {
        return Err(Error::InvalidArgument("id must not be empty".into()));
    }
    if job.receipt == Some("") {
        return Err(Error::InvalidArgument("receipt must not be empty: give none for any current reservation".into()));
    }
    Ok((id, job.receipt.unwrap_or("")))
}

/// The topic of a job ref (see [`topic_of`]).
pub(crate) fn ref_topic<'a>(names: &Names, job: JobRef<'a>, call: &str) -> Result<&'a str> {
    topic_of(names, job.topic, call, &format!("the Reserved job, or JobRef::in_topic, with {call}"))
}

/// ack.lua for one reservation.
pub(crate) fn ack(names: &Names, job: JobRef<'_>) -> Result<ScriptInvocation<'static>> {
    let (id, receipt) = job_ref(job)?;
    let topic = ref_topic(names, job, "ack")?;
    let mut inv = scripts::ACK.prepare_invoke();
    inv.key(names.reserved(topic)).key(names.bucket_bytes(topic, id)).key(names.pool(topic));
    inv.key(names.outcomes(topic)).arg(id).arg(receipt);
    Ok(inv)
}

/// touch.lua for one reservation: its deadline becomes now + `ttr`.
pub(crate) fn touch(names: &Names, job: JobRef<'_>, ttr: Duration) -> Result<ScriptInvocation<'static>> {
    let (id, receipt) = job_ref(job)?;
    let topic = ref_topic(names, job, "touch")?;
    let ttr_ms = validate::ttr_ms(ttr)?;
    let mut inv = scripts::TOUCH.prepare_invoke();
    inv.key(names.reserved(topic)).key(names.bucket_bytes(topic, id)).key(names.pool(topic));
    inv.arg(id).arg(receipt).arg(ttr_ms);
    Ok(inv)
}

/// The index write after a touch that held its reservation: a shorter ttr
/// brings the deadline in, and the server must hear of it or it would
/// expire the reservation only at the index's later time.
pub(crate) fn touch_note(names: &Names, job: JobRef<'_>, deadline: Option<SystemTime>) -> Option<IndexNote> {
    IndexNote::new(names, job.topic?, Some(deadline?), false)
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
pub(crate) fn release(
    names: &Names,
    job: JobRef<'_>,
    ending: Ending,
    error: &str,
) -> Result<ScriptInvocation<'static>> {
    let (id, receipt) = job_ref(job)?;
    let call = if matches!(ending, Ending::Bury) { "bury" } else { "release" };
    let topic = ref_topic(names, job, call)?;
    let action = match ending {
        Ending::After(delay) => validate::delay_ms(delay)?.to_string(),
        Ending::Backoff => "backoff".into(),
        Ending::Bury => "bury".into(),
    };
    let (dead_key, dead_prefix) = names.release_dead(topic);
    let mut inv = scripts::RELEASE.prepare_invoke();
    inv.key(names.reserved(topic)).key(names.pool(topic)).key(names.malformed(topic)).key(dead_key);
    inv.key(names.outcomes(topic));
    inv.arg(names.bucket_prefix(topic)).arg(dead_prefix).arg(action);
    inv.arg("held").arg(id).arg(receipt).arg(names.script_wake()).arg(error_text(error));
    Ok(inv)
}

/// What release.lua's "held" reply says: whether the reservation was held
/// (a due time or "dead") or not (nil), and the new due time if any.
pub(crate) fn parse_released(reply: Value) -> Result<(bool, Option<SystemTime>)> {
    match reply {
        Value::Nil => Ok((false, None)),
        reply @ (Value::BulkString(_) | Value::SimpleString(_)) => {
            let outcome = text(Some(reply))?;
            Ok((true, if outcome == "dead" { None } else { Some(parse_due(&outcome)?) }))
        }
        other => Err(Error::Protocol(format!("release returned {other:?}"))),
    }
}
