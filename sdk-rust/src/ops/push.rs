//! push and push_many: validating a job, building the calls, reading replies.

use super::index::IndexNote;
use super::replies::{array, parse_due, text};
use super::Request;
use crate::connection::Batch;
use crate::error::{Error, IdTaken, Result, Taken};
use crate::keys::Names;
use crate::scripts;
use crate::validate;
use crate::Job;
use redis::{ToRedisArgs, Value};
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

/// How much earlier than its due time a push's pipelined index write is
/// (see [`push`]): the client's and Redis's clocks may disagree by this
/// much before a push costs a second round trip.
pub(crate) const CLOCK_MARGIN: Duration = Duration::from_millis(100);

/// push.lua's KEYS and ARGV for `job`: the one place they are listed.
fn push_keys_args(names: &Names, job: &Job) -> Result<(Vec<String>, Vec<Vec<u8>>)> {
    let args = validate_job(names, job)?;
    let topic = &job.topic;
    let mut keys = vec![names.pool(topic), names.bucket(topic, &job.id)];
    keys.extend(names.scheduled_count());
    let mut argv = vec![job.id.as_bytes().to_vec(), topic.as_bytes().to_vec(), job.body.clone()];
    argv.extend(args.0.into_iter().map(String::into_bytes));
    argv.push(policy(job).as_bytes().to_vec());
    argv.push(names.script_wake().into_bytes());
    argv.push(args.1.into_bytes());
    Ok((keys, argv))
}

/// A push as sent. In the per-topic layout the index write rides in the
/// same pipeline as push.lua, right after it, with a time from this
/// machine's clock ([`CLOCK_MARGIN`] before the due time, so normally not
/// later than the due time push.lua answers): one round trip, where waiting
/// for the answer first would take two (PROTOCOL.md, "The index write").
pub(crate) struct PushCall {
    pub(crate) request: Request,
    /// The index write sent with the script (per-topic layout).
    early: Option<IndexNote>,
    /// Sent again after Redis lost the script: whether the first sending's
    /// index write lowered the index is unknown, so the wake is sent.
    resent: bool,
}

/// push.lua for one job: a script call, or in the per-topic layout a
/// pipeline of `EVALSHA push.lua`, `ZADD <prefix>due LT CH`, `SADD
/// <prefix>topics`.
pub(crate) fn push(names: &Names, job: &Job) -> Result<PushCall> {
    let (keys, argv) = push_keys_args(names, job)?;
    let estimate = SystemTime::now() + job.delay;
    let early = IndexNote::new(names, &job.topic, Some(estimate.checked_sub(CLOCK_MARGIN).unwrap_or(estimate)), true);
    let request = match &early {
        Some(note) => {
            let mut call = redis::cmd("EVALSHA");
            call.arg(scripts::PUSH.get_hash()).arg(keys.len()).arg(&keys).arg(&argv);
            let mut batch = Batch::new();
            batch.add(call);
            note.add_write(names, &mut batch);
            Request::Batch(batch)
        }
        None => {
            let mut inv = scripts::PUSH.prepare_invoke();
            keys.iter().for_each(|k| {
                inv.key(k);
            });
            inv.arg(&argv);
            Request::Script(inv)
        }
    };
    Ok(PushCall { request, early, resent: false })
}

impl PushCall {
    /// Whether Redis had lost push.lua (`NOSCRIPT`): nothing was pushed; send
    /// [`PushCall::load`], then the call again.
    pub(crate) fn lost_script(&mut self, e: &Error) -> bool {
        let lost = self.early.is_some() && matches!(e, Error::Redis(e) if e.code() == Some("NOSCRIPT"));
        self.resent |= lost;
        lost
    }

    /// The keys the push writes that tell its node: the pool.
    pub(crate) fn written(names: &Names, job: &Job) -> Vec<String> {
        vec![names.pool(&job.topic)]
    }

    /// `SCRIPT LOAD` of push.lua.
    pub(crate) fn load() -> Request {
        let mut batch = Batch::new();
        batch.add_ignored(redis::cmd("SCRIPT").arg("LOAD").arg(scripts::PUSH_SRC).clone());
        Request::Batch(batch)
    }

    /// push.lua's reply for `job` read as [`parse_push`] does, and what is
    /// left to tell the index: a write again with the answered due time
    /// when the estimate came out later (the clocks disagree), or only the
    /// wake message when the early write lowered the index.
    pub(crate) fn read(&self, names: &Names, job: &Job, reply: Value) -> Result<(SystemTime, IndexFollowUp)> {
        let Some(early) = &self.early else {
            let due = parse_push(job, reply)?;
            return Ok((due, IndexFollowUp::Write(IndexNote::new(names, &job.topic, Some(due), true))));
        };
        let mut replies = array(reply, 1 + early.replies(), "{push.lua, ZADD, SADD}")?.into_iter();
        let script = replies.next().unwrap_or(Value::Nil);
        let lowered = early.read(names, replies);
        let due = parse_push(job, script)?;
        let follow = match IndexNote::new(names, &job.topic, Some(due), true) {
            Some(answered) if early.is_later_than(&answered) => IndexFollowUp::Write(Some(answered)),
            Some(answered) if lowered || self.resent => IndexFollowUp::Wake(answered),
            _ => IndexFollowUp::Write(None),
        };
        Ok((due, follow))
    }
}

/// What a push still tells the index once its reply is read.
pub(crate) enum IndexFollowUp {
    /// The index write (and wake) as after any call (`None`: nothing).
    Write(Option<IndexNote>),
    /// Only the wake message: the index already holds an early enough time.
    Wake(IndexNote),
}

