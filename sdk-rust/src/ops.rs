//! What each operation sends to Redis and how its reply reads, shared by the
//! blocking client ([`crate::Delayer`]) and the async one
//! ([`crate::aio::Delayer`]), which differ only in how they wait.

use crate::error::{Error, IdTaken, Result, Taken};
use crate::keys::Keys;
use crate::scripts;
use crate::validate;
use crate::{DeadLetter, Job, JobRef, Reserved};
use redis::{Cmd, Pipeline, ScriptInvocation, ToRedisArgs, Value};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One thing to send to Redis; the clients run it, each its own way.
pub(crate) enum Request {
    /// A script call.
    Script(ScriptInvocation<'static>),
    /// A pipeline (push_many).
    Pipeline(Pipeline),
    /// A command Redis answers only when there is something, or after this
    /// wait (`None`: no limit): a connection's read timeout must not cut it.
    Blocking(Cmd, Option<Duration>),
}

impl From<ScriptInvocation<'static>> for Request {
    fn from(inv: ScriptInvocation<'static>) -> Self {
        Request::Script(inv)
    }
}

/// How many jobs one push_many.lua call takes.
pub(crate) const JOBS_PER_CALL: usize = 100;
/// How many calls `push_many` pipelines per round trip.
pub(crate) const CALLS_PER_PIPELINE: usize = 10;

/// A job's values after push.lua's ARGV[1..3] (id, topic, body), checked
/// against the protocol's input rules: delay ms, lifetime ms, max_attempts,
/// backoff, backoff_ms, backoff_max_ms ("" for a retry setting not given).
pub(crate) struct PushArgs([String; 6]);

impl ToRedisArgs for PushArgs {
    fn write_redis_args<W: ?Sized + redis::RedisWrite>(&self, out: &mut W) {
        self.0.iter().for_each(|a| out.write_arg(a.as_bytes()));
    }
}

pub(crate) fn validate_job(job: &Job) -> Result<PushArgs> {
    validate::name("topic", &job.topic)?;
    validate::name("id", &job.id)?;
    let delay = validate::delay_ms(job.delay)?.to_string();
    let lifetime = validate::ready_max_lifetime_ms(job.ready_max_lifetime)?.to_string();
    let max_attempts = job.max_attempts.map(validate::max_attempts).transpose()?.map(|n| n.to_string());
    let (kind, base, cap) = match &job.backoff {
        Some(b) => {
            let (kind, base, cap) = validate::backoff(b)?;
            (kind.to_string(), base.to_string(), cap.to_string())
        }
        None => Default::default(),
    };
    Ok(PushArgs([delay, lifetime, max_attempts.unwrap_or_default(), kind, base, cap]))
}

/// The duplicate policy push.lua and push_many.lua take.
fn policy(job: &Job) -> &'static str {
    if job.if_absent {
        "absent"
    } else {
        "replace"
    }
}

/// push.lua for one job.
pub(crate) fn push(keys: &Keys, job: &Job) -> Result<ScriptInvocation<'static>> {
    let args = validate_job(job)?;
    let mut inv = scripts::PUSH.prepare_invoke();
    inv.key(keys.job_pool()).key(keys.job_bucket(&job.id)).key(keys.scheduled_count());
    inv.arg(&job.id).arg(&job.topic).arg(&job.body[..]).arg(args).arg(policy(job)).arg(keys.wake());
    Ok(inv)
}

