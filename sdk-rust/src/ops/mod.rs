//! What each operation sends to Redis and how its reply reads, shared by the
//! blocking client ([`crate::Delayer`]) and the async one
//! ([`crate::aio::Delayer`]), which differ only in how they wait.
//!
//! One file per family: pushes ([`push`]), the at-least-once calls
//! ([`reliable`]), dead letters ([`dead`]), and the reply readers they share
//! ([`replies`]); the 1.x calls (pop, take, remove, reschedule) are here.

mod dead;
mod push;
mod reliable;
mod replies;

pub(crate) use dead::*;
pub(crate) use push::*;
pub(crate) use reliable::*;
pub(crate) use replies::*;

use crate::error::Result;
use crate::keys::Keys;
use crate::scripts;
use crate::validate;
use redis::{Cmd, Pipeline, ScriptInvocation};
use std::time::Duration;

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

/// reschedule.lua for one id.
pub(crate) fn reschedule(keys: &Keys, id: &str, delay: Duration) -> Result<ScriptInvocation<'static>> {
    validate::name("id", id)?;
    let delay_ms = validate::delay_ms(delay)?;
    let mut inv = scripts::RESCHEDULE.prepare_invoke();
    inv.key(keys.job_pool()).key(keys.job_bucket(id)).arg(id).arg(delay_ms).arg(keys.wake());
    Ok(inv)
}
