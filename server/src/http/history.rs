//! The last minutes of moving, per second, for the dashboard's chart: jobs
//! moved and how late they were. A small ring in memory (no Prometheus
//! needed): [`SECONDS`] one-second slots, each a few numbers plus the topics
//! moved in that second. Fed by every move batch (`telemetry::batch`) once
//! the HTTP API is on; until then recording is one atomic load.

use crate::scripts::MoveReply;
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds kept: ten minutes.
pub const SECONDS: u64 = 600;
/// Most topics remembered per second (the rest are counted in the total).
const TOPICS_PER_SLOT: usize = 200;

static ENABLED: AtomicBool = AtomicBool::new(false);
static RING: Mutex<VecDeque<Slot>> = Mutex::new(VecDeque::new());

#[derive(Debug, Default, Clone)]
struct Slot {
    second: u64,
    moved: u64,
    late_sum_ms: u64,
    late_count: u64,
    late_max_ms: u64,
    /// Topic -> (moved, most lateness of a batch that moved it, in ms).
    topics: BTreeMap<String, (u64, u64)>,
}

/// Starts recording (the HTTP API is on).
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

pub fn now_second() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// One move batch.
pub fn record(reply: &MoveReply) {
    if !ENABLED.load(Ordering::Relaxed) || reply.per_topic.is_empty() {
        return;
    }
    add(now_second(), reply);
}

fn add(second: u64, reply: &MoveReply) {
    // The batch's first id is its oldest: its lateness bounds the others'
    // (a pause it waited for is not lateness).
    let batch_late_ms = reply.first_lateness().map_or(0, |late| (late * 1000.0).round() as u64);
    let mut ring = RING.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if ring.back().is_none_or(|slot| slot.second != second) {
        ring.push_back(Slot { second, ..Slot::default() });
    }
    while ring.front().is_some_and(|slot| slot.second + SECONDS <= second) {
        ring.pop_front();
    }
    let Some(slot) = ring.back_mut() else { return };
    slot.moved += reply.moved();
    if reply.lateness_ms.is_empty() {
        slot.late_sum_ms += batch_late_ms * reply.moved();
        slot.late_count += reply.moved();
    } else {
        slot.late_sum_ms += reply.lateness_ms.iter().sum::<u64>();
        slot.late_count += reply.lateness_ms.len() as u64;
    }
    slot.late_max_ms = slot.late_max_ms.max(reply.lateness_ms.iter().copied().max().unwrap_or(batch_late_ms));
    for (topic, n) in &reply.per_topic {
        if slot.topics.len() >= TOPICS_PER_SLOT && !slot.topics.contains_key(topic) {
            continue;
        }
        let entry = slot.topics.entry(topic.clone()).or_default();
        entry.0 += n;
        entry.1 = entry.1.max(batch_late_ms);
    }
}

/// What this process moved from second `first` on, per `step` seconds:
/// sample start -> [moved, lateness sum (ms), lateness count, most
/// lateness (ms)] (`shared` writes them to Redis).
pub fn windows(first: u64, step: u64) -> BTreeMap<u64, [u64; 4]> {
    let ring = RING.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut out: BTreeMap<u64, [u64; 4]> = BTreeMap::new();
    for slot in ring.iter().filter(|s| s.second >= first) {
        let sample = out.entry(slot.second - slot.second % step.max(1)).or_default();
        sample[0] += slot.moved;
        sample[1] += slot.late_sum_ms;
        sample[2] += slot.late_count;
        sample[3] = sample[3].max(slot.late_max_ms);
    }
    out
}

/// The last `seconds` (at most [`SECONDS`]) as JSON: one sample per second,
/// oldest first (seconds without moves are zeros), and per topic what moved
/// in the last minute.
pub fn snapshot(seconds: u64) -> Value {
    snapshot_at(now_second(), seconds.clamp(1, SECONDS))
}

fn snapshot_at(now: u64, seconds: u64) -> Value {
    let ring = RING.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let first = now.saturating_sub(seconds - 1);
    let mut samples = Vec::with_capacity(seconds as usize);
    let mut slots = ring.iter().filter(|s| s.second >= first && s.second <= now).peekable();
    for second in first..=now {
        let slot = slots.next_if(|s| s.second == second);
        let (moved, avg, max) =
            slot.map_or((0, 0, 0), |s| (s.moved, s.late_sum_ms.checked_div(s.late_count).unwrap_or(0), s.late_max_ms));
        samples.push(json!({"t": second, "moved": moved, "lateness_avg_ms": avg, "lateness_max_ms": max}));
    }
    let mut topics: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for slot in ring.iter().filter(|s| s.second + 60 > now) {
        for (topic, (n, late)) in &slot.topics {
            let entry = topics.entry(topic).or_default();
            entry.0 += n;
            entry.1 = entry.1.max(*late);
        }
    }
    let topics: serde_json::Map<String, Value> = topics
        .into_iter()
        .map(|(topic, (n, late))| (topic.to_string(), json!({"moved_last_minute": n, "lateness_max_ms": late})))
        .collect();
    json!({"enabled": ENABLED.load(Ordering::Relaxed), "now": now, "samples": samples, "topics": topics})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(topic: &str, n: u64, late_ms: u64) -> MoveReply {
        MoveReply {
            taken: n,
            per_topic: vec![(topic.to_string(), n)],
            now: 1000.0,
            oldest_due: Some(1000.0 - late_ms as f64 / 1000.0),
            ..MoveReply::default()
        }
    }

    #[test]
    fn samples_per_second_and_topics_of_the_last_minute() {
        let base = 1_000_000_000;
        add(base, &reply("a", 3, 20));
        add(base, &reply("b", 1, 5));
        add(base + 2, &reply("a", 2, 40));
        let snap = snapshot_at(base + 2, 3);
        let column = |snap: &Value, key: &str| -> Vec<u64> {
            snap["samples"].as_array().map_or(vec![], |s| s.iter().filter_map(|s| s[key].as_u64()).collect())
        };
        assert_eq!(column(&snap, "moved"), [4, 0, 2]);
        assert_eq!(column(&snap, "lateness_max_ms"), [20, 0, 40]);
        assert_eq!(snap["topics"]["a"], json!({"moved_last_minute": 5, "lateness_max_ms": 40}));
        assert_eq!(snap["topics"]["b"]["moved_last_minute"], 1);
        // Ten minutes on, the old seconds have left the ring.
        add(base + 2 + SECONDS, &reply("c", 1, 0));
        let snap = snapshot_at(base + 2 + SECONDS, SECONDS);
        assert_eq!(column(&snap, "moved").iter().sum::<u64>(), 1);
        assert!(snap["topics"].get("a").is_none());
    }
}
