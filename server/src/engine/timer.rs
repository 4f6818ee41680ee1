//! The timer: when to tick, what to do when Redis is away, and how to stop.
//!
//! After a tick it sleeps until the earliest due job or reservation deadline,
//! or `timer_interval` when that comes first, and wakes earlier when the
//! wake-up listener (`wake`) reports a push due before that. It wakes at the
//! due time itself, to well under a millisecond: the last moment is slept
//! on a blocking thread, since tokio's timer rounds up to whole milliseconds.
//! When Redis is unreachable, or stalls (a call waits out its reply bound,
//! `config::REDIS_TIMEOUT`), it says so once, with how long Redis did not
//! answer, retries often (a retry is one connection attempt) and says so
//! again when Redis is back, with how long it was away; nothing is lost
//! meanwhile, since jobs wait in Redis. Due times come from Redis, checked
//! (`delayer::numbers`): whatever they hold, the wake-up instant is computed
//! without overflow and never later than `timer_interval` away. A stop
//! request lets the batch in flight finish.

use crate::mover::{Tick, TickError, TickReport};
use crate::telemetry;
use crate::wake::Wake;
use log::{debug, error, info};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::Notify;

/// Retry delays while Redis is away: short, so that once Redis answers again
/// the first move follows within a fraction of a second.
pub const BACKOFF_MIN: Duration = Duration::from_millis(100);
pub const BACKOFF_MAX: Duration = Duration::from_millis(500);

/// A connection found dead (Redis restarted under it) is retried at once
/// with a fresh one, this many times in a row, before backing off: the pool
/// may hold several such connections, and each costs one failed call.
const QUICK_RETRIES: u32 = 4;

/// The last stretch before a wake-up, slept on a blocking thread to the
/// microsecond rather than on tokio's millisecond timer.
const PRECISE: Duration = Duration::from_millis(2);

/// Wake this long after a due time, so Redis's clock has surely reached it
/// (its reply is read with some delay, so our estimate of its clock lags).
const MARGIN: Duration = Duration::from_micros(50);

/// A request to stop, shared by the signal handler and the timer.
#[derive(Default)]
pub struct Stop {
    flag: AtomicBool,
    notify: Notify,
}

impl Stop {
    pub fn request(&self) {
        self.flag.store(true, Ordering::SeqCst);
        self.notify.notify_one();
    }

    pub fn requested(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    pub fn flag(&self) -> &AtomicBool {
        &self.flag
    }
}

/// Why ticks are failing, so the log says it once and where to look.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Failing {
    /// Redis cannot be reached or cannot serve yet.
    Unavailable,
    /// Redis refused a command (a script error, a key of the wrong type).
    Refused,
}

/// Redis's clock as seen at one instant here, to turn due times into instants.
#[derive(Clone, Copy)]
struct Clock {
    redis_now: f64,
    at: Instant,
}

impl Clock {
    fn from_report(report: &TickReport) -> Option<Clock> {
        report.now_seen_at.map(|at| Clock { redis_now: report.now, at })
    }

    /// The instant here at which Redis's clock reads `due` (plus the
    /// margin), or `limit` when that comes first. `due` was read within
    /// 1970..9999 (`delayer::numbers`), but whatever it holds (a year 9999,
    /// `inf`, NaN) this never overflows: the result is at most `limit`.
    fn instant_of(&self, due: f64, limit: Instant) -> Instant {
        let ahead = Duration::try_from_secs_f64((due - self.redis_now).max(0.0)).unwrap_or(Duration::MAX);
        self.at.checked_add(ahead).and_then(|t| t.checked_add(MARGIN)).map_or(limit, |t| t.min(limit))
    }
}

