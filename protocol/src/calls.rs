//! One builder per client script: its KEYS and ARGV, in the order its
//! header in `lua/` states them (conformance/test_conformance_contract.py
//! holds every call to it), for a topic in either layout ([`Names`] alone
//! knows which). The arguments come checked by the caller ([`crate::validate`]);
//! what a call does with the reply is the caller's.

use crate::keys::Names;
use crate::scripts;
use redis::ScriptInvocation;

/// pop.lua for one topic.
pub fn pop(names: &Names, topic: &str) -> ScriptInvocation<'static> {
    let mut inv = scripts::POP.prepare_invoke();
    inv.key(names.ready(topic)).key(names.malformed(topic)).key(names.pool(topic)).key(names.reserved(topic));
    inv.key(names.flow(topic)).key(names.gate(topic)).arg(names.bucket_prefix(topic));
    inv
}

/// take.lua for an id BRPOP returned from `topic`'s ready list (raw bytes:
/// used exactly as stored).
pub fn take(names: &Names, topic: &str, id: &[u8]) -> ScriptInvocation<'static> {
    let mut inv = scripts::TAKE.prepare_invoke();
    inv.key(names.bucket_bytes(topic, id)).key(names.malformed(topic)).key(names.pool(topic));
    inv.key(names.reserved(topic)).key(names.ready(topic)).key(names.flow(topic)).key(names.gate(topic));
    inv.arg(id);
    inv
}

/// remove.lua (remove_topic.lua) for job `id` of `topic`; the classic one
/// also gets the flow-pool prefix (a job set aside there is cancelled too).
pub fn remove(names: &Names, topic: &str, id: &[u8]) -> ScriptInvocation<'static> {
    let mut inv = names.pick(&scripts::REMOVE, &scripts::REMOVE_TOPIC).prepare_invoke();
    inv.key(names.pool(topic)).key(names.bucket_bytes(topic, id));
    inv.key(names.scheduled_count()).arg(id);
    if let Names::Classic(_) = names {
        inv.arg(names.flow_pool_prefix());
    }
    inv
}

/// reschedule.lua for job `id` of `topic`, due `delay_ms` from now (the
/// flow-pool prefix last: "" in the per-topic layout).
pub fn reschedule(names: &Names, topic: &str, id: &[u8], delay_ms: u64) -> ScriptInvocation<'static> {
    let mut inv = scripts::RESCHEDULE.prepare_invoke();
    inv.key(names.pool(topic)).key(names.bucket_bytes(topic, id)).arg(id).arg(delay_ms).arg(names.wake());
    inv.arg(names.flow_pool_prefix());
    inv
}

/// reserve.lua's batch mode: up to `n` jobs after acking `acks` (id,
/// receipt; "" for any current reservation).
pub type ReserveBatch<'a> = (usize, &'a [(&'a [u8], &'a str)]);

/// reserve.lua for `topic` with `ttr_ms`: one job (`batch` `None`), or a
/// [`ReserveBatch`], then the wake channel.
pub fn reserve(names: &Names, topic: &str, ttr_ms: u64, batch: Option<ReserveBatch<'_>>) -> ScriptInvocation<'static> {
    let mut inv = scripts::RESERVE.prepare_invoke();
    inv.key(names.ready(topic)).key(names.reserved(topic)).key(names.malformed(topic));
    inv.key(names.receipt_seq(topic)).key(names.pool(topic)).key(names.outcomes(topic));
    inv.key(names.flow(topic)).key(names.gate(topic)).arg(names.bucket_prefix(topic)).arg(ttr_ms);
    match batch {
        None => inv.arg(""),
        Some((n, acks)) => acks.iter().fold(inv.arg(n), |inv, (id, receipt)| inv.arg(*id).arg(*receipt)),
    };
    inv.arg(names.wake());
    inv
}

/// ack.lua for reservation `receipt` ("": any current one) of job `id` of
/// `topic`.
pub fn ack(names: &Names, topic: &str, id: &[u8], receipt: &str) -> ScriptInvocation<'static> {
    let mut inv = scripts::ACK.prepare_invoke();
    inv.key(names.reserved(topic)).key(names.bucket_bytes(topic, id)).key(names.pool(topic));
    inv.key(names.outcomes(topic)).arg(id).arg(receipt);
    inv
}