/// push_many.lua for many jobs: calls of up to [`JOBS_PER_CALL`]
/// consecutive jobs with the same duplicate policy, [`CALLS_PER_PIPELINE`]
/// calls per pipeline, each pipeline starting with a SCRIPT LOAD (a no-op
/// unless Redis lost the script). Everything is validated before anything is
/// built. Each pipeline answers with one list of replies per call, one reply
/// per job: read them with [`PushedMany`].
pub(crate) fn push_many(keys: &Keys, jobs: &[Job]) -> Result<Vec<Pipeline>> {
    let args = jobs.iter().map(validate_job).collect::<Result<Vec<_>>>()?;
    let mut calls: Vec<&[Job]> = Vec::new();
    let mut start = 0;
    for end in 1..=jobs.len() {
        let full = end - start == JOBS_PER_CALL;
        if end == jobs.len() || full || jobs[end].if_absent != jobs[start].if_absent {
            calls.push(&jobs[start..end]);
            start = end;
        }
    }
    let mut done = 0;
    let pipes = calls
        .chunks(CALLS_PER_PIPELINE)
        .map(|calls| {
            let mut pipe = redis::pipe();
            pipe.cmd("SCRIPT").arg("LOAD").arg(scripts::PUSH_MANY_SRC).ignore();
            for call_jobs in calls {
                let call = pipe.cmd("EVALSHA").arg(scripts::PUSH_MANY.get_hash()).arg(2);
                call.arg(keys.job_pool()).arg(keys.scheduled_count());
                call.arg(keys.bucket_prefix()).arg(policy(&call_jobs[0])).arg(keys.wake());
                for (job, args) in call_jobs.iter().zip(&args[done..]) {
                    call.arg(&job.id).arg(&job.topic).arg(&job.body[..]).arg(args);
                }
                done += call_jobs.len();
            }
            pipe
        })
        .collect();
    Ok(pipes)
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
            let mut p = array(reply, 2, "{topic, due}")?.into_iter();
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

/// Collects push_many's replies, pipeline after pipeline, for its jobs.
pub(crate) struct PushedMany<'a> {
    jobs: &'a [Job],
    due: Vec<Option<SystemTime>>,
    taken: Vec<Taken>,
}

impl<'a> PushedMany<'a> {
    pub(crate) fn new(jobs: &'a [Job]) -> Self {
        PushedMany { jobs, due: Vec::with_capacity(jobs.len()), taken: Vec::new() }
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

/// pop.lua for one topic.
pub(crate) fn pop(keys: &Keys, topic: &str) -> Result<ScriptInvocation<'static>> {
    validate::name("topic", topic)?;
    let mut inv = scripts::POP.prepare_invoke();
    inv.key(keys.ready_queue(topic)).key(keys.malformed()).key(keys.job_pool()).key(keys.reserved());
    inv.arg(keys.bucket_prefix());
    Ok(inv)
}

/// take.lua for an id BRPOP returned (raw bytes: used exactly as stored).
pub(crate) fn take(keys: &Keys, id: &[u8]) -> ScriptInvocation<'static> {
    let mut inv = scripts::TAKE.prepare_invoke();
    inv.key(keys.job_bucket_bytes(id)).key(keys.malformed()).key(keys.job_pool()).key(keys.reserved()).arg(id);
    inv
}

/// remove.lua for one id.
pub(crate) fn remove(keys: &Keys, id: &str) -> Result<ScriptInvocation<'static>> {
    validate::name("id", id)?;
    let mut inv = scripts::REMOVE.prepare_invoke();
    inv.key(keys.job_pool()).key(keys.job_bucket(id)).key(keys.scheduled_count()).arg(id);
    Ok(inv)
}

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
pub(crate) fn release(
    keys: &Keys,
    job: JobRef<'_>,
    ending: Ending,
    error: &str,
) -> Result<ScriptInvocation<'static>> {
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

/// reschedule.lua for one id.
pub(crate) fn reschedule(keys: &Keys, id: &str, delay: Duration) -> Result<ScriptInvocation<'static>> {
    validate::name("id", id)?;
    let delay_ms = validate::delay_ms(delay)?;
    let mut inv = scripts::RESCHEDULE.prepare_invoke();
    inv.key(keys.job_pool()).key(keys.job_bucket(id)).arg(id).arg(delay_ms).arg(keys.wake());
    Ok(inv)
}

