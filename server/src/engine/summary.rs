//! The movers' info line: a summary of what moved, every [`EVERY`], only
//! when something moved (or was dropped as an orphan); each batch has its
//! own line at debug.
//!
//! One info line per batch made a server in light use write thousands of
//! lines in minutes, burying the warnings. The summary says how many jobs
//! moved, in how many batches, the top `TOP` topics by count (and how many
//! others, with their total), the orphans dropped (ids whose job data was
//! gone: a sign of jobs lost to eviction or expiry), and how late the jobs
//! were: the most (the
//! oldest due time of a batch against Redis's clock) and the 99th
//! percentile when per-job lateness is known (metrics or the API on), to
//! within 10 % (a histogram of `BUCKETS` buckets, each 10 % wider than the
//! last; the bound given is the bucket's upper one, never under the true
//! value). Memory is bounded: at most `MAX_TOPICS` topics are counted by
//! name in a period, the rest as others. Both layouts' movers feed it
//! ([`record`]); the server says the summary on a timer ([`every`]) and once
//! more when it stops ([`flush`]).

use crate::scripts::MoveReply;
use log::{debug, info};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often the summary is said (when something moved).
pub const EVERY: Duration = Duration::from_secs(60);

/// Topics named in the summary; the others are counted together.
const TOP: usize = 10;

/// Topics counted by name in one period (the rest count as others).
const MAX_TOPICS: usize = 10_000;

/// Lateness buckets: bucket `i` holds up to `1.1^(i+1) - 1` ms, so the
/// last one reaches past a year.
const BUCKETS: usize = 256;
const GROWTH: f64 = 1.1;

/// What moved since the last summary.
struct Totals {
    /// The first batch counted.
    since: Instant,
    moved: u64,
    orphans: u64,
    batches: u64,
    per_topic: HashMap<String, u64>,
    /// Jobs moved to topics beyond [`MAX_TOPICS`], and whether there were any.
    unnamed: u64,
    late_max_ms: f64,
    lateness: [u64; BUCKETS],
}

impl Totals {
    fn new() -> Totals {
        Totals {
            since: Instant::now(),
            moved: 0,
            orphans: 0,
            batches: 0,
            per_topic: HashMap::new(),
            unnamed: 0,
            late_max_ms: 0.0,
            lateness: [0; BUCKETS],
        }
    }
}

static TOTALS: Mutex<Option<Totals>> = Mutex::new(None);

/// When the period began: the last summary, or the start.
static PERIOD: Mutex<Option<Instant>> = Mutex::new(None);

/// How late the oldest job of `reply` was, in ms (0 when unknown), not
/// counting a pause it waited for.
pub fn late_ms(reply: &MoveReply) -> f64 {
    reply.first_lateness().map_or(0.0, |late| late * 1000.0)
}

/// One batch of `topic` in the per-topic layout: its debug line and its
/// count for the summary (the classic mover's line is `mover::log_batch`).
pub fn topic_batch(topic: &str, reply: &MoveReply) {
    if reply.taken == 0 {
        return;
    }
    record(reply);
    let late_ms = late_ms(reply);
    let (moved, rounded) = (reply.taken, late_ms.round() as u64);
    debug!(
        topic = topic, moved = moved, late_ms = rounded;
        "moved {moved} [{topic}={moved}] oldest_late_ms={late_ms:.0}"
    );
}

/// Counts one batch that took ids (moved, orphans), for the next summary.
pub fn record(reply: &MoveReply) {
    let moved = reply.moved();
    if moved == 0 && reply.orphans == 0 {
        return;
    }
    let mut slot = TOTALS.lock().unwrap_or_else(|e| e.into_inner());
    let totals = slot.get_or_insert_with(Totals::new);
    totals.moved += moved;
    totals.orphans += reply.orphans;
    totals.batches += 1;
    for (topic, n) in &reply.per_topic {
        if let Some(count) = totals.per_topic.get_mut(topic) {
            *count += n;
        } else if totals.per_topic.len() < MAX_TOPICS {
            totals.per_topic.insert(topic.clone(), *n);
        } else {
            totals.unnamed += n;
        }
    }
    let late = late_ms(reply);
    if late.is_finite() {
        totals.late_max_ms = totals.late_max_ms.max(late);
    }
    for ms in &reply.lateness_ms {
        totals.lateness[bucket(*ms)] += 1;
        totals.late_max_ms = totals.late_max_ms.max(*ms as f64);
    }
}

/// Says the summary of what moved since the last one, if anything did.
pub fn flush() {
    let Some(totals) = TOTALS.lock().unwrap_or_else(|e| e.into_inner()).take() else { return };
    let mut period = PERIOD.lock().unwrap_or_else(|e| e.into_inner());
    say(&totals, period.unwrap_or(totals.since));
    *period = Some(Instant::now());
}