/// touch.lua: the reservation's deadline becomes now + `ttr_ms`.
pub fn touch(names: &Names, topic: &str, id: &[u8], receipt: &str, ttr_ms: u64) -> ScriptInvocation<'static> {
    let mut inv = scripts::TOUCH.prepare_invoke();
    inv.key(names.reserved(topic)).key(names.bucket_bytes(topic, id)).key(names.pool(topic));
    inv.arg(id).arg(receipt).arg(ttr_ms).arg(names.wake());
    inv
}

/// release.lua or release_topic.lua ("held") for one reservation: `action` is a delay in ms,
/// "backoff" or "bury"; `error` ("": none) becomes the job's last_error.
pub fn release(
    names: &Names,
    topic: &str,
    id: &[u8],
    receipt: &str,
    action: &str,
    error: &str,
) -> ScriptInvocation<'static> {
    let (dead_key, dead_prefix) = names.release_dead(topic);
    let mut inv = names.pick(&scripts::RELEASE, &scripts::RELEASE_TOPIC).prepare_invoke();
    inv.key(names.reserved(topic)).key(names.pool(topic)).key(names.malformed(topic)).key(dead_key);
    inv.key(names.outcomes(topic));
    inv.arg(names.bucket_prefix(topic)).arg(dead_prefix).arg(action);
    inv.arg("held").arg(id).arg(receipt).arg(names.wake()).arg(error);
    inv
}

/// What [`flow`] does to a topic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FlowAction {
    /// Read the state.
    Get,
    /// Pause the topic (nothing of it handed out or made ready).
    Pause,
    /// Resume it (every waiter woken, its due jobs made ready).
    Resume,
    /// Let at most `per_second` of its due jobs become ready per second,
    /// `burst` at once (`None`: the script's default, one second's worth).
    /// The values go as given: flow.lua alone checks them (a bad one is its
    /// `ERR invalid argument: ...`), so every SDK, the CLI and HTTP refuse
    /// alike.
    Limit {
        /// Jobs per second.
        per_second: f64,
        /// Jobs at once.
        burst: Option<u64>,
    },
    /// Drop the rate limit.
    Unlimit,
}

impl FlowAction {
    /// The script's name of the action (its ARGV[2]).
    pub fn as_str(self) -> &'static str {
        match self {
            FlowAction::Get => "get",
            FlowAction::Pause => "pause",
            FlowAction::Resume => "resume",
            FlowAction::Limit { .. } => "limit",
            FlowAction::Unlimit => "unlimit",
        }
    }
}

/// flow.lua (flow_topic.lua) for `topic`: ARGV per_second and burst are ""
/// but for [`FlowAction::Limit`]. The rate is written with `{}`, the
/// shortest text that reads back as the same f64 (the script keeps it as
/// sent, so every SDK stores 0.5 as "0.5").
pub fn flow(names: &Names, topic: &str, action: FlowAction) -> ScriptInvocation<'static> {
    let mut inv = names.pick(&scripts::FLOW, &scripts::FLOW_TOPIC).prepare_invoke();
    inv.key(names.flow(topic)).key(names.gate(topic)).key(names.flow_held(topic));
    inv.arg(topic).arg(action.as_str()).arg(names.wake());
    let (per_second, burst) = match action {
        FlowAction::Limit { per_second, burst } => (per_second.to_string(), burst.map(|b| b.to_string())),
        _ => (String::new(), None),
    };
    inv.arg(per_second).arg(burst.unwrap_or_default());
    inv
}

/// dead.lua's (dead_topic.lua's) KEYS and first ARGV for `topic` and `action` ("list",
/// "purge", `"requeue <wake channel>"`); the caller adds the action's own.
pub fn dead(names: &Names, topic: &str, action: &str) -> ScriptInvocation<'static> {
    let mut inv = names.pick(&scripts::DEAD, &scripts::DEAD_TOPIC).prepare_invoke();
    inv.key(names.dead(topic)).key(names.pool(topic)).key(names.scheduled_count());
    inv.arg(names.bucket_prefix(topic)).arg(topic).arg(action);
    inv
}
