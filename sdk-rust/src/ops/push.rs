//! push and push_many: validating a job, building the calls, reading replies.

use super::replies::{parse_push, ParsePushMany};
use super::{Op, Request};
use crate::connection::Batch;
use crate::durable;
use crate::error::Result;
use crate::keys::Names;
use crate::scripts;
use crate::validate;
use crate::Job;
use redis::ToRedisArgs;
use std::time::{Duration, SystemTime};

/// How many jobs one push_many.lua call takes.
pub(crate) const JOBS_PER_CALL: usize = 100;
/// How many calls `push_many` pipelines per round trip.
pub(crate) const CALLS_PER_PIPELINE: usize = 10;

/// A job's values after push.lua's ARGV[1..3] (id, topic, body), checked
/// against the protocol's input rules: delay ms, lifetime ms, max_attempts,
/// backoff, backoff_ms, backoff_max_ms ("" for a retry setting not given),
/// then traceparent ("" when not given; push.lua's ARGV[12], after the
/// policy and the wake channel, push_many.lua's tenth value per job).
pub(crate) struct PushArgs([String; 6], String);

impl ToRedisArgs for PushArgs {
    fn write_redis_args<W: ?Sized + redis::RedisWrite>(&self, out: &mut W) {
        // push_many.lua's order: the ten values per job end with it.
        self.0.iter().chain([&self.1]).for_each(|a| out.write_arg(a.as_bytes()));
    }
}

pub(crate) fn validate_job(names: &Names, job: &Job) -> Result<PushArgs> {
    super::check_topic(names, &job.topic)?;
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
    let traceparent = crate::trace::outgoing(job.traceparent.as_deref())?;
    Ok(PushArgs([delay, lifetime, max_attempts.unwrap_or_default(), kind, base, cap], traceparent))
}

/// The duplicate policy push.lua and push_many.lua take.
fn policy(job: &Job) -> &'static str {
    if job.if_absent {
        "absent"
    } else {
        "replace"
    }
}

/// push.lua for one job (then, for a durable client, `WAIT`: see
/// [`crate::durable`]).
pub(crate) fn push<'a>(names: &'a Names, job: &'a Job, durable: Option<Duration>) -> Result<Op<'a, SystemTime>> {
    let args = validate_job(names, job)?;
    let topic = &job.topic;
    let mut inv = names.pick(&scripts::PUSH, &scripts::PUSH_TOPIC).prepare_invoke();
    inv.key(names.pool(topic)).key(names.bucket(topic, &job.id)).key(names.scheduled_count());
    inv.arg(&job.id).arg(topic).arg(&job.body[..]).arg(&args.0[..]).arg(policy(job)).arg(names.wake());
    inv.arg(&args.1);
    let written = durable::written(Op::call(inv, Ok), durable, vec![names.pool(topic)]);
    Ok(written.then(move |(reply, acked)| {
        let due = parse_push(job, reply)?;
        Ok(Op::done(durable::check(acked, vec![due], durable, due)?))
    }))
}

/// push_many.lua for many jobs: calls of up to [`JOBS_PER_CALL`]
/// consecutive jobs with the same duplicate policy that one call may write
/// ([`Names::one_call`]: in the per-topic layout, of one topic),
/// [`CALLS_PER_PIPELINE`] calls per pipeline, each starting with a SCRIPT
/// LOAD (a no-op unless Redis lost the script: resending a pipeline whose
/// first calls ran would push their jobs twice). Everything is validated
/// before anything is sent; each pipeline's replies, one list per call, one
/// reply per job, are read by [`ParsePushMany`]. A durable client waits
/// after each pipeline on the nodes of the pools it wrote.
pub(crate) fn push_many<'a>(
    names: &'a Names,
    jobs: &'a [Job],
    durable: Option<Duration>,
) -> Result<Op<'a, Vec<SystemTime>>> {
    let args = jobs.iter().map(|job| validate_job(names, job)).collect::<Result<Vec<_>>>()?;
    let mut calls: Vec<&[Job]> = Vec::new();
    let mut start = 0;
    for end in 1..=jobs.len() {
        let full = end - start == JOBS_PER_CALL;
        if end == jobs.len()
            || full
            || jobs[end].if_absent != jobs[start].if_absent
            || !names.one_call(&jobs[start].topic, Some(&jobs[end].topic))
        {
            calls.push(&jobs[start..end]);
            start = end;
        }
    }
    let mut done = 0;
    let (script, source) = names.pick(
        (&*scripts::PUSH_MANY, scripts::PUSH_MANY_SRC),
        (&*scripts::PUSH_MANY_TOPIC, scripts::PUSH_MANY_TOPIC_SRC),
    );
    let pipes: Vec<_> = calls
        .chunks(CALLS_PER_PIPELINE)
        .map(|calls| {
            let mut batch = Batch::new();
            let mut pools = Vec::new();
            // On a cluster SCRIPT LOAD goes to every node.
            batch.add_ignored(redis::cmd("SCRIPT").arg("LOAD").arg(source).clone());
            for call_jobs in calls {
                let topic = &call_jobs[0].topic;
                let counts = names.scheduled_count();
                let mut call = redis::cmd("EVALSHA");
                call.arg(script.get_hash()).arg(1 + usize::from(counts.is_some()));
                call.arg(names.pool(topic)).arg(counts);
                call.arg(names.bucket_prefix(topic)).arg(policy(&call_jobs[0])).arg(names.wake());
                for (job, args) in call_jobs.iter().zip(&args[done..]) {
                    call.arg(&job.id).arg(&job.topic).arg(&job.body[..]).arg(args);
                }
                done += call_jobs.len();
                batch.add(call);
                pools.push(names.pool(topic));
            }
            durable::written(Op::call(Request::Batch(batch), Ok), durable, pools)
        })
        .collect();
    // Each pipeline's replies are read as they come: a bad one stops the
    // rest, and a million jobs' replies are never all held at once.
    let pushed = Op::fold(pipes, (ParsePushMany::new(jobs), u64::MAX), |(pushed, least_acked), (reply, acked)| {
        *least_acked = acked.min(*least_acked);
        pushed.add(reply)
    });
    Ok(pushed.map(move |(pushed, least_acked)| {
        let due = pushed.finish()?;
        durable::check(least_acked, due.clone(), durable, due)
    }))
}
