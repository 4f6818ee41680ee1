//! Prometheus metrics: every metric's name and meaning in one place, and an
//! HTTP endpoint to scrape them (`metrics_addr` in delayer.conf).
//!
//! Recording goes through the `metrics` facade: without an endpoint nothing
//! is installed and each call is a no-op, so the mover records
//! unconditionally. The text format is the exporter crate's, not ours.

use crate::scripts::{ExpireReply, MoveReply};
use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Unit};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use std::net::SocketAddr;
use std::time::Duration;

const MOVED: &str = "delayer_jobs_moved_total";
const ORPHANS: &str = "delayer_orphans_removed_total";
const MALFORMED: &str = "delayer_malformed_total";
const BATCH: &str = "delayer_batch_duration_seconds";
const TICK: &str = "delayer_tick_duration_seconds";
const LATENESS: &str = "delayer_lateness_seconds";
const POOL: &str = "delayer_pool_size";
const REDIS_ERRORS: &str = "delayer_redis_errors_total";
const RECONNECTS: &str = "delayer_redis_reconnects_total";
const BUILD: &str = "delayer_build_info";
const EXPIRED: &str = "delayer_reservations_expired_total";

/// Buckets, in seconds: sub-millisecond scripts up to a backlog of minutes.
const DURATION_BUCKETS: [f64; 12] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0];
const LATENESS_BUCKETS: [f64; 14] =
    [0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 30.0, 300.0];

/// Serves the metrics at `http://<addr>/metrics`. Call inside the tokio
/// runtime that will drive the endpoint.
pub fn serve(addr: SocketAddr) -> Result<(), String> {
    let builder = PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets_for_metric(Matcher::Full(BATCH.into()), &DURATION_BUCKETS)
        .and_then(|b| b.set_buckets_for_metric(Matcher::Full(TICK.into()), &DURATION_BUCKETS))
        .and_then(|b| b.set_buckets_for_metric(Matcher::Full(LATENESS.into()), &LATENESS_BUCKETS))
        .map_err(|e| format!("metrics: {e}"))?;
    builder.install().map_err(|e| format!("cannot serve metrics on {addr}: {e}"))?;
    describe_counter!(MOVED, "Jobs moved to their ready queue, per topic.");
    describe_counter!(ORPHANS, "Ids dropped from the pool because their job data was gone.");
    describe_counter!(MALFORMED, "Ids parked on the malformed list (job data without a topic).");
    describe_histogram!(BATCH, Unit::Seconds, "Duration of one move script call.");
    describe_histogram!(TICK, Unit::Seconds, "Duration of one tick (all batches until the pool has no due job).");
    describe_histogram!(LATENESS, Unit::Seconds, "How long after its due time each job was moved.");
    describe_gauge!(POOL, "Jobs waiting in the pool, as of the last batch.");
    describe_counter!(REDIS_ERRORS, "Ticks that failed on a Redis error.");
    describe_counter!(RECONNECTS, "Times Redis became reachable again after an outage.");
    describe_counter!(
        EXPIRED,
        "Reservations that passed their ttr without ack, by outcome (retried, dead, dropped, malformed)."
    );
    describe_gauge!(BUILD, "Always 1; the labels say which build runs.");
    gauge!(BUILD, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
    Ok(())
}

/// One move script call.
pub fn batch(reply: &MoveReply, took: Duration) {
    histogram!(BATCH).record(took.as_secs_f64());
    for (topic, n) in &reply.per_topic {
        counter!(MOVED, "topic" => topic.clone()).increment(*n);
    }
    counter!(ORPHANS).increment(reply.orphans);
    counter!(MALFORMED).increment(reply.malformed.len() as u64);
    gauge!(POOL).set(reply.pool_size as f64);
    let lateness = histogram!(LATENESS);
    for ms in &reply.lateness_ms {
        lateness.record(*ms as f64 / 1000.0);
    }
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

/// Redis is back after an outage.
pub fn reconnected() {
    counter!(RECONNECTS).increment(1);
}
