//! The wait of the blocking calls (bpop, breserve) as a state machine
//! without I/O, so the blocking and the async client share all of it and
//! differ only in how they send.
//!
//! A wait is rounds of: a blocking command that Redis answers when the
//! topic's ready queue holds an id, or when the time is up; then the script
//! that claims a job (take.lua / reserve.lua), which finds none when the id
//! was stale or another worker was faster, and the next round begins with
//! whatever time is left.

use crate::error::{Error, Result};
use crate::keys::Names;
use crate::ops::{self, Op, Request, Step};
use crate::validate;
use crate::{Message, Reserved};
use redis::Value;
use std::time::{Duration, Instant};

/// How the job is claimed once the queue is not empty.
enum Claim {
    /// BRPOP takes the id; take.lua deletes its bucket and hands it out.
    Pop,
    /// BLMOVE (queue to itself) only says the queue is not empty; reserve.lua
    /// then takes an id: a worker that dies while waiting loses nothing.
    Reserve { ttr: Duration },
    /// BLMOVE only: the wait ends when the queue holds an id, taking nothing
    /// (a Worker then fetches a batch, or, stopped meanwhile, leaves it).
    Peek,
}

/// One bpop or breserve in progress.
pub(crate) struct Wait<T> {
    names: Names,
    topic: String,
    /// `None`: wait forever.
    deadline: Option<Instant>,
    claim: Claim,
    /// Whether the reply expected is the blocking command's (else the claim's).
    blocked: bool,
    parse: fn(Value) -> Result<Option<T>>,
}

/// A bpop of `topic`, up to `timeout` (`Duration::ZERO`: forever).
pub(crate) fn bpop(names: &Names, topic: &str, timeout: Duration) -> Result<Op<'static, Option<Message>>> {
    Ok(Wait::new(names, topic, timeout, Claim::Pop, ops::parse_pop)?.op())
}

/// A breserve of `topic` with `ttr`, up to `timeout` (`ZERO`: forever).
pub(crate) fn breserve<'a>(
    names: &'a Names,
    topic: &'a str,
    ttr: Duration,
    timeout: Duration,
) -> Result<Op<'a, Option<Reserved>>> {
    validate::ttr_ms(ttr)?;
    Ok(Wait::new(names, topic, timeout, Claim::Reserve { ttr }, ops::parse_reserve)?.op())
}

/// A wait until `topic`'s ready queue holds an id, up to `timeout`
/// (`ZERO`: forever), taking nothing: whether it does.
pub(crate) fn ready(names: &Names, topic: &str, timeout: Duration) -> Result<Op<'static, bool>> {
    Ok(Wait::new(names, topic, timeout, Claim::Peek, |_| Ok(Some(())))?.op().map(|peeked| Ok(peeked.is_some())))
}

impl<T: Send + 'static> Wait<T> {
    /// The wait as an operation, on a connection of its own.
    fn op(mut self) -> Op<'static, Option<T>> {
        Op::new(move |reply| match reply {
            None => Ok(self.block()),
            Some(reply) => self.next(reply),
        })
        .alone()
    }

    fn new(
        names: &Names,
        topic: &str,
        timeout: Duration,
        claim: Claim,
        parse: fn(Value) -> Result<Option<T>>,
    ) -> Result<Self> {
        ops::check_topic(names, topic)?;
        let deadline = (!timeout.is_zero()).then(|| Instant::now() + timeout);
        Ok(Wait { names: names.clone(), topic: topic.to_string(), deadline, claim, blocked: false, parse })
    }

    /// The step after Redis answered the last one with `reply`.
    fn next(&mut self, reply: Value) -> Result<Step<Option<T>>> {
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
            Claim::Pop => ops::take(&self.names, &self.topic, &popped_id(reply)?),
            Claim::Reserve { ttr } => ops::reserve_script(&self.names, &self.topic, *ttr)?,
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
fn popped_id(reply: Value) -> Result<Vec<u8>> {
    match reply {
        Value::Array(mut parts) if parts.len() == 2 => match parts.pop() {
            Some(Value::BulkString(id)) => Ok(id),
            other => Err(Error::Protocol(format!("BRPOP: expected an id, got {other:?}"))),
        },
        other => Err(Error::Protocol(format!("BRPOP: expected [queue, id], got {other:?}"))),
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

    fn sent<T>(step: Result<Step<T>>) -> Request {
        match step.expect("a step") {
            Step::Send(r) => r,
            Step::Done(_) => panic!("expected a request, got the end"),
        }
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
            Step::Done(Some(m)) => assert_eq!((m.id.as_str(), m.body_str()), ("y", Some("body"))),
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
