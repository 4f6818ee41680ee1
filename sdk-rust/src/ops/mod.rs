//! What each operation sends to Redis and how its reply reads, shared by the
//! blocking client ([`crate::Delayer`]) and the async one
//! ([`crate::aio::Delayer`]), which differ only in how they send.
//!
//! Every operation is an [`Op`]: a state machine without I/O that says what
//! to send next ([`Step::Send`]) and reads each reply until it is done
//! ([`Step::Done`]); each client runs every operation with one loop of its
//! own. Most are one script call ([`Op::call`]); a blocking wait
//! ([`crate::wait`]), a durable push's `WAIT`, push_many's pipelines and a
//! dead-letter drain take a few steps. One file per family: pushes
//! ([`push`]), the at-least-once calls ([`reliable`]), dead letters
//! ([`dead`]), one reader per script ([`replies`]); the 1.x calls (pop,
//! take, remove, reschedule) are here. Every builder takes the client's [`Names`], which alone knows
//! the layout.

mod dead;
mod push;
mod reliable;
mod replies;

pub(crate) use dead::*;
pub(crate) use push::*;
pub(crate) use reliable::*;
pub(crate) use replies::*;

pub(crate) use crate::keys::check_topic;

use crate::connection::Batch;
use crate::error::{Error, Result};
use crate::keys::Names;
use crate::scripts;
use crate::validate;
use crate::Message;
use redis::{Cmd, ScriptInvocation, Value};
use std::time::{Duration, SystemTime};

/// One thing to send to Redis; the clients run it, each its own way.
pub(crate) enum Request {
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
pub(crate) enum Step<T> {
    /// Send this, then hand Redis's reply to [`Op::next`].
    Send(Request),
    /// The operation is over.
    Done(T),
}

type Next<'a, T> = Box<dyn FnMut(Option<Value>) -> Result<Step<T>> + Send + 'a>;

/// One operation in progress: called with `None` for its first step, then
/// with each reply.
pub(crate) struct Op<'a, T> {
    /// Whether it runs on a connection of its own (the async client's
    /// blocking waits and durable pushes, whose `WAIT` must follow the write
    /// on its connection), not the shared one.
    pub(crate) own_connection: bool,
    next: Next<'a, T>,
}

fn over() -> Error {
    Error::Protocol("a reply after the operation was over".into())
}

impl<'a, T: Send + 'a> Op<'a, T> {
    pub(crate) fn new(next: impl FnMut(Option<Value>) -> Result<Step<T>> + Send + 'a) -> Self {
        Op { own_connection: false, next: Box::new(next) }
    }

    /// One request, its reply read by `read`.
    pub(crate) fn call(req: impl Into<Request>, read: impl FnOnce(Value) -> Result<T> + Send + 'a) -> Self {
        let (mut req, mut read) = (Some(req.into()), Some(read));
        Op::new(move |reply| match reply {
            None => req.take().map(Step::Send).ok_or_else(over),
            Some(reply) => Ok(Step::Done(read.take().ok_or_else(over)?(reply)?)),
        })
    }

    /// Nothing to send: `value` at once.
    pub(crate) fn done(value: T) -> Self {
        let mut value = Some(value);
        Op::new(move |_| value.take().map(Step::Done).ok_or_else(over))
    }

    /// The first step.
    pub(crate) fn start(&mut self) -> Result<Step<T>> {
        (self.next)(None)
    }

    /// The step after Redis answered the last one with `reply`.
    pub(crate) fn next(&mut self, reply: Value) -> Result<Step<T>> {
        (self.next)(Some(reply))
    }

    /// This one on a connection of its own.
    pub(crate) fn alone(mut self) -> Self {
        self.own_connection = true;
        self
    }

    /// This operation, then the one `then` makes of its result.
    pub(crate) fn then<U: Send + 'a>(mut self, then: impl FnOnce(T) -> Result<Op<'a, U>> + Send + 'a) -> Op<'a, U> {
        let own_connection = self.own_connection;
        let (mut then, mut second) = (Some(then), None::<Op<'a, U>>);
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
    pub(crate) fn map<U: Send + 'a>(self, f: impl FnOnce(T) -> Result<U> + Send + 'a) -> Op<'a, U> {
        self.then(|out| Ok(Op::done(f(out)?)))
    }

    /// `ops` one after the other, their results in order.
    pub(crate) fn all(ops: Vec<Op<'a, T>>) -> Op<'a, Vec<T>> {
        Op::fold(ops, Vec::new(), |outs, out| {
            outs.push(out);
            Ok(())
        })
    }

    /// `ops` one after the other, each result added into `acc` by `add` as
    /// it comes (on a connection of their own if one of them wants it).
    pub(crate) fn fold<A: Send + 'a>(
        ops: Vec<Op<'a, T>>,
        acc: A,
        mut add: impl FnMut(&mut A, T) -> Result<()> + Send + 'a,
    ) -> Op<'a, A> {
        let own_connection = ops.iter().any(|op| op.own_connection);
        let (mut ops, mut current, mut acc) = (ops.into_iter(), None::<Op<'a, T>>, Some(acc));
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

/// The names under `prefix` in `layout`; the per-topic layout refuses a
/// prefix with a brace (it would move every name's hash tag).
pub(crate) fn names(prefix: &str, layout: crate::keys::Layout) -> Result<Names> {
    let names = Names::new(prefix, layout);
    names.check_prefix()?;
    Ok(names)
}

/// pop.lua for one topic.
pub(crate) fn pop<'a>(names: &Names, topic: &str) -> Result<Op<'a, Option<Message>>> {
    check_topic(names, topic)?;
    let mut inv = scripts::POP.prepare_invoke();
    inv.key(names.ready(topic)).key(names.malformed(topic)).key(names.pool(topic)).key(names.reserved(topic));
    inv.arg(names.bucket_prefix(topic));
    Ok(Op::call(inv, parse_pop))
}

/// take.lua for an id BRPOP returned from `topic`'s ready list (raw bytes:
/// used exactly as stored).
pub(crate) fn take(names: &Names, topic: &str, id: &[u8]) -> ScriptInvocation<'static> {
    let mut inv = scripts::TAKE.prepare_invoke();
    inv.key(names.bucket_bytes(topic, id)).key(names.malformed(topic)).key(names.pool(topic));
    inv.key(names.reserved(topic)).arg(id);
    inv
}

