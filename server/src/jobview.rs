//! How `delayer job`, `delayer list` and the per-topic part of `delayer
//! stats` print what the SDK's inspection (`delayer::inspect`) found: text
//! for people, JSON for programs.
//!
//! The JSON of one job is the shape every viewpoint shares (the CLI here,
//! the HTTP API's `GET /v1/topics/{topic}/jobs/{id}`, the conformance test):
//! `id`, `state`, `topic`, `body_size`, `attempts`, `max_attempts`, `due`,
//! `deadline`, `dead_at` (Unix seconds, millisecond precision),
//! `dead_reason`, `last_error`, `traceparent`; what does not apply is `null`.
//!
//! Ids and topics are bytes in Redis, and a Delayer 1.x or PHP client may
//! write ones that are not UTF-8: every JSON output here, in the HTTP API
//! and in `delayer webhook` gives such a name as `id_base64` (`topic_base64`)
//! instead of `id` (`topic`), as bodies go as `body_base64` ([`put_name`]),
//! so nothing read is shown lossily.
//!
//! Times and durations for people ([`rfc3339`], [`human`]) are here too:
//! every view of a job, and the commands' text, show them alike.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use delayer::inspect::{JobInfo, JobState, Listed, Page, Stats, TopicFlow};
use delayer::RateLimit;
use delayer_protocol::numbers;
use serde_json::{json, Map, Value};
use std::time::{Duration, SystemTime};

/// Puts a name (an id or topic, as Redis holds it) in `obj` as `field` when
/// it is UTF-8 text, else as `<field>_base64` (standard base64).
pub fn put_name(obj: &mut Map<String, Value>, field: &str, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(text) => obj.insert(field.into(), Value::String(text.to_string())),
        Err(_) => obj.insert(format!("{field}_base64"), Value::String(BASE64.encode(bytes))),
    };
}

/// `value` (an object) with [`put_name`]'s `field` first.
fn named(field: &str, bytes: &[u8], value: Value) -> Value {
    let mut obj = Map::new();
    put_name(&mut obj, field, bytes);
    if let Value::Object(rest) = value {
        obj.extend(rest);
    }
    Value::Object(obj)
}

/// One job, as JSON.
pub fn job_json(job: &JobInfo) -> Value {
    let time = |t: Option<SystemTime>| t.map(|t| ms(unix(t)));
    let id = job.raw_id.as_deref().unwrap_or(job.id.as_bytes());
    named(
        "id",
        id,
        json!({
            "state": job.state.as_str(),
            "topic": job.topic,
            "body_size": job.body_size,
            "attempts": job.attempts,
            "max_attempts": job.max_attempts,
            "due": time(job.due),
            "deadline": time(job.deadline),
            "dead_at": time(job.dead_at),
            "dead_reason": job.dead_reason,
            "last_error": job.last_error,
            "traceparent": job.traceparent,
            "flow": job.flow.as_str(),
        }),
    )
}

/// Seconds rounded to the millisecond, as Redis keeps them.
fn ms(secs: f64) -> f64 {
    (secs * 1000.0).round() / 1000.0
}

/// One job, for people. `now` is the time the distances are counted from.
pub fn job_text(topic: &str, job: &JobInfo, now: SystemTime) -> String {
    let when = |t: SystemTime| {
        let (t, now) = (unix(t), unix(now));
        let rel =
            if t >= now { format!("in {}", human_seconds(t - now)) } else { format!("{} ago", human_seconds(now - t)) };
        format!("{} ({rel})", rfc3339(t))
    };
    let mut out = format!("job {:?} on topic {topic:?}: {}\n", job.id, job.state);
    let mut line = |name: &str, value: String| match name {
        "" => out.push_str(&format!("  {value}\n")),
        _ => out.push_str(&format!("  {name:<13} {value}\n")),
    };
    match job.state {
        JobState::Unknown => line("", "no such job on this topic (never pushed, done, removed or expired)".into()),
        JobState::Malformed => line("", "its data has no topic or is not a hash (PROTOCOL.md, malformed)".into()),
        _ => {}
    }
    if let Some(due) = job.due {
        line("due", when(due));
    }
    if let Some(deadline) = job.deadline {
        line("deadline", when(deadline));
    }
    if let Some(dead_at) = job.dead_at {
        line("dead since", when(dead_at));
    }
    if let Some(reason) = &job.dead_reason {
        line("dead reason", reason.clone());
    }
    if let Some(size) = job.body_size {
        line("body", format!("{size} bytes"));
    }
    if let Some(attempts) = job.attempts {
        let limit = match job.max_attempts {
            Some(0) => " (no limit)".to_string(),
            Some(n) => format!(" of {n}"),
            None => String::new(),
        };
        line("attempts", format!("{attempts}{limit}"));
    }
    if let Some(error) = &job.last_error {
        line("last error", error.clone());
    }
    if let Some(traceparent) = &job.traceparent {
        line("traceparent", traceparent.clone());
    }
    match job.flow {
        TopicFlow::Paused => {
            line("flow", "paused: its topic hands out nothing and makes nothing ready until resumed".into())
        }
        TopicFlow::Limited => {
            line("flow", "limited: its topic's rate limit paces how fast its due jobs become ready".into())
        }
        TopicFlow::Running => {}
    }
    out
}

