//! The per-topic outcome counters (`delayer_jobs_acked_total{topic}` and its
//! kin) and the ready-queue age (`delayer_ready_age_seconds{topic}`), read
//! from Redis with the per-topic gauges ([`crate::telemetry::watch_topics`]).
//!
//! The counts live in Redis, written by the scripts that end reservations
//! (ack.lua, release.lua, reserve.lua's acks), so every SDK's workers, the
//! HTTP API, `delayer webhook` and the server's expiry are counted without
//! code of their own, and any server exports them. Redis holds totals; this
//! module turns them into Prometheus counters by adding what each grew since
//! the last read. A total that went down (Redis flushed, the hash deleted)
//! is a reset: what it holds now is added, so an exported counter never
//! goes down and loses no count after one.

use delayer::inspect::Activity;
use metrics::{counter, gauge};
use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

/// The exported counter of each outcome Redis counts (`delayer_protocol::keys::OUTCOMES`).
pub const COUNTERS: [(&str, &str, &str); 4] = [
    ("acked", "delayer_jobs_acked_total", "Reservations acked (done), per topic."),
    (
        "released",
        "delayer_jobs_released_total",
        "Failed attempts scheduled again (released, or past their ttr), per topic.",
    ),
    ("buried", "delayer_jobs_buried_total", "Jobs buried (sent to dead letters by the worker), per topic."),
    (
        "dead_lettered",
        "delayer_jobs_dead_lettered_total",
        "Jobs sent to dead letters, buried or out of attempts, per topic.",
    ),
];
/// The ready-queue age gauge.
pub const READY_AGE: &str = "delayer_ready_age_seconds";
/// Its description.
pub const READY_AGE_HELP: &str = "How long the oldest ready job of each topic has waited since it was due (0: none \
                                  ready); for a job without a due time in its bucket, since the server first saw it \
                                  oldest.";

/// The most odd keys named in the log (then it says once that it stops).
const MOST_NAMED: usize = 1000;

/// What the exporter remembers between reads.
#[derive(Default)]
pub struct Exporter {
    /// The totals last read, per (topic, outcome).
    totals: BTreeMap<(String, &'static str), u64>,
    /// Heads without a due time: since when (Redis's clock) each was seen oldest.
    seen: BTreeMap<String, (Vec<u8>, SystemTime)>,
    /// Topics whose age gauge is set.
    aged: BTreeSet<String>,
    /// Odd keys already named.
    named: BTreeSet<String>,
}

impl Exporter {
    /// Exports one read for `topics` (those of the per-topic gauges).
    /// `whole`: the read covers every topic's counts (the classic layout's
    /// one hash), not only those of `topics` (one hash per topic).
    pub fn update(&mut self, activity: &Activity, topics: &[String], whole: bool) {
        self.log_odd(activity);
        self.forget_lost(activity, topics, whole);
        for (series, &total) in &activity.outcomes {
            let before = self.totals.insert(series.clone(), total);
            let grown = match before {
                Some(before) if total >= before => total - before,
                // First read, or a reset: the total so far.
                _ => total,
            };
            if let Some((_, name, _)) = COUNTERS.iter().find(|(outcome, _, _)| *outcome == series.1) {
                counter!(*name, "topic" => series.0.clone()).increment(grown);
            }
        }
        let now: BTreeSet<String> = topics.iter().cloned().collect();
        for gone in self.aged.difference(&now) {
            gauge!(READY_AGE, "topic" => gone.clone()).set(0.0);
        }
        self.seen.retain(|topic, _| activity.heads.get(topic).is_some_and(|h| h.due.is_none()));
        for topic in topics {
            let age = activity.ready_age(topic).or_else(|| self.first_seen_age(activity, topic));
            if let Some(age) = age {
                gauge!(READY_AGE, "topic" => topic.clone()).set(age.as_secs_f64());
            }
        }
        self.aged = now;
    }

    /// A series Redis no longer holds (flushed, restarted without
    /// persistence, the hash deleted) starts again from 0, so the ends
    /// counted after it count in full rather than hiding below the last
    /// total seen. Only series whose hash was read this time, and only when
    /// nothing odd was met: an unreadable hash or count says nothing about
    /// what Redis holds.
    fn forget_lost(&mut self, activity: &Activity, topics: &[String], whole: bool) {
        if !activity.odd.is_empty() {
            return;
        }
        let read: BTreeSet<&str> = topics.iter().map(String::as_str).collect();
        for (series, total) in self.totals.iter_mut() {
            if (whole || read.contains(series.0.as_str())) && !activity.outcomes.contains_key(series) {
                *total = 0;
            }
        }
    }

    /// The age of a head without a due time: how long it has been the
    /// oldest since this server first saw it so (0 at first sight).
    fn first_seen_age(&mut self, activity: &Activity, topic: &str) -> Option<std::time::Duration> {
        let (head, now) = (activity.heads.get(topic)?, activity.now?);
        let since = match self.seen.get(topic) {
            Some((id, since)) if *id == head.id => *since,
            _ => {
                self.seen.insert(topic.to_string(), (head.id.clone(), now));
                now
            }
        };
        Some(now.duration_since(since).unwrap_or_default())
    }

    /// Names each odd key once.
    fn log_odd(&mut self, activity: &Activity) {
        for (key, what) in &activity.odd {
            if self.named.len() > MOST_NAMED || self.named.contains(key) {
                continue;
            }
            self.named.insert(key.clone());
            if self.named.len() > MOST_NAMED {
                log::warn!("more odd keys met by the outcome counters and ready-queue ages: no longer named");
            } else {
                log::warn!("{key}: {what} (outcome counters, ready-queue age)");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(counts: &[(&str, &'static str, u64)]) -> Activity {
        let mut activity = Activity::default();
        for (topic, outcome, n) in counts {
            activity.outcomes.insert((topic.to_string(), *outcome), *n);
        }
        activity
    }

    /// A total Redis lost starts from 0 again, so the next one counts in
    /// full; a topic whose hash was not read keeps its total.
    #[test]
    fn a_lost_total_counts_again_from_zero() {
        let topics = ["a".to_string()];
        let mut exporter = Exporter::default();
        exporter.update(&read(&[("a", "acked", 5), ("b", "acked", 7)]), &topics, false);
        exporter.update(&read(&[]), &topics, false);
        assert_eq!(exporter.totals.get(&("a".to_string(), "acked")), Some(&0));
        assert_eq!(exporter.totals.get(&("b".to_string(), "acked")), Some(&7), "b's hash was not read");
        exporter.update(&read(&[]), &topics, true);
        assert_eq!(exporter.totals.get(&("b".to_string(), "acked")), Some(&0), "one hash holds every topic");
        // Something odd met: absence says nothing.
        exporter.update(&read(&[("a", "acked", 3)]), &topics, false);
        let mut odd = read(&[]);
        odd.odd.push(("d:outcomes".into(), "cannot be read".into()));
        exporter.update(&odd, &topics, false);
        assert_eq!(exporter.totals.get(&("a".to_string(), "acked")), Some(&3));
    }
}
