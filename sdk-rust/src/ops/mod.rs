//! What each operation sends to Redis and how its reply reads, shared by the
//! blocking client ([`crate::Delayer`]) and the async one
//! ([`crate::aio::Delayer`]), which differ only in how they wait.
//!
//! One file per family: pushes ([`push`]), the at-least-once calls
//! ([`reliable`]), dead letters ([`dead`]), and the reply readers they share
//! ([`replies`]), the per-topic layout's index write ([`index`]); the 1.x
//! calls (pop, take, remove, reschedule) are here. Every builder takes the
//! client's [`Names`], so the two layouts share all of this.

mod dead;
mod index;
mod push;
mod reliable;
mod replies;

pub(crate) use dead::*;
pub(crate) use index::*;
pub(crate) use push::*;
pub(crate) use reliable::*;
pub(crate) use replies::*;

use crate::connection::Batch;
use crate::error::{Error, Result};
use crate::keys::{Layout, Names};
use crate::scripts;
use crate::validate;
use redis::{Cmd, ScriptInvocation};
use std::time::Duration;

/// One thing to send to Redis; the clients run it, each its own way.
pub(crate) enum Request {
    /// A script call.
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

/// The names under `prefix` in `layout`; the per-topic layout refuses a
/// prefix with a brace (it would move every name's hash tag).
pub(crate) fn names(prefix: &str, layout: Layout) -> Result<Names> {
    let names = Names::new(prefix, layout);
    check_prefix(&names)?;
    Ok(names)
}

fn check_prefix(names: &Names) -> Result<()> {
    let prefix = names.prefix();
    if names.layout() == Layout::Topic && prefix.contains(['{', '}']) {
        return Err(Error::InvalidArgument(format!(
            "key prefix {prefix:?} contains a brace, which the per-topic layout cannot use"
        )));
    }
    Ok(())
}

/// Checks a topic: a name, and in the per-topic layout free of the braces
/// that would move its hash tag (the SDK's calls check it themselves; tools
/// that read keys directly call this).
pub fn check_topic(names: &Names, topic: &str) -> Result<()> {
    validate::name("topic", topic)?;
    check_prefix(names)?;
    if names.layout() == Layout::Topic && topic.contains(['{', '}']) {
        return Err(Error::InvalidArgument(format!(
            "topic {topic:?} may not contain \"{{\" or \"}}\" in the per-topic layout"
        )));
    }
    Ok(())
}

/// The topic of a call that names its job by id: any ("") in the classic
/// layout, where ids are global; required in the per-topic layout, where
/// the error says which call to make (`instead`).
pub(crate) fn topic_of<'a>(names: &Names, topic: Option<&'a str>, call: &str, instead: &str) -> Result<&'a str> {
    match (topic, names.layout()) {
        // The classic layout names no key by it: a topic read back from
        // Redis (any 1.x name) is fine.
        (Some(topic), Layout::Classic) => Ok(topic),
        (Some(topic), Layout::Topic) => check_topic(names, topic).map(|()| topic),
        (None, Layout::Classic) => Ok(""),
        (None, Layout::Topic) => {
            Err(Error::InvalidArgument(format!("{call} needs the topic in the per-topic layout: use {instead}")))
        }
    }
}

/// pop.lua for one topic.
pub(crate) fn pop(names: &Names, topic: &str) -> Result<ScriptInvocation<'static>> {
    check_topic(names, topic)?;
    let mut inv = scripts::POP.prepare_invoke();
    inv.key(names.ready(topic)).key(names.malformed(topic)).key(names.pool(topic)).key(names.reserved(topic));
    inv.arg(names.bucket_prefix(topic));
    Ok(inv)
}

/// take.lua for an id BRPOP returned from `topic`'s ready list (raw bytes:
/// used exactly as stored).
pub(crate) fn take(names: &Names, topic: &str, id: &[u8]) -> ScriptInvocation<'static> {
    let mut inv = scripts::TAKE.prepare_invoke();
    inv.key(names.bucket_bytes(topic, id)).key(names.malformed(topic)).key(names.pool(topic));
    inv.key(names.reserved(topic)).arg(id);
    inv
}

/// remove.lua for one id, any bytes (of `topic`, "" in the classic layout: see [`topic_of`]).
pub(crate) fn remove(names: &Names, topic: &str, id: &[u8]) -> Result<ScriptInvocation<'static>> {
    if id.is_empty() {
        return Err(Error::InvalidArgument("id must not be empty".into()));
    }
    let mut inv = scripts::REMOVE.prepare_invoke();
    inv.key(names.pool(topic)).key(names.bucket_bytes(topic, id));
    if let Some(counts) = names.scheduled_count() {
        inv.key(counts);
    }
    inv.arg(id);
    Ok(inv)
}

/// reschedule.lua for one id, any bytes (of `topic`, as [`remove`]).
pub(crate) fn reschedule(names: &Names, topic: &str, id: &[u8], delay: Duration) -> Result<ScriptInvocation<'static>> {
    if id.is_empty() {
        return Err(Error::InvalidArgument("id must not be empty".into()));
    }
    let delay_ms = validate::delay_ms(delay)?;
    let mut inv = scripts::RESCHEDULE.prepare_invoke();
    inv.key(names.pool(topic)).key(names.bucket_bytes(topic, id)).arg(id).arg(delay_ms).arg(names.script_wake());
    Ok(inv)
}
