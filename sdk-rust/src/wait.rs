//! The blocking calls' waits (bpop, breserve, and a Worker's wait for
//! work): the protocol's wait without I/O ([`delayer_protocol::wait`]),
//! claiming the job with pop's or reserve's reply decoder.

use crate::error::Result;
use crate::keys::Names;
use crate::ops::{parse_pop, parse_reserve, Op};
use crate::validate;
use crate::{Message, Reserved};
use delayer_protocol::wait::{wait, Claim};
use std::time::Duration;

/// A bpop of `topic`, up to `timeout` (`Duration::ZERO`: forever).
pub(crate) fn bpop(names: &Names, topic: &str, timeout: Duration) -> Result<Op<'static, Option<Message>>> {
    Ok(wait(names, topic, timeout, Claim::Pop, parse_pop)?)
}

/// A breserve of `topic` with `ttr`, up to `timeout` (`ZERO`: forever).
pub(crate) fn breserve(
    names: &Names,
    topic: &str,
    ttr: Duration,
    timeout: Duration,
) -> Result<Op<'static, Option<Reserved>>> {
    let ttr_ms = validate::ttr_ms(ttr)?;
    Ok(wait(names, topic, timeout, Claim::Reserve { ttr_ms }, parse_reserve)?)
}

/// A wait until `topic`'s ready queue holds an id, up to `timeout`
/// (`ZERO`: forever), taking nothing: whether it does.
pub(crate) fn ready(names: &Names, topic: &str, timeout: Duration) -> Result<Op<'static, bool>> {
    Ok(wait(names, topic, timeout, Claim::Peek, |_| Ok(Some(())))?.map(|peeked| Ok(peeked.is_some())))
}