/// push_many.lua for many jobs: calls of up to [`JOBS_PER_CALL`]
/// consecutive jobs with the same duplicate policy (and, in the per-topic
/// layout, the same topic: a call's keys are one topic's), [`CALLS_PER_PIPELINE`]
/// calls per batch, each batch starting with a SCRIPT LOAD (a no-op unless
/// Redis lost the script). Everything is validated before anything is
/// built. Each pipeline answers with one list of replies per call, one reply
/// per job: read them with [`PushedMany`]. With each pipeline, the pools it
/// writes (a durable push waits on their nodes).
pub(crate) fn push_many(names: &Names, jobs: &[Job]) -> Result<Vec<(Batch, Vec<String>)>> {
    let args = jobs.iter().map(|job| validate_job(names, job)).collect::<Result<Vec<_>>>()?;
    let per_topic = names.index().is_some();
    let mut calls: Vec<&[Job]> = Vec::new();
    let mut start = 0;
    for end in 1..=jobs.len() {
        let full = end - start == JOBS_PER_CALL;
        if end == jobs.len()
            || full
            || jobs[end].if_absent != jobs[start].if_absent
            || (per_topic && jobs[end].topic != jobs[start].topic)
        {
            calls.push(&jobs[start..end]);
            start = end;
        }
    }
    let mut done = 0;
    let pipes = calls
        .chunks(CALLS_PER_PIPELINE)
        .map(|calls| {
            let mut batch = Batch::new();
            let mut pools = Vec::new();
            // On a cluster SCRIPT LOAD goes to every node.
            batch.add_ignored(redis::cmd("SCRIPT").arg("LOAD").arg(scripts::PUSH_MANY_SRC).clone());
            for call_jobs in calls {
                let topic = &call_jobs[0].topic;
                let counts = names.scheduled_count();
                let mut call = redis::cmd("EVALSHA");
                call.arg(scripts::PUSH_MANY.get_hash()).arg(1 + counts.is_some() as u8);
                call.arg(names.pool(topic)).arg(counts);
                call.arg(names.bucket_prefix(topic)).arg(policy(&call_jobs[0])).arg(names.script_wake());
                for (job, args) in call_jobs.iter().zip(&args[done..]) {
                    call.arg(&job.id).arg(&job.topic).arg(&job.body[..]).arg(args);
                }
                done += call_jobs.len();
                batch.add(call);
                pools.push(names.pool(topic));
            }
            (batch, pools)
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

    /// The index writes for the jobs written so far: each topic's earliest
    /// due time (per-topic layout; none in the classic one).
    pub(crate) fn index_notes(&self, names: &Names) -> Vec<IndexNote> {
        let mut earliest: Vec<(&str, SystemTime)> = Vec::new();
        for (job, due) in self.jobs.iter().zip(&self.due) {
            let Some(due) = *due else { continue };
            match earliest.iter_mut().find(|(topic, _)| *topic == job.topic) {
                Some((_, first)) => *first = (*first).min(due),
                None => earliest.push((&job.topic, due)),
            }
        }
        earliest.into_iter().filter_map(|(topic, due)| IndexNote::new(names, topic, Some(due), true)).collect()
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
    use crate::keys::Layout;
    use std::time::UNIX_EPOCH;

    fn answered(at: SystemTime) -> Value {
        let ms = at.duration_since(UNIX_EPOCH).expect("clock").as_millis();
        Value::BulkString(format!("{}.{:03}", ms / 1000, ms % 1000).into_bytes())
    }

    /// A push read back with the index write it sent: `lowered` is ZADD's
    /// answer; `skew` is how far ahead this machine's clock is of Redis's.
    fn follow(skew: Duration, lowered: i64) -> IndexFollowUp {
        let names = Names::new("d:", Layout::Topic);
        let job = Job::new("mail", "1", Duration::from_secs(60));
        let mut call = push(&names, &job).expect("a push");
        call.early = IndexNote::new(&names, "mail", Some(SystemTime::now() + job.delay + skew - CLOCK_MARGIN), true);
        let due = SystemTime::now() + job.delay;
        let (got, follow) = call
            .read(&names, &job, Value::Array(vec![answered(due), Value::Int(lowered), Value::Int(0)]))
            .expect("read");
        assert!(got <= due && due.duration_since(got).expect("order") < Duration::from_millis(2));
        follow
    }

    #[test]
    fn a_per_topic_push_sends_its_index_write_in_the_same_pipeline() {
        let call = push(&Names::new("d:", Layout::Topic), &Job::new("mail", "1", Duration::ZERO)).expect("push");
        assert!(matches!(call.request, Request::Batch(_)));
        let call = push(&Names::new("d:", Layout::Classic), &Job::new("mail", "1", Duration::ZERO)).expect("push");
        assert!(matches!(call.request, Request::Script(_)), "the classic push.lua keeps its own index");
    }

    #[test]
    fn an_estimate_later_than_the_due_time_is_written_again() {
        // Clocks that agree: the early write stands; a lowered index wakes
        // the server, an unchanged one does not.
        assert!(matches!(follow(Duration::ZERO, 1), IndexFollowUp::Wake(_)));
        assert!(matches!(follow(Duration::ZERO, 0), IndexFollowUp::Write(None)));
        // This machine's clock a second ahead: the answered time is written.
        assert!(matches!(follow(Duration::from_secs(1), 0), IndexFollowUp::Write(Some(_))));
    }
}