fn dead_call(keys: &Keys, topic: &str, action: &str) -> ScriptInvocation<'static> {
    let mut inv = scripts::DEAD.prepare_invoke();
    inv.key(keys.dead(topic)).key(keys.job_pool()).key(keys.scheduled_count());
    inv.arg(keys.bucket_prefix()).arg(topic).arg(action);
    inv
}

/// dead.lua "list".
pub(crate) fn dead_list(keys: &Keys, topic: &str, start: usize, count: usize) -> Result<ScriptInvocation<'static>> {
    validate::name("topic", topic)?;
    let count = validate::dead_count(count)?;
    let mut inv = dead_call(keys, topic, "list");
    inv.arg(start).arg(count);
    Ok(inv)
}

/// Which dead letters to re-queue or purge.
pub(crate) enum DeadAction {
    /// Back into the pool, due now.
    Requeue,
    /// Deleted.
    Purge,
}

/// dead.lua "requeue" / "purge": the calls for `ids` (at most
/// [`validate::MAX_DEAD_PER_CALL`] per call), or with `None` one call taking
/// that many from the oldest end, to repeat while it takes a full count.
pub(crate) fn dead_drain(
    keys: &Keys,
    topic: &str,
    action: DeadAction,
    ids: Option<&[&str]>,
) -> Result<Vec<ScriptInvocation<'static>>> {
    validate::name("topic", topic)?;
    let action = match action {
        DeadAction::Requeue => "requeue",
        DeadAction::Purge => "purge",
    };
    let Some(ids) = ids else {
        let mut inv = dead_call(keys, topic, action);
        inv.arg(validate::MAX_DEAD_PER_CALL);
        return Ok(vec![inv]);
    };
    ids.iter().try_for_each(|id| validate::name("id", id))?;
    Ok(ids
        .chunks(validate::MAX_DEAD_PER_CALL)
        .map(|chunk| {
            let mut inv = dead_call(keys, topic, action);
            inv.arg(0).arg(chunk);
            inv
        })
        .collect())
}

/// Whether a dead.lua call that took `taken` entries is to be made again:
/// only when draining all (no ids) and it took a full count.
pub(crate) fn drain_again(ids: Option<&[&str]>, taken: u64) -> bool {
    ids.is_none() && taken >= validate::MAX_DEAD_PER_CALL as u64
}

/// dead.lua's `{done, taken}`.
pub(crate) fn parse_drained(reply: Value) -> Result<(u64, u64)> {
    let mut parts = array(reply, 2, "{done, taken}")?.into_iter();
    Ok((int(parts.next())?, int(parts.next())?))
}

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
    Ok(Some(crate::Message { id: text(p.next())?, topic: text(p.next())?, body: bytes(p.next())? }))
}

/// A script's array reply of exactly `n` items; nil is `None`.
fn array(reply: Value, n: usize, what: &str) -> Result<Vec<Value>> {
    match reply {
        Value::Array(parts) if parts.len() == n => Ok(parts),
        other => Err(Error::Protocol(format!("expected {what}, got {other:?}"))),
    }
}

fn bytes(v: Option<Value>) -> Result<Vec<u8>> {
    match v {
        Some(Value::BulkString(b)) => Ok(b),
        Some(Value::SimpleString(s)) => Ok(s.into_bytes()),
        other => Err(Error::Protocol(format!("expected a string, got {other:?}"))),
    }
}

/// Ids and topics we write are UTF-8; one written by a foreign client that
/// is not must still reach the consumer, so it is converted, not refused.
fn text(v: Option<Value>) -> Result<String> {
    Ok(String::from_utf8_lossy(&bytes(v)?).into_owned())
}

fn int<T: TryFrom<i64>>(v: Option<Value>) -> Result<T> {
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
fn reserved_job(reply: Value) -> Result<Reserved> {
    let mut p = array(reply, 7, "a reserved job")?.into_iter();
    Ok(Reserved {
        id: text(p.next())?,
        topic: text(p.next())?,
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
            Ok(DeadLetter {
                id: text(p.next())?,
                topic: text(p.next())?,
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