/// Says the summary every `period` ([`EVERY`]; debug builds take
/// `DELAYER_TEST_SUMMARY_MS`, so a test sees it in a second).
pub async fn every() {
    let period = period();
    *PERIOD.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
    loop {
        tokio::time::sleep(period).await;
        flush();
    }
}

fn period() -> Duration {
    #[cfg(debug_assertions)]
    if let Some(ms) = std::env::var("DELAYER_TEST_SUMMARY_MS").ok().and_then(|v| v.parse::<u64>().ok()) {
        return Duration::from_millis(ms.max(1));
    }
    EVERY
}

/// Says `totals`, counted since `since`.
fn say(totals: &Totals, since: Instant) {
    let mut topics: Vec<(&String, &u64)> = totals.per_topic.iter().collect();
    // Most first; equal counts by name, so the line is stable.
    topics.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    let (top, rest) = topics.split_at(topics.len().min(TOP));
    let other_topics = rest.len() as u64 + u64::from(totals.unnamed > 0);
    let other_moved: u64 = rest.iter().map(|(_, n)| **n).sum::<u64>() + totals.unnamed;
    let named: Vec<String> = top.iter().map(|(t, n)| format!("{t:?}={n}")).collect();
    let others = if other_topics > 0 {
        format!(
            " and {other_moved} to {}{other_topics} other topic(s)",
            if totals.unnamed > 0 { "at least " } else { "" }
        )
    } else {
        String::new()
    };
    let per_topic: serde_json::Map<String, serde_json::Value> =
        top.iter().map(|(t, n)| (t.to_string(), serde_json::Value::from(**n))).collect();
    let per_topic = serde_json::Value::Object(per_topic).to_string();
    let seconds = since.elapsed().as_secs_f64().round() as u64;
    let late_max_ms = totals.late_max_ms.round() as u64;
    // A bucket's bound may pass the most seen (the last bucket's does).
    let p99 = p99_ms(&totals.lateness).map(|ms| ms.min(late_max_ms));
    let p99_text = p99.map(|ms| format!(", p99 <= {ms} ms")).unwrap_or_default();
    let mut text = format!("moved {} job(s) in the last {seconds} s ({} batch(es))", totals.moved, totals.batches);
    if totals.moved > 0 {
        text += &format!(": {}{others}; lateness max {late_max_ms} ms{p99_text}", named.join(" "));
    }
    if totals.orphans > 0 {
        text += &format!("; orphans={} (ids whose job data was gone, dropped)", totals.orphans);
    }
    info!(
        moved = totals.moved,
        orphans = totals.orphans,
        batches = totals.batches,
        period_s = seconds,
        per_topic_json = per_topic.as_str(),
        other_topics = other_topics,
        other_moved = other_moved,
        late_ms_max = late_max_ms,
        late_ms_p99 = p99;
        "{text}"
    );
}

/// The bucket of a lateness of `ms`.
fn bucket(ms: u64) -> usize {
    let i = ((ms as f64) + 1.0).ln() / GROWTH.ln();
    (i.floor() as usize).min(BUCKETS - 1)
}

/// The upper bound of bucket `i`, in whole ms.
fn upper_ms(i: usize) -> u64 {
    (GROWTH.powi(i as i32 + 1) - 1.0).ceil() as u64
}

/// The upper bound of the bucket holding the 99th percentile, if any job
/// was counted.
fn p99_ms(lateness: &[u64; BUCKETS]) -> Option<u64> {
    let total: u64 = lateness.iter().sum();
    if total == 0 {
        return None;
    }
    // The smallest count that covers 99 % of the jobs.
    let wanted = total - total / 100;
    let mut seen = 0;
    for (i, n) in lateness.iter().enumerate() {
        seen += n;
        if seen >= wanted {
            return Some(upper_ms(i));
        }
    }
    Some(upper_ms(BUCKETS - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_bound_is_never_under_and_within_ten_percent() {
        for ms in [0, 1, 2, 5, 9, 10, 99, 100, 1_000, 12_345, 60_000, 86_400_000] {
            let upper = upper_ms(bucket(ms));
            assert!(upper >= ms, "{ms}: {upper}");
            assert!(upper as f64 <= (ms as f64 + 1.0) * 1.1 + 1.0, "{ms}: {upper}");
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn p99_is_the_bucket_of_the_99th_percentile() {
        let mut lateness = [0; BUCKETS];
        assert_eq!(p99_ms(&lateness), None);
        for _ in 0..99 {
            lateness[bucket(3)] += 1;
        }
        lateness[bucket(5_000)] += 1;
        // 99 of 100 are at 3 ms: the one at 5 s is the 100th percentile.
        assert_eq!(p99_ms(&lateness), Some(upper_ms(bucket(3))));
        lateness[bucket(5_000)] += 1;
        assert!(p99_ms(&lateness).is_some_and(|ms| ms >= 5_000), "{:?}", p99_ms(&lateness));
    }
}
