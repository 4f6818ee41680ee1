//! The timer: when to tick, what to do when Redis is away, and how to stop.
//!
//! After a tick it sleeps until the earliest due job or reservation deadline,
//! or `timer_interval` when that comes first, so a job is ready within milliseconds of its due
//! time. When Redis is unreachable it says so once, retries with backoff and
//! says so again when Redis is back; nothing is lost meanwhile, since jobs
//! wait in Redis. A stop request lets the batch in flight finish.

use crate::mover::{Mover, TickReport};
use crate::telemetry;
use log::{debug, error, info};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

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

/// Ticks until stopped.
pub async fn run(mover: Arc<Mover>, interval: Duration, stop: Arc<Stop>) {
    let mut backoff = BACKOFF_MIN;
    let mut down: Option<Failing> = None;
    while !stop.requested() {
        let (m, s) = (mover.clone(), stop.clone());
        let outcome = tokio::task::spawn_blocking(move || m.tick(s.flag())).await;
        let pause = match outcome {
            Ok(Ok(report)) => {
                if let Some(failing) = down.take() {
                    if failing == Failing::Unavailable {
                        info!("redis is reachable again; moving jobs");
                        telemetry::reconnected();
                    } else {
                        info!("ticks succeed again; moving jobs");
                    }
                    backoff = BACKOFF_MIN;
                }
                next_sleep(&report, interval)
            }
            Ok(Err(e)) => {
                telemetry::redis_error();
                let failing = if e.is_unavailable() { Failing::Unavailable } else { Failing::Refused };
                if down == Some(failing) {
                    debug!("tick failed again: {e}");
                } else if failing == Failing::Unavailable {
                    error!("redis unavailable: {e}; retrying with backoff up to {}s", BACKOFF_MAX.as_secs());
                } else {
                    error!("a tick failed: {e}; retrying with backoff up to {}s", BACKOFF_MAX.as_secs());
                }
                down = Some(failing);
                backoff = (backoff * 2).min(BACKOFF_MAX);
                backoff
            }
            Err(e) => {
                error!("a tick failed: {e}");
                backoff
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = stop.notify.notified() => {}
        }
    }
}

/// Until the next due job or deadline, at most `interval`, at least 0; 1 ms
/// late rather than early, since the scripts compare whole milliseconds.
pub fn next_sleep(report: &TickReport, interval: Duration) -> Duration {
    let next = match (report.next_due, report.next_deadline) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    match next {
        Some(due) => {
            let ms = ((due - report.now) * 1000.0).ceil().max(0.0) + 1.0;
            Duration::from_millis(ms as u64).min(interval)
        }
        None => interval,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_until_next_due_within_interval() {
        let second = Duration::from_secs(1);
        let r = |next_due: Option<f64>| TickReport { next_due, now: 100.0, ..Default::default() };
        assert_eq!(next_sleep(&r(None), second), second);
        assert_eq!(next_sleep(&r(Some(100.25)), second), Duration::from_millis(251));
        assert_eq!(next_sleep(&r(Some(500.0)), second), second);
        assert_eq!(next_sleep(&r(Some(99.0)), second), Duration::from_millis(1));
        let deadline =
            TickReport { next_due: Some(100.5), next_deadline: Some(100.1), now: 100.0, ..Default::default() };
        assert_eq!(next_sleep(&deadline, second), Duration::from_millis(101));
        let only_deadline = TickReport { next_deadline: Some(100.375), now: 100.0, ..Default::default() };
        assert_eq!(next_sleep(&only_deadline, second), Duration::from_millis(376));
    }
}
