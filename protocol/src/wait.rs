//! The wait of the blocking calls (bpop, breserve, and a Worker's wait for
//! work) as an operation without I/O ([`crate::op`]), so the clients share
//! all of it and differ only in how they send.
//!
//! A wait starts with the claim that does not block (pop.lua / reserve.lua),
//! then goes in rounds of: a blocking command that Redis answers when the
//! topic's ready queue holds an id, or when the time is up; then the script
//! that claims a job (take.lua / reserve.lua), which finds none when the id
//! was stale or another worker was faster, and the next round begins with
//! whatever time is left.
//!
//! Any claim may instead answer a wait instruction ([`FlowWait`]: the topic
//! is paused): the wait then blocks on the gate key it names
//! (`BRPOPLPUSH gate gate t`, which a resume writes, waking every waiter)
//! for at most its recheck time, and begins again with the claim that does
//! not block. Beginning with that claim matters: a paused topic's ready
//! queue is not empty, and a `BRPOP` would take its head only for take.lua
//! to put it back (docs/design/flow-control.md, §3.2).

use crate::calls;
use crate::keys::{check_topic, Names};
use crate::op::{Error, Op, Request, Step};
use crate::replies::{flow_wait, FlowWait};
use crate::validate::Invalid;
use redis::Value;
use std::time::{Duration, Instant};

/// How the job is claimed once the queue is not empty.
#[derive(Debug, Clone, Copy)]
pub enum Claim {
    /// pop.lua first; then BRPOP takes the id, and take.lua deletes its
    /// bucket and hands it out.
    Pop,
    /// reserve.lua first; then BLMOVE (queue to itself) only says the queue
    /// is not empty, and reserve.lua takes an id: a worker that dies while
    /// waiting loses nothing.
    Reserve {
        /// The reservation's time to run, checked ([`crate::validate::ttr_ms`]).
        ttr_ms: u64,
    },
    /// BLMOVE only: the wait ends when the queue holds an id, taking nothing
    /// (a Worker then fetches a batch, or, stopped meanwhile, leaves it). A
    /// Worker told to wait on a gate waits with [`gate`].
    Peek,
}

/// What the reply expected next answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// A claim script.
    Claim,
    /// The blocking command on the ready queue.
    Ready,
    /// The blocking command on a gate.
    Gate,
}

/// One wait in progress.
struct Wait<T, E> {
    names: Names,
    topic: String,
    /// `None`: wait forever.
    deadline: Option<Instant>,
    claim: Claim,
    phase: Phase,
    parse: fn(Value) -> Result<Option<T>, E>,
}

/// A wait on `topic`'s ready queue up to `timeout` (`Duration::ZERO`:
/// forever), rounds of a blocking command and `claim`, whose reply `parse`
/// reads (`None`: nothing claimed, wait again; a wait instruction never
/// reaches it); on a connection of its own.
pub fn wait<T: Send + 'static, E: From<Error> + 'static>(
    names: &Names,
    topic: &str,
    timeout: Duration,
    claim: Claim,
    parse: fn(Value) -> Result<Option<T>, E>,
) -> Result<Op<'static, Option<T>, E>, Invalid> {
    check_topic(names, topic)?;
    let deadline = (!timeout.is_zero()).then(|| Instant::now() + timeout);
    let mut wait = Wait { names: names.clone(), topic: topic.to_string(), deadline, claim, phase: Phase::Claim, parse };
    Ok(Op::new(move |reply| match reply {
        None => Ok(wait.first()),
        Some(reply) => wait.next(reply),
    })
    .alone())
}

/// A wait on `flow`'s gate for at most its recheck time and `timeout`
/// (`Duration::ZERO`: no more than the recheck): whether it was written
/// (the topic resumed). A Worker told to wait by its fetch waits here, then
/// fetches again.
pub fn gate<E: From<Error> + 'static>(flow: &FlowWait, timeout: Duration) -> Op<'static, bool, E> {
    let slice = if timeout.is_zero() { flow.recheck } else { flow.recheck.min(timeout) };
    let cmd = gate_command(&flow.gate, slice);
    let mut sent = false;
    Op::new(move |reply| match reply {
        None if !sent => {
            sent = true;
            Ok(Step::Send(Request::Blocking(cmd.clone(), Some(slice))))
        }
        reply => Ok(Step::Done(reply.is_some_and(|r| r != Value::Nil))),
    })
    .alone()
}

