//! Flow control at the broker (PROTOCOL.md, "Flow control"): pausing and
//! resuming a topic, and its rate limit. Each call is one flow.lua
//! (flow_topic.lua) call, whose state lives in Redis, so every server and
//! consumer sees it at once; the script alone checks a limit's rate and
//! burst (its refusal is an [`crate::Error::InvalidArgument`]), so every
//! SDK, the CLI and HTTP refuse alike.

use crate::ops;
use delayer_protocol::calls::FlowAction;
use delayer_protocol::replies::FlowState;

twins! {
    /// Pauses `topic`: until [`crate::Delayer::resume`], no Delayer 2
    /// consumer is handed a job of it (pop, bpop, reserve, Workers, HTTP,
    /// webhook) and no server makes its due jobs ready; pushes, removes,
    /// reschedules and lookups work as usual, and ready jobs stay where they
    /// are. Every server and consumer sees it at once (the state is in
    /// Redis). `true` when the topic was running. Delayer 1.x clients that
    /// `RPOP` the ready list directly do not obey it (PROTOCOL.md, "Flow
    /// control").
    #[aio]
    /// As [`crate::Delayer::pause`].
    pub fn pause(&self, topic: &str) -> Result<bool> =
        ops::flow_change(self.keys(), topic, FlowAction::Pause);

    /// Resumes `topic`: every consumer waiting on it wakes, and its held due
    /// jobs become ready at the drain's full speed (at its rate limit, when
    /// it has one). `true` when it was paused.
    #[aio]
    /// As [`crate::Delayer::resume`].
    pub fn resume(&self, topic: &str) -> Result<bool> =
        ops::flow_change(self.keys(), topic, FlowAction::Resume);

    /// Whether `topic` is paused.
    #[aio]
    /// As [`crate::Delayer::is_paused`].
    pub fn is_paused(&self, topic: &str) -> Result<bool> =
        ops::is_paused(self.keys(), topic);

    /// `topic`'s flow control: since when it is paused, its rate limit, and
    /// how many due jobs the pause or the limit holds back.
    #[aio]
    /// As [`crate::Delayer::flow`].
    pub fn flow(&self, topic: &str) -> Result<FlowState> =
        ops::flow(self.keys(), topic, FlowAction::Get);

    /// Limits how many of `topic`'s jobs *become ready*: at most
    /// `per_second` a second (a decimal: `0.5` is one every two seconds),
    /// and up to `burst` at once after a quiet spell (`None`: one second's
    /// worth, `max(1, ceil(per_second))`). One token bucket in Redis paces
    /// every server together. Due jobs beyond the limit wait in due order
    /// and count as held ([`FlowState::held`]); jobs already in the ready
    /// list are not paced, and go out at consumer speed. Setting a new rate
    /// or burst keeps what the bucket holds (at most the new burst).
    ///
    /// The rate must be above 0 (a rate of 0 is refused: pause the topic
    /// instead), at least one job a day and at most 1,000,000 a second; the
    /// burst from 1 to 1,000,000 and at least 1% of the rate. The script
    /// checks these: a refusal is [`crate::Error::InvalidArgument`], and
    /// nothing is written. Returns the topic's state after the call.
    #[aio]
    /// As [`crate::Delayer::set_rate_limit`].
    pub fn set_rate_limit(&self, topic: &str, per_second: f64, burst: Option<u64>) -> Result<FlowState> =
        ops::flow(self.keys(), topic, FlowAction::Limit { per_second, burst });

    /// Drops `topic`'s rate limit: the due jobs it held become ready at the
    /// drain's full speed (still counted as held until then). `true` when
    /// the topic had a limit.
    #[aio]
    /// As [`crate::Delayer::clear_rate_limit`].
    pub fn clear_rate_limit(&self, topic: &str) -> Result<bool> =
        ops::flow_change(self.keys(), topic, FlowAction::Unlimit);
}
