//! The flow-control ops (issue 23): pause, resume, is_paused, flow,
//! set_rate_limit, clear_rate_limit, and stats (whose topics say their
//! pause and limit), answered in the shape every driver shares
//! (conformance/test_conformance_flow.py).

use super::{bad, json_string, num_field, sdk_err, str_field, time_or_null, Fail, Req};
use delayer::{Delayer, FlowState, RateLimit};

/// The answer of a flow-control op, `None` when `op` is none of them.
pub fn run(client: &Delayer, op: &str, req: &Req) -> Option<Result<Vec<(&'static str, String)>, Fail>> {
    let answer = match op {
        "pause" | "resume" => (|| {
            let topic = str_field(req, "topic")?;
            let changed = if op == "pause" { client.pause(topic) } else { client.resume(topic) }.map_err(sdk_err)?;
            Ok(vec![("changed", changed.to_string())])
        })(),
        "is_paused" => (|| {
            let paused = client.is_paused(str_field(req, "topic")?).map_err(sdk_err)?;
            Ok(vec![("paused", paused.to_string())])
        })(),
        "flow" => (|| Ok(state(&client.flow(str_field(req, "topic")?).map_err(sdk_err)?, false)))(),
        "set_rate_limit" => (|| {
            let topic = str_field(req, "topic")?;
            let per_second = num_field(req, "per_second")?.ok_or_else(|| bad("set_rate_limit needs per_second"))?;
            let burst = num_field(req, "burst")?.map(burst).transpose()?;
            Ok(state(&client.set_rate_limit(topic, per_second, burst).map_err(sdk_err)?, true))
        })(),
        "clear_rate_limit" => (|| {
            let changed = client.clear_rate_limit(str_field(req, "topic")?).map_err(sdk_err)?;
            Ok(vec![("changed", changed.to_string())])
        })(),
        "stats" => client.stats().map_err(sdk_err).map(|stats| {
            let topics: Vec<String> = stats
                .topics
                .iter()
                .map(|t| {
                    let (per_second, burst) = limit(t.rate_limit);
                    format!(
                        "{{\"topic\":{},\"scheduled\":{},\"ready\":{},\"reserved\":{},\"dead\":{},\"paused\":{},\"paused_since\":{},\"held\":{},\"per_second\":{per_second},\"burst\":{burst}}}",
                        json_string(&t.topic),
                        t.scheduled,
                        t.ready,
                        t.reserved.map_or("null".into(), |n| n.to_string()),
                        t.dead,
                        t.paused,
                        time_or_null(t.paused_since),
                        t.held
                    )
                })
                .collect();
            vec![
                ("scheduled_total", stats.scheduled_total.to_string()),
                ("reserved_total", stats.reserved_total.to_string()),
                ("topics", format!("[{}]", topics.join(","))),
            ]
        }),
        _ => return None,
    };
    Some(answer)
}

/// A flow state's `paused_since`, `held`, `per_second` and `burst` (null
/// when no limit), and `changed` after a change.
fn state(s: &FlowState, with_changed: bool) -> Vec<(&'static str, String)> {
    let (per_second, burst) = limit(s.rate_limit);
    let mut out = vec![("paused_since", time_or_null(s.paused_since)), ("held", s.held.to_string())];
    if with_changed {
        out.push(("changed", s.changed.to_string()));
    }
    out.extend([("per_second", per_second), ("burst", burst)]);
    out
}

/// A limit's rate (`{}`: the shortest text of the number, a JSON number)
/// and burst, or two nulls.
fn limit(limit: Option<RateLimit>) -> (String, String) {
    match limit {
        Some(l) => (l.per_second.to_string(), l.burst.to_string()),
        None => ("null".into(), "null".into()),
    }
}

/// A JSON burst as the SDK's `u64`; one that is no whole number from 0 up
/// cannot be passed to it, and is answered as the invalid argument it is
/// (0 goes on: the script refuses it, as every SDK's).
fn burst(n: f64) -> Result<u64, Fail> {
    if n.fract() == 0.0 && (0.0..1.8e19).contains(&n) {
        Ok(n as u64)
    } else {
        Err(("invalid_argument", format!("driver: burst {n} cannot be passed to the Rust SDK (u64)")))
    }
}
