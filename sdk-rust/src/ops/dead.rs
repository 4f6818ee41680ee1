//! Dead letters: listing, re-queueing and purging (dead.lua).

use super::replies::{array, int};
use crate::error::Result;
use crate::keys::Names;
use crate::scripts;
use crate::validate;
use redis::{ScriptInvocation, Value};

fn dead_call(names: &Names, topic: &str, action: &str) -> ScriptInvocation<'static> {
    let mut inv = scripts::DEAD.prepare_invoke();
    inv.key(names.dead(topic)).key(names.pool(topic));
    if let Some(counts) = names.scheduled_count() {
        inv.key(counts);
    }
    inv.arg(names.bucket_prefix(topic)).arg(topic).arg(action);
    inv
}

/// dead.lua "list".
pub(crate) fn dead_list(names: &Names, topic: &str, start: usize, count: usize) -> Result<ScriptInvocation<'static>> {
    super::check_topic(names, topic)?;
    let count = validate::dead_count(count)?;
    validate::position("start", start as u64)?;
    let mut inv = dead_call(names, topic, "list");
    inv.arg(start).arg(count);
    Ok(inv)
}

/// Which dead letters to re-queue or purge.
pub(crate) enum DeadAction {
    /// Back into the pool, due now.
    Requeue,
    /// Deleted.
    Purge,
}

/// dead.lua "requeue" / "purge": the calls for `ids` (any bytes; at most
/// [`validate::MAX_DEAD_PER_CALL`] per call), or with `None` one call taking
/// that many from the oldest end, to repeat while it takes a full count.
pub(crate) fn dead_drain(
    names: &Names,
    topic: &str,
    action: DeadAction,
    ids: Option<&[&[u8]]>,
) -> Result<Vec<ScriptInvocation<'static>>> {
    super::check_topic(names, topic)?;
    let action = match action {
        DeadAction::Requeue => "requeue",
        DeadAction::Purge => "purge",
    };
    let Some(ids) = ids else {
        let mut inv = dead_call(names, topic, action);
        inv.arg(validate::MAX_DEAD_PER_CALL);
        return Ok(vec![inv]);
    };
    if ids.iter().any(|id| id.is_empty()) {
        return Err(crate::Error::InvalidArgument("id must not be empty".into()));
    }
    Ok(ids
        .chunks(validate::MAX_DEAD_PER_CALL)
        .map(|chunk| {
            let mut inv = dead_call(names, topic, action);
            inv.arg(0).arg(chunk);
            inv
        })
        .collect())
}

/// Whether a dead.lua call that took `taken` entries is to be made again:
/// only when draining all (no ids) and it took a full count.
pub(crate) fn drain_again(ids: Option<&[&[u8]]>, taken: u64) -> bool {
    ids.is_none() && taken >= validate::MAX_DEAD_PER_CALL as u64
}

/// dead.lua's `{done, taken}`.
pub(crate) fn parse_drained(reply: Value) -> Result<(u64, u64)> {
    let mut parts = array(reply, 2, "{done, taken}")?.into_iter();
    Ok((int(parts.next())?, int(parts.next())?))
}
