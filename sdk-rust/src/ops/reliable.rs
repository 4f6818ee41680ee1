//! The at-least-once calls: reserve (one or a batch, acks riding along),
//! ack, touch, release and bury.

use super::replies::{parse_ack, parse_release, parse_reserve, parse_reserve_many, parse_touch};
use super::{check_topic, id_of, Op};
use crate::error::{Error, Result};
use crate::keys::Names;
use crate::scripts;
use crate::validate;
use crate::{JobRef, Reserved};
use redis::ScriptInvocation;
use std::time::{Duration, SystemTime};

/// reserve.lua's keys and bucket prefix for `topic`.
fn reserve_call(names: &Names, topic: &str) -> ScriptInvocation<'static> {
    let mut inv = scripts::RESERVE.prepare_invoke();
    inv.key(names.ready(topic)).key(names.reserved(topic)).key(names.malformed(topic));
    inv.key(names.receipt_seq(topic)).key(names.pool(topic)).key(names.outcomes(topic));
    inv.arg(names.bucket_prefix(topic));
    inv
}

/// reserve.lua for one job of `topic` (no batch: ARGV[3] "", then the wake
/// channel).
pub(crate) fn reserve_script(names: &Names, topic: &str, ttr: Duration) -> Result<ScriptInvocation<'static>> {
    check_topic(names, topic)?;
    let ttr_ms = validate::ttr_ms(ttr)?;
    let mut inv = reserve_call(names, topic);
    inv.arg(ttr_ms).arg("").arg(names.wake());
    Ok(inv)
}

/// reserve: reserve.lua for one job of `topic`.
pub(crate) fn reserve<'a>(names: &'a Names, topic: &'a str, ttr: Duration) -> Result<Op<'a, Option<Reserved>>> {
    Ok(Op::call(reserve_script(names, topic, ttr)?, parse_reserve))
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
) -> Result<Op<'a, (Vec<bool>, Vec<Reserved>)>> {
    check_topic(names, topic)?;
    let ttr_ms = validate::ttr_ms(ttr)?;
    let n = validate::reserve_count(n)?;
    let rides: Vec<bool> = acks.iter().map(|a| names.one_call(topic, a.topic)).collect();
    let mut inv = reserve_call(names, topic);
    inv.arg(ttr_ms).arg(n);
    let mut alone = Vec::new();
    for (job, rides) in acks.iter().zip(&rides) {
        match rides {
            true => {
                let (id, receipt) = job_ref(*job)?;
                inv.arg(id).arg(receipt);
            }
            false => alone.push(ack(names, *job)?),
        }
    }
    inv.arg(names.wake());
    let riding = rides.iter().filter(|r| **r).count();
    Ok(Op::all(alone).then(move |alone| {
        let call = Op::call(inv, move |reply| parse_reserve_many(reply, riding));
        Ok(call.then(move |(flags, jobs)| {
            // Every ack's flag, in the order given.
            let (mut flags, mut alone) = (flags.into_iter(), alone.into_iter());
            let flags = rides.iter().map(|r| if *r { flags.next() } else { alone.next() }.unwrap_or(false)).collect();
            Ok(Op::done((flags, jobs)))
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
    let mut inv = scripts::ACK.prepare_invoke();
    inv.key(names.reserved(topic)).key(names.bucket_bytes(topic, id)).key(names.pool(topic));
    inv.key(names.outcomes(topic)).arg(id).arg(receipt);
    Ok(Op::call(inv, parse_ack))
}

/// touch.lua for one reservation: its deadline becomes now + `ttr` (a
/// shorter ttr brings it in: touch.lua announces it).
pub(crate) fn touch<'a>(names: &'a Names, job: JobRef<'a>, ttr: Duration) -> Result<Op<'a, Option<SystemTime>>> {
    let (id, receipt) = job_ref(job)?;
    let topic = ref_topic(names, job, "touch")?;
    let ttr_ms = validate::ttr_ms(ttr)?;
    let mut inv = scripts::TOUCH.prepare_invoke();
    inv.key(names.reserved(topic)).key(names.bucket_bytes(topic, id)).key(names.pool(topic));
    inv.arg(id).arg(receipt).arg(ttr_ms).arg(names.wake());
    Ok(Op::call(inv, parse_touch))
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
    let (dead_key, dead_prefix) = names.release_dead(topic);
    let mut inv = scripts::RELEASE.prepare_invoke();
    inv.key(names.reserved(topic)).key(names.pool(topic)).key(names.malformed(topic)).key(dead_key);
    inv.key(names.outcomes(topic));
    inv.arg(names.bucket_prefix(topic)).arg(dead_prefix).arg(action);
    inv.arg("held").arg(id).arg(receipt).arg(names.wake()).arg(error_text(error));
    Ok(Op::call(inv, parse_release))
}
