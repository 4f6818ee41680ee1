//! `delayer limit <topic> <rate> [--burst B]` and `delayer limit <topic>
//! off`: a topic's rate limit, through the SDK's flow.lua call, so the CLI,
//! the HTTP API and every SDK set it alike, and refuse alike (the rate's
//! rules are the script's: its refusal is a usage error here, exit 2).
//!
//! The limit paces jobs *becoming ready* (PROTOCOL.md, "Rate limits"): what
//! the ready list already holds goes out at consumer speed, so each answer
//! says that backlog, and warns when it is more than the burst.

use crate::admin::cli::{LimitTarget, Rate};
use crate::admin::commands::Target;
use crate::fatal::Fatal;
use crate::jobview::{rate_limit_json, rate_text};
use crate::output;
use delayer::inspect::Stats;
use delayer::FlowState;
use serde_json::{json, Value};

/// Sets or removes `topic`'s limit, and prints the state it leaves.
pub fn run(target: &Target, which: LimitTarget) -> Result<(), Fatal> {
    let LimitTarget { topic, rate, burst, json } = which;
    if rate == Rate::Off && burst.is_some() {
        return Err(Fatal::usage("--burst goes with a rate (say 100/s --burst 20), not with off"));
    }
    let client = target.client()?;
    let failed = |e| target.sdk_failed(e);
    let state = match rate {
        Rate::PerSecond(per_second) => client.set_rate_limit(&topic, per_second, burst).map_err(failed)?,
        Rate::Off => {
            let changed = client.clear_rate_limit(&topic).map_err(failed)?;
            FlowState { changed, ..client.flow(&topic).map_err(failed)? }
        }
    };
    let backlog = ready_backlog(&client.stats().map_err(failed)?, &topic);
    if json {
        return output::line(limit_json(&topic, &state, backlog));
    }
    output::line(state_text(&topic, &state))?;
    output::line(format_args!("{backlog} job(s) ready, {} due job(s) held", state.held))?;
    if let Some(warning) = backlog_warning(&state, backlog) {
        output::error(format_args!("warning: {warning}"));
    }
    Ok(())
}

/// `{"topic", "rate_limit": {"per_second", "burst"} | null, "changed",
/// "ready_backlog"}`, as the HTTP API answers too.
pub fn limit_json(topic: &str, state: &FlowState, ready_backlog: u64) -> Value {
    json!({
        "topic": topic,
        "rate_limit": rate_limit_json(state.rate_limit),
        "changed": state.changed,
        "ready_backlog": ready_backlog,
    })
}

/// The ids in `topic`'s ready list, as stats counted them (0 for a topic
/// stats does not list: it has no jobs).
pub fn ready_backlog(stats: &Stats, topic: &str) -> u64 {
    stats.topics.iter().find(|t| t.topic == topic && t.raw_topic.is_none()).map_or(0, |t| t.ready)
}

/// "topic sms: limit 50/s, burst 50", "topic sms: no limit", with what did
/// not change, and a pause, said.
fn state_text(topic: &str, state: &FlowState) -> String {
    let mut out = match state.rate_limit {
        Some(l) => format!("topic {topic}: limit {}, burst {}", rate_text(l.per_second), l.burst),
        None => format!("topic {topic}: no limit"),
    };
    if !state.changed {
        out.push_str(if state.rate_limit.is_some() { " (as it was)" } else { " (it had none)" });
    }
    if state.paused_since.is_some() {
        out.push_str("; paused: nothing becomes ready until `delayer resume`");
    }
    out
}

/// The warning for a ready backlog the limit does not pace: more jobs ready
/// than the burst lets become ready at once.
fn backlog_warning(state: &FlowState, backlog: u64) -> Option<String> {
    let limit = state.rate_limit?;
    (backlog > limit.burst).then(|| {
        format!(
            "{backlog} jobs are already ready: the limit paces jobs becoming ready, so these go out at consumer \
             speed"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use delayer::RateLimit;
    use std::time::UNIX_EPOCH;

    fn state(rate_limit: Option<RateLimit>, changed: bool) -> FlowState {
        FlowState { paused_since: None, held: 0, changed, at: UNIX_EPOCH, rate_limit }
    }

    #[test]
    fn the_state_and_the_backlog_are_said_as_people_read_them() {
        let limited = state(Some(RateLimit { per_second: 50.0, burst: 50 }), true);
        assert_eq!(state_text("sms", &limited), "topic sms: limit 50/s, burst 50");
        assert_eq!(state_text("sms", &state(None, true)), "topic sms: no limit");
        assert_eq!(state_text("sms", &state(None, false)), "topic sms: no limit (it had none)");
        assert_eq!(backlog_warning(&limited, 50), None, "a burst's worth goes out as the limit would let it");
        assert!(backlog_warning(&limited, 51).is_some_and(|w| w.starts_with("51 jobs are already ready")));
        assert_eq!(backlog_warning(&state(None, true), 1000), None);
        let v = limit_json("sms", &limited, 7);
        assert_eq!(
            v,
            json!({"topic": "sms", "rate_limit": {"per_second": 50.0, "burst": 50}, "changed": true,
                             "ready_backlog": 7})
        );
    }
}