/// A page of scheduled (due) or reserved (deadline) jobs, as JSON.
pub fn timed_json(page: &Page<Listed>, field: &str) -> Value {
    let items: Vec<Value> =
        page.items.iter().map(|l| named("id", l.id_bytes(), json!({ field: ms(unix(l.time)) }))).collect();
    json!({ "items": items, "next": page.next })
}

/// A page of ready ids, as JSON.
pub fn ids_json(page: &Page<Vec<u8>>) -> Value {
    let items: Vec<Value> = page.items.iter().map(|id| named("id", id, json!({}))).collect();
    json!({ "items": items, "next": page.next })
}

/// A page of scheduled or reserved jobs, for people.
pub fn timed_text(what: &str, page: &Page<Listed>, now: SystemTime) -> String {
    let mut out = String::new();
    for l in &page.items {
        let (t, now) = (unix(l.time), unix(now));
        let rel = if t >= now { format!("in {}", human_seconds(t - now)) } else { "now".to_string() };
        out.push_str(&format!("{}  {what} {} ({rel})\n", l.id, rfc3339(t)));
    }
    out + &next_text(page.items.is_empty(), page.next)
}

/// A page of ready ids, for people.
pub fn ids_text(page: &Page<Vec<u8>>) -> String {
    let mut out: String = page.items.iter().map(|id| format!("{}\n", String::from_utf8_lossy(id))).collect();
    out.push_str(&next_text(page.items.is_empty(), page.next));
    out
}

/// The paging line under a listing.
pub fn next_text(empty: bool, next: Option<u64>) -> String {
    match (empty, next) {
        (true, None) => "(none)\n".to_string(),
        (_, Some(next)) => format!("(more: --cursor {next})\n"),
        (false, None) => String::new(),
    }
}

/// Per-topic numbers, as JSON: a list of `{topic, scheduled, ready,
/// reserved, dead, paused, paused_since, held, rate_limit}` (`reserved` null
/// when too many jobs are reserved to count per topic).
pub fn topics_json(stats: &Stats) -> Value {
    let topics: Vec<Value> = stats
        .topics
        .iter()
        .map(|t| {
            let topic = t.raw_topic.as_deref().unwrap_or(t.topic.as_bytes());
            named(
                "topic",
                topic,
                json!({"scheduled": t.scheduled, "ready": t.ready, "reserved": t.reserved, "dead": t.dead,
                       "paused": t.paused, "paused_since": t.paused_since.map(|s| ms(unix(s))), "held": t.held,
                       "rate_limit": rate_limit_json(t.rate_limit)}),
            )
        })
        .collect();
    json!(topics)
}

/// Per-topic numbers, as a table.
pub fn topics_text(stats: &Stats) -> String {
    let mut out = format!("{:<30} {:>10} {:>10} {:>10} {:>10}\n", "topic", "scheduled", "ready", "reserved", "dead");
    if stats.topics.is_empty() {
        out.push_str("  (none)\n");
    }
    for t in &stats.topics {
        let reserved = t.reserved.map_or("?".to_string(), |n| n.to_string());
        let paused = match (t.paused, t.paused_since) {
            (false, _) => None,
            (true, Some(since)) => Some(format!("paused since {}", rfc3339(unix(since)))),
            (true, None) => Some("paused".to_string()),
        };
        let limit = t.rate_limit.map(|l| format!("limit {} burst {}", rate_text(l.per_second), l.burst));
        let controls: Vec<String> = paused.into_iter().chain(limit).collect();
        let flow = match controls.is_empty() {
            true => String::new(),
            false => format!("  {} ({} held)", controls.join(", "), t.held),
        };
        out.push_str(&format!(
            "{:<30} {:>10} {:>10} {:>10} {:>10}{flow}\n",
            t.topic, t.scheduled, t.ready, reserved, t.dead
        ));
    }
    out
}

/// A topic's rate limit as JSON, `{"per_second", "burst"}`, or null when it
/// has none (the CLI's stats and limit, the HTTP API's stats and limit).
pub fn rate_limit_json(limit: Option<RateLimit>) -> Value {
    limit.map_or(Value::Null, |l| json!({"per_second": l.per_second, "burst": l.burst}))
}