/// `BRPOPLPUSH gate gate t`: blocks until the gate holds its element, and
/// leaves it there for every other waiter (Redis 2.2+, so the classic
/// layout's Redis 6.0 floor holds).
fn gate_command(gate: &[u8], wait: Duration) -> redis::Cmd {
    redis::cmd("BRPOPLPUSH").arg(gate).arg(gate).arg(seconds(wait)).clone()
}

/// Redis takes seconds and reads 0 as forever: less than 1 ms is sent as 1 ms.
fn seconds(wait: Duration) -> f64 {
    wait.as_secs_f64().max(0.001)
}

impl<T: Send + 'static, E: From<Error> + 'static> Wait<T, E> {
    /// The first step: the claim that does not block, or a peek's wait.
    fn first(&mut self) -> Step<Option<T>> {
        if self.left() == Some(None) {
            return Step::Done(None);
        }
        let claim = match self.claim {
            Claim::Pop => calls::pop(&self.names, &self.topic),
            Claim::Reserve { ttr_ms } => calls::reserve(&self.names, &self.topic, ttr_ms, None),
            Claim::Peek => return self.block(),
        };
        self.phase = Phase::Claim;
        Step::Send(claim.into())
    }

    /// The step after Redis answered the last one with `reply`.
    fn next(&mut self, reply: Value) -> Result<Step<Option<T>>, E> {
        match self.phase {
            Phase::Claim => {
                if let Some(flow) = flow_wait(&reply) {
                    return Ok(self.wait_on(&flow));
                }
                Ok(match (self.parse)(reply)? {
                    Some(job) => Step::Done(Some(job)),
                    None => self.block(),
                })
            }
            // Woken by a resume, or the recheck time is over: ask again.
            Phase::Gate => Ok(self.first()),
            Phase::Ready => {
                if reply == Value::Nil {
                    return Ok(Step::Done(None)); // Redis's wait ran out: so did ours
                }
                let claim = match &self.claim {
                    Claim::Pop => calls::take(&self.names, &self.topic, &popped_id(reply)?),
                    Claim::Reserve { ttr_ms } => calls::reserve(&self.names, &self.topic, *ttr_ms, None),
                    // The queue holds an id: the peek is over, nothing taken.
                    Claim::Peek => return Ok(Step::Done((self.parse)(reply)?)),
                };
                self.phase = Phase::Claim;
                Ok(Step::Send(claim.into()))
            }
        }
    }

    /// The time left: `None` for no limit, `Some(None)` when it is over.
    fn left(&self) -> Option<Option<Duration>> {
        self.deadline.map(|d| d.checked_duration_since(Instant::now()).filter(|l| !l.is_zero()))
    }

    /// Another blocking command on the ready queue for the time left, or the end.
    fn block(&mut self) -> Step<Option<T>> {
        let left = match self.left() {
            None => None,
            Some(None) => return Step::Done(None),
            Some(left) => left,
        };
        let queue = self.names.ready(&self.topic);
        let mut cmd = match self.claim {
            Claim::Pop => redis::cmd("BRPOP").arg(&queue).clone(),
            Claim::Reserve { .. } | Claim::Peek => {
                redis::cmd("BLMOVE").arg(&queue).arg(&queue).arg("RIGHT").arg("RIGHT").clone()
            }
        };
        cmd.arg(left.map_or(0.0, seconds));
        self.phase = Phase::Ready;
        Step::Send(Request::Blocking(cmd, left))
    }

    /// A wait on the gate a claim named, for its recheck time or the time
    /// left, whichever is shorter; or the end.
    fn wait_on(&mut self, flow: &FlowWait) -> Step<Option<T>> {
        let slice = match self.left() {
            None => flow.recheck,
            Some(None) => return Step::Done(None),
            Some(Some(left)) => left.min(flow.recheck),
        };
        self.phase = Phase::Gate;
        Step::Send(Request::Blocking(gate_command(&flow.gate, slice), Some(slice)))
    }
}

