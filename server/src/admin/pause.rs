//! `delayer pause` and `delayer resume`: one topic, or every known one
//! (`--all`), through the SDK's flow.lua call, so the CLI, the HTTP API and
//! every SDK pause the same way (PROTOCOL.md, "Flow control").

use crate::admin::cli::FlowTarget;
use crate::admin::commands::Target;
use crate::fatal::Fatal;
use crate::jobview;
use crate::output;
use delayer::FlowState;
use delayer_protocol::calls::FlowAction;
use serde_json::{json, Value};

/// Pauses or resumes `topic`, or with `all` every topic `stats()` lists
/// (resume: those that are paused).
pub fn run(target: &Target, action: FlowAction, which: FlowTarget) -> Result<(), Fatal> {
    let FlowTarget { topic, all, json } = which;
    let client = target.client()?;
    let topics = match topic {
        Some(topic) if !all => vec![topic],
        _ => {
            let stats = client.stats().map_err(|e| target.sdk_failed(e))?;
            stats.topics.into_iter().filter(|t| t.raw_topic.is_none()).map(|t| t.topic).collect()
        }
    };
    let mut done = Vec::with_capacity(topics.len());
    for topic in &topics {
        let changed = match action {
            FlowAction::Resume if all && !client.is_paused(topic).map_err(|e| target.sdk_failed(e))? => continue,
            FlowAction::Pause => client.pause(topic),
            _ => client.resume(topic),
        };
        let changed = changed.map_err(|e| target.sdk_failed(e))?;
        let state = client.flow(topic).map_err(|e| target.sdk_failed(e))?;
        done.push((topic, FlowState { changed, ..state }));
    }
    if json {
        let items: Vec<Value> = done.iter().map(|(t, s)| state_json(t, s)).collect();
        let out = if all { json!({ "topics": items }) } else { items.into_iter().next().unwrap_or(Value::Null) };
        return output::line(out);
    }
    if all && done.is_empty() {
        let what = if action == FlowAction::Pause { "no known topic to pause" } else { "no paused topic" };
        return output::line(what);
    }
    for (topic, state) in &done {
        output::line(state_text(topic, state))?;
    }
    Ok(())
}

/// `{"topic", "paused", "paused_since", "held", "changed"}` (times in Unix
/// seconds), as the HTTP API answers too.
pub fn state_json(topic: &str, state: &FlowState) -> Value {
    json!({
        "topic": topic,
        "paused": state.paused_since.is_some(),
        "paused_since": state.paused_since.map(jobview::unix),
        "held": state.held,
        "changed": state.changed,
    })
}

/// "paused topic "sms" (since <time>, 3 min; 12 due job(s) held)", "resumed
/// topic "sms"", or what was already so.
fn state_text(topic: &str, state: &FlowState) -> String {
    match state.paused_since {
        Some(since) => {
            let (since, now) = (jobview::unix(since), jobview::unix(state.at));
            let what = if state.changed { "paused topic" } else { "already paused: topic" };
            format!(
                "{what} {topic:?} (since {}, {}; {} due job(s) held)",
                jobview::rfc3339(since),
                jobview::human_seconds((now - since).max(0.0)),
                state.held
            )
        }
        None if state.changed => format!("resumed topic {topic:?}: its due jobs become ready now"),
        None => format!("topic {topic:?} was not paused"),
    }
}
