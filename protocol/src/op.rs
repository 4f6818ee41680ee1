//! An operation without I/O: what a client sends to Redis for one call, and
//! how it reads each reply, as a state machine (sans-I/O). Each client (the
//! Rust SDK's blocking and async ones) runs every operation with one loop
//! of its own, and differs from the other only in how it sends.
//!
//! An [`Op`] says what to send next ([`Step::Send`]) and reads each reply
//! until it is done ([`Step::Done`]). Most are one script call
//! ([`Op::call`]); a blocking wait, a durable push's `WAIT`, push_many's
//! pipelines and a dead-letter drain take a few steps. Its error type is
//! the caller's, which takes this crate's [`Error`] (a refused argument, a
//! reply the protocol does not allow).

use crate::connection::Batch;
use crate::validate::Invalid;
use redis::{Cmd, ScriptInvocation, Value};
use std::fmt;
use std::time::Duration;

/// Why an operation stopped: an argument the protocol refuses (nothing was
/// sent), or a reply it does not allow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// An argument broke a rule of the protocol.
    Invalid(Invalid),
    /// Redis answered something the protocol does not allow.
    BadReply(String),
}

impl From<Invalid> for Error {
    fn from(e: Invalid) -> Self {
        Error::Invalid(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Invalid(e) => write!(f, "invalid argument: {e}"),
            Error::BadReply(m) => write!(f, "unexpected reply from Redis: {m}"),
        }
    }
}

impl std::error::Error for Error {}

/// One thing to send to Redis; the clients run it, each its own way.
pub enum Request {
    /// A script call: `EVALSHA`, and after `NOSCRIPT` (a Redis that lost its
    /// scripts: a restart, `SCRIPT FLUSH`) `SCRIPT LOAD` and `EVALSHA` again.
    Script(ScriptInvocation<'static>),
    /// Commands sent together (a pipeline on one Redis; one by one, each to
    /// its key's node, on a cluster).
    Batch(Batch),
    /// A command Redis answers only when there is something, or after this
    /// wait (`None`: no limit): a connection's read timeout must not cut it.
    Blocking(Cmd, Option<Duration>),
    /// A durable write's `WAIT`, sent on the node of each of these keys
    /// (one Redis: the connection's), up to this long: the least count
    /// answered. A cluster's default WAIT asks every master, so with one
    /// master down every durable push would fail, whatever its topic.
    Replicas(Cmd, Duration, Vec<String>),
}

impl From<ScriptInvocation<'static>> for Request {
    fn from(inv: ScriptInvocation<'static>) -> Self {
        Request::Script(inv)
    }
}

/// What a client does next.
pub enum Step<T> {
    /// Send this, then hand Redis's reply to [`Op::next`].
    Send(Request),
    /// The operation is over.
    Done(T),
}

type Next<'a, T, E> = Box<dyn FnMut(Option<Value>) -> Result<Step<T>, E> + Send + 'a>;

/// One operation in progress: called with `None` for its first step, then
/// with each reply.
pub struct Op<'a, T, E> {
    /// Whether it runs on a connection of its own (the async client's
    /// blocking waits and durable pushes, whose `WAIT` must follow the write
    /// on its connection), not the shared one.
    pub own_connection: bool,
    next: Next<'a, T, E>,
}

fn over<E: From<Error>>() -> E {
    Error::BadReply("a reply after the operation was over".into()).into()
}

impl<'a, T: Send + 'a, E: From<Error> + 'a> Op<'a, T, E> {
    /// An operation whose steps `next` makes: called with `None` for the
    /// first, then with each reply.
    pub fn new(next: impl FnMut(Option<Value>) -> Result<Step<T>, E> + Send + 'a) -> Self {
        Op { own_connection: false, next: Box::new(next) }
    }

    /// One request, its reply read by `read`.
    pub fn call(req: impl Into<Request>, read: impl FnOnce(Value) -> Result<T, E> + Send + 'a) -> Self {
        let (mut req, mut read) = (Some(req.into()), Some(read));
        Op::new(move |reply| match reply {
            None => req.take().map(Step::Send).ok_or_else(over),
            Some(reply) => Ok(Step::Done(read.take().ok_or_else(over)?(reply)?)),
        })
    }

    /// Nothing to send: `value` at once.
    pub fn done(value: T) -> Self {
        let mut value = Some(value);
        Op::new(move |_| value.take().map(Step::Done).ok_or_else(over))
    }

    /// The first step.
    pub fn start(&mut self) -> Result<Step<T>, E> {
        (self.next)(None)
    }

    /// The step after Redis answered the last one with `reply`.
    pub fn next(&mut self, reply: Value) -> Result<Step<T>, E> {
        (self.next)(Some(reply))
    }

    /// This one on a connection of its own.
    pub fn alone(mut self) -> Self {
        self.own_connection = true;
        self
    }

    /// This operation, then the one `then` makes of its result.
    pub fn then<U: Send + 'a>(mut self, then: impl FnOnce(T) -> Result<Op<'a, U, E>, E> + Send + 'a) -> Op<'a, U, E> {
        let own_connection = self.own_connection;
        let (mut then, mut second) = (Some(then), None::<Op<'a, U, E>>);
        let mut op = Op::new(move |reply| {
            if let Some(second) = second.as_mut() {
                return (second.next)(reply);
            }
            match (self.next)(reply)? {
                Step::Send(req) => Ok(Step::Send(req)),
                Step::Done(out) => second.insert(then.take().ok_or_else(over)?(out)?).start(),
            }
        });
        op.own_connection = own_connection;
        op
    }

    /// This operation's result mapped.
    pub fn map<U: Send + 'a>(self, f: impl FnOnce(T) -> Result<U, E> + Send + 'a) -> Op<'a, U, E> {
        self.then(|out| Ok(Op::done(f(out)?)))
    }

    /// `ops` one after the other, their results in order.
    pub fn all(ops: Vec<Op<'a, T, E>>) -> Op<'a, Vec<T>, E> {
        Op::fold(ops, Vec::new(), |outs, out| {
            outs.push(out);
            Ok(())
        })
    }

    /// `ops` one after the other, each result added into `acc` by `add` as
    /// it comes (on a connection of their own if one of them wants it).
    pub fn fold<A: Send + 'a>(
        ops: Vec<Op<'a, T, E>>,
        acc: A,
        mut add: impl FnMut(&mut A, T) -> Result<(), E> + Send + 'a,
    ) -> Op<'a, A, E> {
        let own_connection = ops.iter().any(|op| op.own_connection);
        let (mut ops, mut current, mut acc) = (ops.into_iter(), None::<Op<'a, T, E>>, Some(acc));
        let mut op = Op::new(move |mut reply| loop {
            let op = match current.as_mut() {
                Some(op) => op,
                None => match ops.next() {
                    Some(op) => current.insert(op),
                    None => return acc.take().map(Step::Done).ok_or_else(over),
                },
            };
            match (op.next)(reply.take())? {
                Step::Send(req) => return Ok(Step::Send(req)),
                Step::Done(out) => {
                    add(acc.as_mut().ok_or_else(over)?, out)?;
                    current = None;
                }
            }
        });
        op.own_connection = own_connection;
        op
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_op_answers_once() {
        let mut op: Op<'_, bool, Error> = Op::call(Request::Batch(Batch::new()), |v| Ok(v == Value::Nil));
        assert!(matches!(op.start(), Ok(Step::Send(_))));
        assert!(matches!(op.next(Value::Nil), Ok(Step::Done(true))));
        assert!(op.next(Value::Nil).is_err(), "a reply after the end is an error, not a panic");
    }
}
