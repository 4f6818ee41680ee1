//! The at-least-once calls: reserve (one or a batch, acks riding along),
//! ack, touch, release and bury.

use super::replies::{parse_ack, parse_release, parse_reserve, parse_reserve_many, parse_touch, FlowWait};
use super::{check_topic, id_of, Op};
use crate::error::{Error, Result};
use crate::keys::Names;
use crate::validate;
use crate::{JobRef, Reserved};
use delayer_protocol::calls;
use std::time::{Duration, SystemTime};

/// reserve.lua's batch answer: a flag per ack, the jobs, and a paused
/// topic's wait instruction.
pub(crate) type ReservedBatch = (Vec<bool>, Vec<Reserved>, Option<FlowWait>);

/// reserve: reserve.lua for one job of `topic`.
pub(crate) fn reserve<'a>(names: &'a Names, topic: &'a str, ttr: Duration) -> Result<Op<'a, Option<Reserved>>> {
    check_topic(names, topic)?;
    Ok(Op::call(calls::reserve(names, topic, validate::ttr_ms(ttr)?, None), parse_reserve))
}

/// reserve.lua in batch mode: first acks `acks` (each as ack.lua would),
/// then reserves up to `n` jobs of `topic`, in one call. Acks a call on
/// `topic` cannot carry (the per-topic layout's of other topics: one call
/// touches one topic's keys; a job ref without a topic is taken as one of
/// `topic`) are sent first, each as an ack.lua call of its own.
pub(crate) fn reserve_many<'a>(
    names: &'a Names,
    topic: &'a str,
    ttr: Duration,
    n: usize,
    acks: &[JobRef<'a>],
) -> Result<Op<'a, ReservedBatch>> {
    check_topic(names, topic)?;
    let ttr_ms = validate::ttr_ms(ttr)?;
    let n = validate::reserve_count(n)?;
    let rides: Vec<bool> = acks.iter().map(|a| names.one_call(topic, a.topic)).collect();
    let (mut riding, mut alone) = (Vec::new(), Vec::new());
    for (job, rides) in acks.iter().zip(&rides) {
        match rides {
            true => riding.push(job_ref(*job)?),
            false => alone.push(ack(names, *job)?),
        }
    }
    let inv = calls::reserve(names, topic, ttr_ms, Some((n, &riding)));
    let riding = riding.len();
    Ok(Op::all(alone).then(move |alone| {
        let call = Op::call(inv, move |reply| parse_reserve_many(reply, riding));
        Ok(call.then(move |(flags, jobs, flow)| {
            // Every ack's flag, in the order given.
            let (mut flags, mut alone) = (flags.into_iter(), alone.into_iter());
            let flags = rides.iter().map(|r| if *r { flags.next() } else { alone.next() }.unwrap_or(false)).collect();
            Ok(Op::done((flags, jobs, flow)))
        }))
    }))
}

/// The id (its exact bytes: [`JobRef::id_bytes`]) and receipt of a job ref.
fn job_ref<'a>(job: JobRef<'a>) -> Result<(&'a [u8], &'a str)> {
    let id = id_of(job.id_bytes())?;
    if job.receipt == Some("") {
        return Err(Error::InvalidArgument("receipt must not be empty: give none for any current reservation".into()));
    }
    Ok((id, job.receipt.unwrap_or("")))
}

/// The topic of a job ref (see [`Names::id_topic`]).
fn ref_topic<'a>(names: &Names, job: JobRef<'a>, call: &str) -> Result<&'a str> {
    Ok(names.id_topic(job.topic, call, &format!("the Reserved job, or JobRef::in_topic, with {call}"))?)
}

/// ack.lua for one reservation.
pub(crate) fn ack<'a>(names: &Names, job: JobRef<'_>) -> Result<Op<'a, bool>> {
    let (id, receipt) = job_ref(job)?;
    let topic = ref_topic(names, job, "ack")?;
    Ok(Op::call(calls::ack(names, topic, id, receipt), parse_ack))
}

/// touch.lua for one reservation: its deadline becomes now + `ttr` (a
/// shorter ttr brings it in: touch.lua announces it).
pub(crate) fn touch<'a>(names: &'a Names, job: JobRef<'a>, ttr: Duration) -> Result<Op<'a, Option<SystemTime>>> {
    let (id, receipt) = job_ref(job)?;
    let topic = ref_topic(names, job, "touch")?;
    Ok(Op::call(calls::touch(names, topic, id, receipt, validate::ttr_ms(ttr)?), parse_touch))
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

impl Ending {
    /// A release: due again after `delay`, or after the job's backoff.
    pub(crate) fn after(delay: Option<Duration>) -> Ending {
        delay.map_or(Ending::Backoff, Ending::After)
    }
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
/// `error` ("": none) as the job's last_error. Whether the reservation was
/// held.
pub(crate) fn release<'a>(names: &'a Names, job: JobRef<'a>, ending: Ending, error: &str) -> Result<Op<'a, bool>> {
    let (id, receipt) = job_ref(job)?;
    let call = if matches!(ending, Ending::Bury) { "bury" } else { "release" };
    let topic = ref_topic(names, job, call)?;
    let action = match ending {
        Ending::After(delay) => validate::delay_ms(delay)?.to_string(),
        Ending::Backoff => "backoff".into(),
        Ending::Bury => "bury".into(),
    };
    Ok(Op::call(calls::release(names, topic, id, receipt, &action, error_text(error)), parse_release))
}
