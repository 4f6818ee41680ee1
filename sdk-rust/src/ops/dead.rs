//! Dead letters: listing, re-queueing and purging (dead.lua).

use super::replies::{parse_dead_drain, parse_dead_list};
use super::{id_of, Op, Step};
use crate::error::Result;
use crate::keys::Names;
use crate::validate;
use crate::DeadLetter;
use delayer_protocol::calls;

/// dead.lua "list".
pub(crate) fn dead_list<'a>(names: &Names, topic: &str, start: usize, count: usize) -> Result<Op<'a, Vec<DeadLetter>>> {
    super::check_topic(names, topic)?;
    let count = validate::dead_count(count)?;
    validate::position("start", start as u64)?;
    let mut inv = calls::dead(names, topic, "list");
    inv.arg(start).arg(count);
    Ok(Op::call(inv, parse_dead_list))
}

/// Which dead letters to re-queue or purge.
#[derive(Clone, Copy)]
pub(crate) enum DeadAction {
    /// Back into the pool, due now.
    Requeue,
    /// Deleted.
    Purge,
}

/// dead.lua "requeue" / "purge": calls for `ids` (any bytes; at most
/// [`validate::MAX_DEAD_PER_CALL`] per call), or with `None` calls taking
/// that many from the oldest end while one takes a full count. How many
/// were re-queued or purged. A re-queue names the wake channel in its
/// action ("requeue <prefix>wake": dead.lua announces jobs due now).
pub(crate) fn dead_drain<'a>(
    names: &'a Names,
    topic: &'a str,
    action: DeadAction,
    ids: Option<&[&[u8]]>,
) -> Result<Op<'a, u64>> {
    super::check_topic(names, topic)?;
    let word = match action {
        DeadAction::Requeue => format!("requeue {}", names.wake()),
        DeadAction::Purge => "purge".to_string(),
    };
    Ok(match ids {
        None => drain_all(names, topic, word),
        Some(ids) => {
            ids.iter().try_for_each(|id| id_of(id).map(drop))?;
            let calls = ids.chunks(validate::MAX_DEAD_PER_CALL).map(|chunk| {
                let mut inv = calls::dead(names, topic, &word);
                inv.arg(0).arg(chunk);
                Op::call(inv, |reply| Ok(parse_dead_drain(reply)?.0))
            });
            Op::all(calls.collect()).map(|done| Ok(done.into_iter().sum()))
        }
    })
}

/// Ids given as text, as the bytes dead.lua takes.
pub(crate) fn raw_ids<'i>(ids: &[&'i str]) -> Vec<&'i [u8]> {
    ids.iter().map(|id| id.as_bytes()).collect()
}

/// dead.lua taking a full count from the oldest end, again while it takes
/// a full count: the total.
fn drain_all<'a>(names: &'a Names, topic: &'a str, word: String) -> Op<'a, u64> {
    let mut total = 0;
    Op::new(move |reply| {
        if let Some(reply) = reply {
            let (done, taken) = parse_dead_drain(reply)?;
            total += done;
            if taken < validate::MAX_DEAD_PER_CALL as u64 {
                return Ok(Step::Done(total));
            }
        }
        let mut inv = calls::dead(names, topic, &word);
        inv.arg(validate::MAX_DEAD_PER_CALL);
        Ok(Step::Send(inv.into()))
    })
}
