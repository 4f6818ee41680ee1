//! What each operation sends to Redis and how its reply reads, shared by the
//! blocking client ([`crate::Delayer`]) and the async one
//! ([`crate::aio::Delayer`]), which differ only in how they send.
//!
//! Every operation is an [`Op`] ([`delayer_protocol::op`]): a state machine
//! without I/O that says what to send next ([`Step::Send`]) and reads each
//! reply until it is done ([`Step::Done`]); each client runs every operation
//! with one loop of its own. Most are one script call ([`Op::call`]), its
//! KEYS and ARGV from `delayer_protocol::calls`; a blocking wait
//! ([`crate::wait`]), a durable push's `WAIT`, push_many's pipelines and a
//! dead-letter drain take a few steps. One file per family: pushes
//! ([`push`]), the at-least-once calls ([`reliable`]), dead letters
//! ([`dead`]), one reader per script ([`replies`]); the 1.x calls (pop,
//! remove, reschedule) are here. Every builder takes the client's
//! [`Names`], which alone knows the layout.

mod dead;
mod push;
mod reliable;
mod replies;

pub(crate) use dead::*;
pub(crate) use push::*;
pub(crate) use reliable::*;
pub(crate) use replies::*;

pub(crate) use crate::keys::check_topic;
pub(crate) use crate::validate::id_of;

use crate::error::{Error, Result};
use crate::keys::Names;
use crate::validate;
use crate::Message;
use delayer_protocol::calls::{self, FlowAction};
pub(crate) use delayer_protocol::op::{Request, Step};
use std::time::{Duration, SystemTime};

/// An operation of this client: its errors are [`Error`]s.
pub(crate) type Op<'a, T> = delayer_protocol::op::Op<'a, T, Error>;

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
    Ok(Op::call(calls::pop(names, topic), parse_pop))
}

/// pop.lua for one topic, as a Worker fetches: the job, or the wait
/// instruction of a paused topic (which [`pop`]'s callers see as nothing).
pub(crate) fn pop_or_wait<'a>(names: &Names, topic: &str) -> Result<Op<'a, (Option<Message>, Option<FlowWait>)>> {
    check_topic(names, topic)?;
    Ok(Op::call(calls::pop(names, topic), |reply| match flow_wait(&reply) {
        Some(flow) => Ok((None, Some(flow))),
        None => Ok((parse_pop(reply)?, None)),
    }))
}

/// flow.lua (flow_topic.lua) for one topic: its state after `action`.
pub(crate) fn flow<'a>(names: &Names, topic: &str, action: FlowAction) -> Result<Op<'a, FlowState>> {
    check_topic(names, topic)?;
    Ok(Op::call(calls::flow(names, topic, action), |reply| Ok(flow_state(reply)?)))
}

/// flow.lua's pause, resume or unlimit: whether it changed the state.
pub(crate) fn flow_change<'a>(names: &Names, topic: &str, action: FlowAction) -> Result<Op<'a, bool>> {
    check_topic(names, topic)?;
    Ok(Op::call(calls::flow(names, topic, action), |reply| Ok(flow_state(reply)?.changed)))
}

/// flow.lua's read: whether the topic is paused.
pub(crate) fn is_paused<'a>(names: &Names, topic: &str) -> Result<Op<'a, bool>> {
    check_topic(names, topic)?;
    Ok(Op::call(calls::flow(names, topic, FlowAction::Get), |reply| Ok(flow_state(reply)?.paused_since.is_some())))
}

/// remove.lua for one id, any bytes, of `topic` (`None`: the classic
/// layout's global ids; `instead` names the call the per-topic layout needs).
pub(crate) fn remove<'a>(names: &Names, topic: Option<&str>, id: &[u8], instead: &str) -> Result<Op<'a, bool>> {
    let topic = names.id_topic(topic, "remove", instead)?;
    Ok(Op::call(calls::remove(names, topic, id_of(id)?), parse_remove))
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
    let call = calls::reschedule(names, topic, id_of(id)?, validate::delay_ms(delay)?);
    Ok(Op::call(call, parse_reschedule))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Layout;
    use crate::Job;
    use redis::Value;

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
}
