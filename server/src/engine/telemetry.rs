//! Prometheus metrics: every metric's name and meaning in one place. The
//! endpoint that serves them (`metrics_addr` in delayer.conf), with the
//! probes, is the `http` tree's (`http::metrics`).
//!
//! Recording goes through the `metrics` facade: without an endpoint nothing
//! is installed and each call is a no-op, so the mover records
//! unconditionally. The text format is the exporter crate's, not ours.

use crate::scripts::{ExpireReply, MoveReply};
use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Unit};
use std::collections::BTreeSet;
use std::time::Duration;

const MOVED: &str = "delayer_jobs_moved_total";
const ORPHANS: &str = "delayer_orphans_removed_total";
const MALFORMED: &str = "delayer_malformed_total";
pub const BATCH: &str = "delayer_batch_duration_seconds";
pub const TICK: &str = "delayer_tick_duration_seconds";
pub const LATENESS: &str = "delayer_lateness_seconds";
pub const HELD: &str = "delayer_held_seconds";
pub const SET_ASIDE: &str = "delayer_jobs_set_aside_total";
pub const PAUSED: &str = "delayer_topic_paused";
const POOL: &str = "delayer_pool_size";
const REDIS_ERRORS: &str = "delayer_redis_errors_total";
const RECONNECTS: &str = "delayer_redis_reconnects_total";
const BUILD: &str = "delayer_build_info";
const EXPIRED: &str = "delayer_reservations_expired_total";
const JOBS: &str = "delayer_jobs";
const OOM: &str = "delayer_redis_oom_total";
const BAD_KEYS: &str = "delayer_bad_keys";

/// How often the per-topic gauges are read from Redis (one stats.lua call:
/// O(topics), whatever the backlog; see bench/RESULTS.md for its cost).
const TOPICS_EVERY: Duration = Duration::from_secs(5);

/// Buckets, in seconds: sub-millisecond scripts up to a backlog of minutes.
pub const DURATION_BUCKETS: [f64; 12] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0];
pub const LATENESS_BUCKETS: [f64; 14] =
    [0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 30.0, 300.0];
/// Buckets of a pause's hold, in seconds: a second up to a day.
pub const HELD_BUCKETS: [f64; 10] = [1.0, 5.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 21600.0, 86400.0];