/// A rate for people, in the unit that makes it 1 or more where it can:
/// `50/s`, `30/min` (0.5 a second), `2/h`; to six decimals, so a rate given
/// per minute or hour reads back as given.
pub fn rate_text(per_second: f64) -> String {
    let (n, unit) = match per_second {
        r if r >= 1.0 => (r, "s"),
        r if r * 60.0 >= 1.0 => (r * 60.0, "min"),
        r => (r * 3600.0, "h"),
    };
    format!("{}/{unit}", (n * 1e6).round() / 1e6)
}

/// A time as Unix seconds (0 before 1970).
pub(crate) fn unix(t: SystemTime) -> f64 {
    t.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// A time for people, to the millisecond. Read within 1970..9999 first
/// (`delayer_protocol::numbers`): the formatter fails on later years, and a score
/// of `inf` must print, not panic.
pub(crate) fn rfc3339(unix: f64) -> String {
    let t = numbers::time_secs(unix).or(numbers::Time::EPOCH).system_time();
    humantime::format_rfc3339_millis(t).to_string()
}

/// A duration for people, to its two largest units: `850 ms`, `12 s 40 ms`,
/// `59 min 58 s`, `3 d 4 h` (cut, not rounded: `in 59 min 59 s` is never
/// shown as an hour).
pub fn human(d: Duration) -> String {
    const UNITS: [(&str, u128); 5] = [("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000), ("ms", 1)];
    let ms = d.as_millis();
    let Some(first) = UNITS.iter().position(|(_, size)| ms >= *size) else { return "0 ms".into() };
    let (name, size) = UNITS[first];
    let mut out = format!("{} {name}", ms / size);
    if let Some((next, next_size)) = UNITS.get(first + 1) {
        let rest = ms % size / next_size;
        if rest > 0 {
            out.push_str(&format!(" {rest} {next}"));
        }
    }
    out
}

/// [`human`] for a number of seconds (negative counts as 0).
pub(crate) fn human_seconds(secs: f64) -> String {
    human(Duration::try_from_secs_f64(secs.max(0.0)).unwrap_or(Duration::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_in_the_unit_they_were_likely_given_in() {
        assert_eq!(rate_text(50.0), "50/s");
        assert_eq!(rate_text(2.5), "2.5/s");
        assert_eq!(rate_text(0.5), "30/min");
        assert_eq!(rate_text(2.0 / 3600.0), "2/h");
        assert_eq!(rate_text(1.0 / 86400.0), "0.041667/h");
        assert_eq!(rate_text(1_000_000.0), "1000000/s");
        assert_eq!(rate_limit_json(None), Value::Null);
        assert_eq!(
            rate_limit_json(Some(RateLimit { per_second: 0.5, burst: 1 })),
            json!({"per_second": 0.5, "burst": 1})
        );
    }

    #[test]
    fn durations_read_as_people_say_them() {
        let ms = Duration::from_millis;
        assert_eq!(human(ms(0)), "0 ms");
        assert_eq!(human(ms(850)), "850 ms");
        assert_eq!(human(ms(12_040)), "12 s 40 ms");
        assert_eq!(human(ms(5_000)), "5 s");
        assert_eq!(human(ms((59 * 60 + 58) * 1000 + 999)), "59 min 58 s");
        assert_eq!(human(ms(3_600_000)), "1 h");
        assert_eq!(human(ms((3 * 86_400 + 4 * 3600 + 59 * 60) * 1000)), "3 d 4 h");
        assert_eq!(human(Duration::from_secs(10 * 365 * 86_400)), "3650 d");
        assert_eq!(human_seconds(-3.0), "0 ms");
        assert_eq!(human_seconds(f64::NAN), "0 ms");
    }
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn job_json_keeps_times_to_the_millisecond_and_nulls_the_rest() {
        let job = JobInfo {
            id: "42".into(),
            state: JobState::Scheduled,
            topic: Some("t".into()),
            body_size: Some(3),
            attempts: Some(0),
            max_attempts: None,
            due: Some(UNIX_EPOCH + Duration::from_millis(1_700_000_000_125)),
            deadline: None,
            dead_at: None,
            dead_reason: None,
            last_error: None,
            raw_id: None,
            traceparent: None,
            flow: TopicFlow::Paused,
        };
        let v = job_json(&job);
        assert_eq!(v["due"], json!(1_700_000_000.125));
        assert_eq!((v["state"].as_str(), v["deadline"].is_null()), (Some("scheduled"), true));
        let text = job_text("t", &job, UNIX_EPOCH + Duration::from_secs(1_700_000_000));
        assert!(text.contains("due") && text.contains("(in 125 ms)"), "{text}");
        assert_eq!(v["flow"], json!("paused"));
        assert!(text.contains("paused"), "{text}");
    }
}