/// The id of BRPOP's `[queue, id]`, as raw bytes (used exactly as stored).
fn popped_id(reply: Value) -> Result<Vec<u8>, Error> {
    match reply {
        Value::Array(mut parts) if parts.len() == 2 => match parts.pop() {
            Some(Value::BulkString(id)) => Ok(id),
            other => Err(Error::BadReply(format!("BRPOP: expected an id, got {other:?}"))),
        },
        other => Err(Error::BadReply(format!("BRPOP: expected [queue, id], got {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classic() -> Names {
        Names::Classic(crate::keys::Keys::default())
    }

    fn words(cmd: &redis::Cmd) -> Vec<String> {
        cmd.args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
                _ => "<cursor>".into(),
            })
            .collect()
    }

    type Wait<T> = Result<Op<'static, Option<T>, Error>, Invalid>;

    /// A bpop whose job is pop.lua's reply as it came.
    fn bpop(names: &Names, topic: &str, timeout: Duration) -> Wait<Vec<Value>> {
        wait(names, topic, timeout, Claim::Pop, |reply| match reply {
            Value::Nil => Ok(None),
            Value::Array(parts) => Ok(Some(parts)),
            other => Err(Error::BadReply(format!("{other:?}"))),
        })
    }

    fn breserve(names: &Names, topic: &str, ttr: Duration, timeout: Duration) -> Wait<Value> {
        let ttr_ms = crate::validate::ttr_ms(ttr)?;
        wait(names, topic, timeout, Claim::Reserve { ttr_ms }, |reply| Ok(Some(reply).filter(|r| *r != Value::Nil)))
    }

    fn ready(names: &Names, topic: &str, timeout: Duration) -> Result<Op<'static, bool, Error>, Invalid> {
        Ok(wait(names, topic, timeout, Claim::Peek, |_| Ok(Some(())))?.map(|peeked| Ok(peeked.is_some())))
    }

    fn sent<T>(step: Result<Step<T>, Error>) -> Request {
        match step.expect("a step") {
            Step::Send(r) => r,
            Step::Done(_) => panic!("expected a request, got the end"),
        }
    }

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn paused(gate: &str, ms: i64) -> Value {
        Value::Array(vec![bulk("paused"), Value::Int(ms), bulk(gate)])
    }

    #[test]
    fn a_stale_id_means_waiting_again_and_a_job_ends_the_wait() {
        let mut w = bpop(&classic(), "t", Duration::from_secs(60)).expect("wait");
        // The claim that does not block comes first (pop.lua); nothing: block.
        assert!(matches!(sent(w.start()), Request::Script(_)));
        match sent(w.next(Value::Nil)) {
            Request::Blocking(cmd, Some(left)) => {
                assert!(left <= Duration::from_secs(60));
                let secs: f64 = words(&cmd)[2].parse().expect("seconds");
                assert!(secs > 59.0 && secs <= 60.0, "{secs}");
                assert_eq!(words(&cmd)[..2], ["BRPOP", "delayer:ready_queue:t"]);
            }
            _ => panic!("expected BRPOP with a time limit"),
        }
        let popped = Value::Array(vec![Value::BulkString(b"q".to_vec()), Value::BulkString(b"x".to_vec())]);
        assert!(matches!(sent(w.next(popped)), Request::Script(_)));
        // take.lua found nothing (stale id): block again.
        assert!(matches!(sent(w.next(Value::Nil)), Request::Blocking(..)));
        let popped = Value::Array(vec![Value::BulkString(b"q".to_vec()), Value::BulkString(b"y".to_vec())]);
        sent(w.next(popped));
        let job =
            Value::Array(["y", "t", "body", ""].iter().map(|s| Value::BulkString(s.as_bytes().to_vec())).collect());
        match w.next(job).expect("job") {
            Step::Done(Some(m)) => assert_eq!((&m[0], &m[2]), (&bulk("y"), &bulk("body"))),
            _ => panic!("expected the job"),
        }
    }

    #[test]
    fn a_wait_instruction_sends_the_wait_to_the_gate_then_claims_without_blocking() {
        let names = Names::Topic(crate::keys::TopicKeys::new("d:"));
        let mut w = bpop(&names, "t", Duration::from_secs(60)).expect("wait");
        assert!(matches!(sent(w.start()), Request::Script(_)));
        let gate = |req: Request| match req {
            Request::Blocking(cmd, Some(slice)) => {
                let w = words(&cmd);
                assert_eq!(w[..3], ["BRPOPLPUSH", "d:{t}:gate", "d:{t}:gate"]);
                let secs: f64 = w[3].parse().expect("seconds");
                assert!((secs - slice.as_secs_f64()).abs() < 1e-9, "{secs} vs {slice:?}");
                slice
            }
            _ => panic!("expected BRPOPLPUSH on the gate with a limit"),
        };
        assert_eq!(gate(sent(w.next(paused("d:{t}:gate", 5000)))), Duration::from_secs(5), "the recheck time");
        // Woken (or the recheck is over): the claim that does not block again.
        assert!(matches!(sent(w.next(bulk("1"))), Request::Script(_)));
        assert!(matches!(sent(w.next(paused("d:{t}:gate", 5000))), Request::Blocking(..)));
        assert!(matches!(sent(w.next(Value::Nil)), Request::Script(_)), "a recheck after a silent slice");
        // A take.lua after BRPOP may answer the same (the id went back).
        assert!(matches!(sent(w.next(Value::Nil)), Request::Blocking(..)), "empty: BRPOP");
        let popped = Value::Array(vec![bulk("q"), bulk("x")]);
        assert!(matches!(sent(w.next(popped)), Request::Script(_)));
        gate(sent(w.next(paused("d:{t}:gate", 5000))));

        // Forever: each slice is the recheck; a short deadline cuts the slice.
        let mut forever = bpop(&names, "t", Duration::ZERO).expect("wait");
        sent(forever.start());
        assert_eq!(gate(sent(forever.next(paused("d:{t}:gate", 700)))), Duration::from_millis(700));
        let mut short = breserve(&names, "t", Duration::from_secs(1), Duration::from_millis(300)).expect("wait");
        sent(short.start());
        assert!(gate(sent(short.next(paused("d:{t}:gate", 5000)))) <= Duration::from_millis(300));
        std::thread::sleep(Duration::from_millis(310));
        assert!(matches!(short.next(Value::Nil), Ok(Step::Done(None))), "no time left after the gate");
    }

    #[test]
    fn a_peek_ends_when_the_queue_holds_an_id_and_claims_nothing() {
        let mut w = ready(&classic(), "t", Duration::from_secs(5)).expect("wait");
        match sent(w.start()) {
            Request::Blocking(cmd, _) => assert_eq!(words(&cmd)[0], "BLMOVE"),
            _ => panic!("expected BLMOVE"),
        }
        let moved = Value::BulkString(b"x".to_vec());
        assert!(matches!(w.next(moved).expect("ready"), Step::Done(true)), "no claim is sent");
        let mut idle = ready(&classic(), "t", Duration::from_secs(5)).expect("wait");
        sent(idle.start());
        assert!(matches!(idle.next(Value::Nil).expect("timeout"), Step::Done(false)));
    }

    #[test]
    fn redis_timing_out_or_no_time_left_ends_the_wait() {
        let names = classic();
        let mut w = breserve(&names, "t", Duration::from_secs(1), Duration::from_secs(5)).expect("w");
        assert!(matches!(sent(w.start()), Request::Script(_)), "reserve.lua first");
        match sent(w.next(Value::Nil)) {
            Request::Blocking(cmd, _) => {
                let q = "delayer:ready_queue:t";
                assert_eq!(words(&cmd)[..5], ["BLMOVE", q, q, "RIGHT", "RIGHT"]);
            }
            _ => panic!("expected BLMOVE"),
        }
        assert!(matches!(w.next(Value::Nil).expect("timeout"), Step::Done(None)));

        let mut forever = bpop(&classic(), "t", Duration::ZERO).expect("wait");
        sent(forever.start());
        assert!(matches!(sent(forever.next(Value::Nil)), Request::Blocking(_, None)), "no limit, forever");

        let mut short = bpop(&classic(), "t", Duration::from_nanos(1)).expect("wait");
        std::thread::sleep(Duration::from_millis(2));
        assert!(matches!(short.start(), Ok(Step::Done(None))));
        assert!(bpop(&classic(), "", Duration::ZERO).is_err());
        assert!(breserve(&classic(), "t", Duration::ZERO, Duration::ZERO).is_err(), "ttr 0");
    }
}