/// Describes every metric and sets the build's: call once the exporter's
/// recorder is installed (the `http` tree's metrics listener does).
pub fn describe() {
    describe_counter!(MOVED, "Jobs moved to their ready queue, per topic.");
    describe_gauge!(PAUSED, "1 while the topic is paused (nothing of it handed out or made ready), else 0.");
    describe_gauge!(
        "delayer_topic_rate_limit",
        "The topic's rate limit: jobs per second that may become ready (0: no limit)."
    );
    describe_gauge!(
        "delayer_topic_rate_burst",
        "The topic's rate limit's burst: jobs that may become ready at once (0: no limit)."
    );
    describe_counter!(
        SET_ASIDE,
        "Due jobs of a topic under flow control set aside in its flow pool, per topic (classic layout)."
    );
    describe_counter!(ORPHANS, "Ids dropped from the pool because their job data was gone.");
    describe_counter!(MALFORMED, "Ids parked on the malformed list (job data without a topic).");
    describe_histogram!(BATCH, Unit::Seconds, "Duration of one move script call.");
    describe_histogram!(TICK, Unit::Seconds, "Duration of one tick (all batches until the pool has no due job).");
    describe_histogram!(
        LATENESS,
        Unit::Seconds,
        "How long after its due time each job was moved, less any pause of its topic it waited for (jobs that waited \
         for their rate limit's tokens are left out: delayer_held_seconds)."
    );
    describe_histogram!(
        HELD,
        Unit::Seconds,
        "How long each job moved after a pause, or while its topic's rate limit held due jobs back, was held, by \
         reason (paused, limited)."
    );
    describe_gauge!(POOL, "Jobs waiting in the pool, as of the last batch.");
    describe_counter!(REDIS_ERRORS, "Ticks that failed on a Redis error.");
    describe_counter!(RECONNECTS, "Times Redis became reachable again after an outage.");
    describe_counter!(
        EXPIRED,
        "Reservations that passed their ttr without ack, by outcome (retried, dead, dropped, malformed)."
    );
    describe_gauge!(
        JOBS,
        "Jobs per topic and state (scheduled, ready, reserved, dead, held: due jobs a pause or rate limit holds back), read from \
         Redis every 5 s; reserved is left out when too many jobs are reserved to count per topic."
    );
    describe_gauge!(
        crate::eviction::GAUGE,
        "1 while Redis's maxmemory-policy is not noeviction (jobs can be evicted undelivered), 0 when it is."
    );
    describe_counter!(OOM, "Times Redis was found out of memory (maxmemory reached under noeviction): pushes refused.");
    describe_gauge!(
        BAD_KEYS,
        "Keys of the wrong type the mover met and has not yet seen fixed (each named in the log)."
    );
    for (_, name, help) in crate::activity::COUNTERS {
        describe_counter!(name, help);
    }
    describe_gauge!(crate::activity::READY_AGE, Unit::Seconds, crate::activity::READY_AGE_HELP);
    // Counters shown from the start, at 0: an alert on increase() or rate()
    // then sees their first error, not a series that appears already at 1.
    for name in [REDIS_ERRORS, RECONNECTS, OOM, ORPHANS, MALFORMED] {
        counter!(name).increment(0);
    }
    gauge!(BAD_KEYS).set(0.0);
    describe_gauge!(BUILD, "Always 1; the labels say which build runs.");
    gauge!(BUILD, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
}

/// One move script call.
pub fn batch(reply: &MoveReply, took: Duration) {
    gauge!(POOL).set(reply.pool_size as f64);
    drained(reply, took);
}

/// One call that moved jobs without a pool size to report (the classic
/// flow drain's `move_flow.lua`, whose `pool_size` is its flow pool's).
pub fn drained(reply: &MoveReply, took: Duration) {
    histogram!(BATCH).record(took.as_secs_f64());
    for (topic, n) in &reply.aside {
        counter!(SET_ASIDE, "topic" => topic.clone()).increment(*n);
    }
    for (topic, n) in &reply.per_topic {
        counter!(MOVED, "topic" => topic.clone()).increment(*n);
    }
    counter!(ORPHANS).increment(reply.orphans);
    counter!(MALFORMED).increment(reply.malformed.len() as u64);
    let lateness = histogram!(LATENESS);
    for ms in &reply.lateness_ms {
        lateness.record(*ms as f64 / 1000.0);
    }
    if reply.held_ms.iter().any(|ms| *ms > 0) {
        let held = histogram!(HELD, "reason" => reply.held_reason());
        reply.held_ms.iter().filter(|ms| **ms > 0).for_each(|ms| held.record(*ms as f64 / 1000.0));
    }
    #[cfg(feature = "http")]
    crate::http::history::record(reply);
    // A long drain is progress too, for the readiness probe.
    crate::readiness::ticked();
}

/// One expire call.
pub fn expired(reply: &ExpireReply) {
    for (outcome, n) in [
        ("retried", reply.retried),
        ("dead", reply.dead),
        ("dropped", reply.dropped),
        ("malformed", reply.malformed.len() as u64),
    ] {
        if n > 0 {
            counter!(EXPIRED, "outcome" => outcome).increment(n);
        }
    }
}

/// One whole tick.
pub fn tick(took: Duration) {
    histogram!(TICK).record(took.as_secs_f64());
}

/// A tick failed on Redis.
pub fn redis_error() {
    counter!(REDIS_ERRORS).increment(1);
}

/// Redis was found out of memory.
pub fn redis_oom() {
    counter!(OOM).increment(1);
}

/// Keys of the wrong type known now.
pub fn bad_keys(n: usize) {
    gauge!(BAD_KEYS).set(n as f64);
}

/// Redis is back after an outage.
pub fn reconnected() {
    counter!(RECONNECTS).increment(1);
}

/// Keeps the per-topic gauges (`delayer_jobs{topic, state}`) up to date from
/// the SDK's stats (stats.lua, or each topic's key sizes in the per-topic
/// layout), every `TOPICS_EVERY`, on a thread of its own (the reads are
/// blocking and must not delay a tick), and with them the outcome counters
/// and ready-queue ages ([`crate::activity`]). A topic that drops out of
/// the numbers is set to 0, so a gauge never shows a stale count.
pub fn watch_topics(target: delayer_protocol::target::Target, names: &delayer_protocol::keys::Names) {
    // Every read bounded: a stalled Redis holds this thread REDIS_TIMEOUT at most.
    let pool =
        delayer::PoolOptions { max_size: 1, io_timeout: Some(crate::config::REDIS_TIMEOUT), ..Default::default() };
    let delayer = match delayer::Delayer::with_target(target, names.prefix(), &pool).with_layout(names.layout()) {
        Ok(delayer) => delayer,
        Err(e) => {
            log::error!("the per-topic gauges are off: {e}");
            return;
        }
    };
    // The classic layout keeps every topic's outcome counts in one hash.
    let whole = matches!(names, delayer_protocol::keys::Names::Classic(_));
    let spawned = std::thread::Builder::new().name("topic-gauges".into()).spawn(move || {
        let mut shown = std::collections::BTreeSet::new();
        let mut activity = crate::activity::Exporter::default();
        let mut activity_failed = false;
        // Since when reads fail: said once, and how long when they work again.
        let mut failing: Option<std::time::Instant> = None;
        loop {
            let started = std::time::Instant::now();
            match delayer.stats() {
                Ok(stats) => {
                    if let Some(since) = failing.take() {
                        log::info!("the per-topic numbers are read again after {:.1} s", since.elapsed().as_secs_f64());
                    }
                    shown = topic_gauges(&stats, shown);
                    // Topics whose name is not UTF-8 are left out: their keys cannot be named from the lossy text.
                    let topics: Vec<String> =
                        stats.topics.iter().filter(|t| t.raw_topic.is_none()).map(|t| t.topic.clone()).collect();
                    match delayer.activity(&topics) {
                        Ok(read) => {
                            activity_failed = false;
                            activity.update(&read, &topics, whole);
                        }
                        Err(e) if !activity_failed => {
                            activity_failed = true;
                            log::warn!("cannot read the outcome counters and ready-queue ages: {e}");
                        }
                        Err(_) => {}
                    }
                }
                Err(e) if failing.is_none() => {
                    failing = Some(started);
                    log::warn!("cannot read the per-topic numbers for the metrics: {e}");
                }
                Err(_) => {}
            }
            std::thread::sleep(TOPICS_EVERY);
        }
    });
    if let Err(e) = spawned {
        log::warn!("cannot start the per-topic metrics: {e}");
    }
}

/// Sets the gauges of `stats`; topics in `shown` but not in `stats` go to 0.
/// Returns the topics shown now.
fn topic_gauges(stats: &delayer::inspect::Stats, shown: BTreeSet<String>) -> BTreeSet<String> {
    let now: BTreeSet<String> = stats.topics.iter().map(|t| t.topic.clone()).collect();
    for gone in shown.difference(&now) {
        for state in ["scheduled", "ready", "reserved", "dead", "held"] {
            gauge!(JOBS, "topic" => gone.clone(), "state" => state).set(0.0);
        }
        gauge!(PAUSED, "topic" => gone.clone()).set(0.0);
        gauge!("delayer_topic_rate_limit", "topic" => gone.clone()).set(0.0);
        gauge!("delayer_topic_rate_burst", "topic" => gone.clone()).set(0.0);
    }
    for t in &stats.topics {
        let reserved = t.reserved.map(|n| n as f64);
        gauge!(PAUSED, "topic" => t.topic.clone()).set(if t.paused { 1.0 } else { 0.0 });
        let (rate, burst) = t.rate_limit.map_or((0.0, 0.0), |l| (l.per_second, l.burst as f64));
        gauge!("delayer_topic_rate_limit", "topic" => t.topic.clone()).set(rate);
        gauge!("delayer_topic_rate_burst", "topic" => t.topic.clone()).set(burst);
        for (state, n) in [
            ("scheduled", Some(t.scheduled as f64)),
            ("ready", Some(t.ready as f64)),
            ("reserved", reserved),
            ("dead", Some(t.dead as f64)),
            ("held", Some(t.held as f64)),
        ] {
            if let Some(n) = n {
                gauge!(JOBS, "topic" => t.topic.clone(), "state" => state).set(n);
            }
        }
    }
    now
}
