//! The wait of the blocking calls (bpop, breserve, and a Worker's wait for
//! work) as an operation without I/O ([`crate::op`]), so the clients share
//! all of it and differ only in how they send.
//!
//! A wait is rounds of: a blocking command that Redis answers when the
//! topic's ready queue holds an id, or when the time is up; then the script
//! that claims a job (take.lua / reserve.lua), which finds none when the id
//! was stale or another worker was faster, and the next round begins with
//! whatever time is left.

use crate::calls;
use crate::keys::{check_topic, Names};
use crate::op::{Error, Op, Request, Step};
use crate::validate::Invalid;
use redis::Value;
use std::time::{Duration, Instant};

/// How the job is claimed once the queue is not empty.
#[derive(Debug, Clone, Copy)]
pub enum Claim {
    /// BRPOP takes the id; take.lua deletes its bucket and hands it out.
    Pop,
    /// BLMOVE (queue to itself) only says the queue is not empty; reserve.lua
    /// then takes an id: a worker that dies while waiting loses nothing.
    Reserve {
        /// The reservation's time to run, checked ([`crate::validate::ttr_ms`]).
        ttr_ms: u64,
    },
    /// BLMOVE only: the wait ends when the queue holds an id, taking nothing
    /// (a Worker then fetches a batch, or, stopped meanwhile, leaves it).
    Peek,
}

/// One wait in progress.
struct Wait<T, E> {
    names: Names,
    topic: String,
    /// `None`: wait forever.
    deadline: Option<Instant>,
    claim: Claim,
    /// Whether the reply expected is the blocking command's (else the claim's).
    blocked: bool,
    parse: fn(Value) -> Result<Option<T>, E>,
}

/// A wait on `topic`'s ready queue up to `timeout` (`Duration::ZERO`:
/// forever), rounds of a blocking command and `claim`, whose reply `parse`
/// reads (`None`: nothing claimed, wait again); on a connection of its own.
pub fn wait<T: Send + 'static, E: From<Error> + 'static>(
    names: &Names,
    topic: &str,
    timeout: Duration,
    claim: Claim,
    parse: fn(Value) -> Result<Option<T>, E>,
) -> Result<Op<'static, Option<T>, E>, Invalid> {
    check_topic(names, topic)?;
    let deadline = (!timeout.is_zero()).then(|| Instant::now() + timeout);
    let mut wait = Wait { names: names.clone(), topic: topic.to_string(), deadline, claim, blocked: false, parse };
    Ok(Op::new(move |reply| match reply {
        None => Ok(wait.block()),
        Some(reply) => wait.next(reply),
    })
    .alone())
}

impl<T: Send + 'static, E: From<Error> + 'static> Wait<T, E> {
    /// The step after Redis answered the last one with `reply`.
    fn next(&mut self, reply: Value) -> Result<Step<Option<T>>, E> {
        if !self.blocked {
            return Ok(match (self.parse)(reply)? {
                Some(job) => Step::Done(Some(job)),
                None => self.block(),
            });
        }
        self.blocked = false;
        if reply == Value::Nil {
            return Ok(Step::Done(None)); // Redis's wait ran out: so did ours
        }
        let claim = match &self.claim {
            Claim::Pop => calls::take(&self.names, &self.topic, &popped_id(reply)?),
            Claim::Reserve { ttr_ms } => calls::reserve(&self.names, &self.topic, *ttr_ms, None),
            // The queue holds an id: the peek is over, nothing taken.
            Claim::Peek => return Ok(Step::Done((self.parse)(reply)?)),
        };
        Ok(Step::Send(claim.into()))
    }

    /// Another blocking command for the time left, or the end.
    fn block(&mut self) -> Step<Option<T>> {
        let left = match self.deadline {
            None => None,
            Some(d) => match d.checked_duration_since(Instant::now()).filter(|l| !l.is_zero()) {
                Some(left) => Some(left),
                None => return Step::Done(None),
            },
        };
        // Redis takes seconds and reads 0 as forever: less than 1 ms left
        // is sent as 1 ms.
        let seconds = left.map_or(0.0, |l| l.as_secs_f64().max(0.001));
        let queue = self.names.ready(&self.topic);
        let mut cmd = match self.claim {
            Claim::Pop => redis::cmd("BRPOP").arg(&queue).clone(),
            Claim::Reserve { .. } | Claim::Peek => {
                redis::cmd("BLMOVE").arg(&queue).arg(&queue).arg("RIGHT").arg("RIGHT").clone()
            }
        };
        cmd.arg(seconds);
        self.blocked = true;
        Step::Send(Request::Blocking(cmd, left))
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

    #[test]
    fn a_stale_id_means_waiting_again_and_a_job_ends_the_wait() {
        let mut w = bpop(&classic(), "t", Duration::from_secs(60)).expect("wait");
        match sent(w.start()) {
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
        match sent(w.start()) {
            Request::Blocking(cmd, _) => {
                let q = "delayer:ready_queue:t";
                assert_eq!(words(&cmd)[..5], ["BLMOVE", q, q, "RIGHT", "RIGHT"]);
            }
            _ => panic!("expected BLMOVE"),
        }
        assert!(matches!(w.next(Value::Nil).expect("timeout"), Step::Done(None)));

        let mut forever = bpop(&classic(), "t", Duration::ZERO).expect("wait");
        assert!(matches!(sent(forever.start()), Request::Blocking(_, None)), "no limit, forever");

        let mut short = bpop(&classic(), "t", Duration::from_nanos(1)).expect("wait");
        std::thread::sleep(Duration::from_millis(2));
        assert!(matches!(short.start(), Ok(Step::Done(None))));
        assert!(bpop(&classic(), "", Duration::ZERO).is_err());
        assert!(breserve(&classic(), "t", Duration::ZERO, Duration::ZERO).is_err(), "ttr 0");
    }
}