/// An id given as bytes, refused when empty.
pub(crate) fn id_of(id: &[u8]) -> Result<&[u8]> {
    if id.is_empty() {
        return Err(Error::InvalidArgument("id must not be empty".into()));
    }
    Ok(id)
}

/// remove.lua for one id, any bytes, of `topic` (`None`: the classic
/// layout's global ids; `instead` names the call the per-topic layout needs).
pub(crate) fn remove<'a>(names: &Names, topic: Option<&str>, id: &[u8], instead: &str) -> Result<Op<'a, bool>> {
    let topic = names.id_topic(topic, "remove", instead)?;
    let id = id_of(id)?;
    let mut inv = scripts::REMOVE.prepare_invoke();
    inv.key(names.pool(topic)).key(names.bucket_bytes(topic, id));
    inv.key(names.scheduled_count()).arg(id);
    Ok(Op::call(inv, parse_remove))
}

/// reschedule.lua for one id, any bytes (of `topic`, as [`remove`]).
pub(crate) fn reschedule<'a>(
    names: &'a Names,
    topic: Option<&'a str>,
    id: &[u8],
    delay: Duration,
    instead: &str,
) -> Result<Op<'a, Option<SystemTime>>> {
    let topic = names.id_topic(topic, "reschedule", instead)?;
    let id = id_of(id)?;
    let delay_ms = validate::delay_ms(delay)?;
    let mut inv = scripts::RESCHEDULE.prepare_invoke();
    inv.key(names.pool(topic)).key(names.bucket_bytes(topic, id)).arg(id).arg(delay_ms).arg(names.wake());
    Ok(Op::call(inv, parse_reschedule))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Layout;
    use crate::Job;

    /// A durable push_many's pipelines and WAITs go on one connection of
    /// its own, and each pipeline's replies are read before the next is
    /// sent: a reply that is no list of calls stops the rest.
    #[test]
    fn a_durable_push_many_runs_alone_and_reads_each_pipeline_as_it_comes() {
        let names = Names::new("d:", Layout::Classic);
        let jobs: Vec<Job> = (0..1500).map(|i| Job::new("t", format!("{i}"), Duration::ZERO)).collect();
        let mut op = push_many(&names, &jobs, Some(Duration::from_millis(10))).expect("an op");
        assert!(op.own_connection, "the WAIT must follow the writes on their connection");
        assert!(matches!(op.start(), Ok(Step::Send(Request::Batch(_)))), "the first pipeline");
        assert!(matches!(op.next(Value::Nil), Ok(Step::Send(Request::Replicas(..)))), "its WAIT");
        assert!(op.next(Value::Int(1)).is_err(), "the first pipeline's reply is read before the second is sent");
    }

    #[test]
    fn an_op_answers_once() {
        let mut op = Op::call(Request::Batch(Batch::new()), |v| Ok(v == Value::Nil));
        assert!(matches!(op.start(), Ok(Step::Send(_))));
        assert!(matches!(op.next(Value::Nil), Ok(Step::Done(true))));
        assert!(op.next(Value::Nil).is_err(), "a reply after the end is an error, not a panic");
    }
}