/// Ticks until stopped. `wakes` comes from the wake-up listener.
pub async fn run(
    mover: Arc<dyn Tick>,
    interval: Duration,
    stop: Arc<Stop>,
    mut wakes: Option<UnboundedReceiver<Wake>>,
) {
    let mut backoff = BACKOFF_MIN;
    let mut quick_retries = 0;
    let mut down: Option<Failing> = None;
    // When the first failing tick of an outage began: how long Redis was away.
    let mut down_since = Instant::now();
    let mut not_before: Option<Instant> = None;
    while !stop.requested() {
        let (m, s) = (mover.clone(), stop.clone());
        let outcome = tokio::task::spawn_blocking(move || {
            if let Some(t) = not_before {
                std::thread::sleep(t.saturating_duration_since(Instant::now()));
            }
            crate::panics::test_trigger("tick");
            let started = Instant::now();
            (started, m.tick(s.flag()))
        })
        .await;
        let outcome = outcome.map(|(started, result)| {
            if result.is_err() && down.is_none() {
                down_since = started;
            }
            result
        });
        let (mut wake_at, clock) = match outcome {
            Ok(Ok(report)) => {
                crate::readiness::ticked();
                if let Some(failing) = down.take() {
                    let away = down_since.elapsed().as_secs_f64();
                    if failing == Failing::Unavailable {
                        info!("redis is reachable again (it answers again after {away:.1} s); moving jobs");
                        telemetry::reconnected();
                    } else {
                        info!("ticks succeed again after {away:.1} s; moving jobs");
                    }
                }
                backoff = BACKOFF_MIN;
                quick_retries = 0;
                let clock = Clock::from_report(&report);
                let limit = Instant::now() + interval;
                let wake_at = match (clock, next_due(&report)) {
                    (Some(clock), Some(due)) => clock.instant_of(due, limit),
                    _ => limit,
                };
                (wake_at, clock)
            }
            Ok(Err(e)) => {
                telemetry::redis_error();
                let failing = if e.is_unavailable() { Failing::Unavailable } else { Failing::Refused };
                if down == Some(failing) {
                    debug!("tick failed again: {e}");
                } else if failing == Failing::Unavailable && e.is_timeout() {
                    // A stalled Redis (or a connection that died silently):
                    // the call waited out its timeout.
                    error!(
                        "redis unavailable: it did not answer for {:.1} s (timed out: {e}); retrying every {} ms at \
                         most",
                        down_since.elapsed().as_secs_f64(),
                        BACKOFF_MAX.as_millis()
                    );
                } else if failing == Failing::Unavailable {
                    error!("redis unavailable: {e}; retrying every {} ms at most", BACKOFF_MAX.as_millis());
                } else {
                    error!("a tick failed: {e}; retrying every {} ms at most", BACKOFF_MAX.as_millis());
                }
                down = Some(failing);
                let pause = if stale_connection(&e) && quick_retries < QUICK_RETRIES {
                    quick_retries += 1;
                    Duration::ZERO
                } else {
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                    backoff
                };
                (Instant::now() + pause, None)
            }
            Err(e) => {
                error!("a tick failed: {e}");
                (Instant::now() + backoff, None)
            }
        };
        not_before = None;
        // Wait for the wake-up time, a stop, or a wake-up message.
        loop {
            // Close enough: the rest is slept precisely before the tick.
            if wake_at <= Instant::now() + PRECISE {
                not_before = Some(wake_at);
                break;
            }
            let coarse = wake_at - PRECISE;
            tokio::select! {
                _ = tokio::time::sleep_until(coarse.into()) => {
                    not_before = Some(wake_at);
                    break;
                }
                _ = stop.notify.notified() => break,
                wake = recv(&mut wakes) => match wake {
                    Some(first) => {
                        // Every message waiting counts as one: a burst of
                        // wake-ups costs one tick, not one each.
                        let mut next = Some(first);
                        let mut now = false;
                        while let Some(wake) = next {
                            match wake {
                                // (Re)subscribed: Redis is there, and what was
                                // published meanwhile is unknown. Look now.
                                Wake::Now => now = true,
                                Wake::At(due) => {
                                    if let Some(clock) = clock {
                                        wake_at = clock.instant_of(due, wake_at);
                                    }
                                }
                            }
                            next = wakes.as_mut().and_then(|rx| rx.try_recv().ok());
                        }
                        if now {
                            break;
                        }
                    }
                    None => wakes = None,
                },
            }
        }
    }
}

/// The next message of the wake-up listener; never, without one.
async fn recv(wakes: &mut Option<UnboundedReceiver<Wake>>) -> Option<Wake> {
    match wakes {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// A call failed on a connection that had died under us (Redis restarted):
/// the next attempt, on a fresh connection, may well succeed at once.
fn stale_connection(e: &TickError) -> bool {
    matches!(e, TickError::Redis(e) if e.is_connection_dropped() || e.is_io_error())
}

/// The earliest due job or reservation deadline the tick saw, if any.
fn next_due(report: &TickReport) -> Option<f64> {
    match (report.next_due, report.next_deadline) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_wake_up_is_the_earliest_due_job_or_deadline() {
        let r = |next_due, next_deadline| TickReport { next_due, next_deadline, now: 100.0, ..Default::default() };
        assert_eq!(next_due(&r(None, None)), None);
        assert_eq!(next_due(&r(Some(100.25), None)), Some(100.25));
        assert_eq!(next_due(&r(Some(100.5), Some(100.1))), Some(100.1));
        assert_eq!(next_due(&r(None, Some(100.375))), Some(100.375));
    }

    #[test]
    fn due_times_map_onto_this_machines_clock_never_early() {
        let at = Instant::now();
        let limit = at + Duration::from_secs(10);
        let clock = Clock { redis_now: 1_000.000_25, at };
        assert_eq!(clock.instant_of(1_000.250_25, limit), at + Duration::from_millis(250) + MARGIN);
        // Already due: at once (plus the margin), not in the past.
        assert_eq!(clock.instant_of(999.0, limit), at + MARGIN);
        let d = clock.instant_of(1000.001, limit) - at;
        assert!(d >= Duration::from_micros(750) && d < Duration::from_micros(850), "{d:?}");
    }

    /// What Redis may hold (a score of `inf`, `1e300`, year 9999) never
    /// overflows: a time beyond the limit waits for the limit.
    #[test]
    fn any_due_time_maps_within_the_limit() {
        let at = Instant::now();
        let limit = at + Duration::from_secs(1);
        let clock = Clock { redis_now: 1_763_750_000.0, at };
        for due in [f64::INFINITY, 1e20, 1e300, f64::MAX, delayer_protocol::numbers::LATEST_SECS] {
            assert_eq!(clock.instant_of(due, limit), limit, "{due}");
        }
        for due in [f64::NEG_INFINITY, -1.0, f64::NAN] {
            assert_eq!(clock.instant_of(due, limit), at + MARGIN, "{due}");
        }
    }
}
