//! Liveness and readiness probes, one rule for both listeners: `/healthz`
//! and `/readyz` on `metrics_addr`, `/v1/health` and `/v1/ready` on
//! `http_addr`. What is ready is judged here; the answers over HTTP are the
//! `http` tree's (`http::metrics`).
//!
//! Liveness says the process serves requests (a hung or dead one gets
//! restarted by its supervisor); it never looks at Redis, since restarting
//! the server cures no Redis outage. Readiness says this server does its job
//! now: Redis answers (a PING within `ANSWER_BOUND`), the mover completed
//! a tick or a batch recently (within max(`STALE_FLOOR`, `STALE_TICKS` ×
//! `timer_interval`): the timer ticks at least every `timer_interval`, so a
//! longer silence means ticks fail, on a key of the wrong type say, or hang),
//! and Redis's maxmemory-policy is `noeviction` (under any other, Redis may
//! delete jobs undelivered). A policy that cannot be read (CONFIG and INFO
//! refused to our user) does not fail readiness: it is warned about at start,
//! and `require_noeviction` is the way to insist on it.
//!
//! Redis's answer is kept for `CACHE_FOR` and asked for by one probe at a
//! time, so a flood of probes costs Redis at most a PING and a CONFIG GET a
//! second; the calls run on a blocking thread, on a connection of their own
//! with short timeouts, and a probe waits at most `ANSWER_BOUND` for them.

use delayer_protocol::connection::{Conn, Manager};
use delayer_protocol::target::Target;
use redis::ConnectionLike;
use serde_json::{json, Value};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Longest a probe waits for Redis (connecting included).
const ANSWER_BOUND: Duration = Duration::from_millis(1000);

/// How long Redis's answer serves the probes that follow it.
const CACHE_FOR: Duration = Duration::from_secs(1);

/// The mover is stalled when it has not completed a tick or a batch for
/// the longer of this and [`STALE_TICKS`] timer intervals.
const STALE_FLOOR: Duration = Duration::from_secs(10);
const STALE_TICKS: u32 = 10;

/// When the mover last completed a tick or a batch.
static LAST_TICK: Mutex<Option<Instant>> = Mutex::new(None);

static READINESS: OnceLock<Readiness> = OnceLock::new();

/// What the probes share: where Redis is, and its last answer.
struct Readiness {
    manager: Manager,
    /// Redis as the log names it (`[redis]` settings, no password).
    redis: String,
    started: Instant,
    stale_after: Duration,
    /// The probes' own connection; `None` until opened or after an error.
    conn: Mutex<Option<Conn>>,
    /// Redis's last answer and when it came; the lock makes one probe at a
    /// time ask.
    answer: tokio::sync::Mutex<Option<(Instant, Answer)>>,
    /// The policy last read, judged while Redis does not answer.
    policy: Mutex<Option<String>>,
}

/// Redis's answer to a probe.
#[derive(Debug, Clone)]
struct Answer {
    /// Why Redis is not ready (unreachable, refused, no answer in time).
    failure: Option<String>,
    /// The maxmemory-policy, or why it cannot be told.
    policy: Option<Result<String, String>>,
}

/// Sets up the probes for the server about to run: Redis at `target`
/// (described as `redis` in reasons) and the timer's `timer_interval`.
pub fn init(target: Target, redis: String, timer_interval: Duration) {
    let manager = Manager::with_target(target, ANSWER_BOUND, Some(ANSWER_BOUND));
    let stale_after = stale_after(timer_interval, floor());
    let _ = READINESS.set(Readiness {
        manager,
        redis,
        started: Instant::now(),
        stale_after,
        conn: Mutex::new(None),
        answer: tokio::sync::Mutex::new(None),
        policy: Mutex::new(None),
    });
}

/// The mover completed a tick or a batch (both layouts; the timer and
/// each batch call this, so a long drain counts as progress).
pub fn ticked() {
    *LAST_TICK.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
}

/// Whether the server is ready, and the JSON that says why.
pub async fn report() -> (bool, Value) {
    let Some(readiness) = READINESS.get() else {
        let reason = "the server is starting";
        let body = json!({"status": "not_ready", "checks": {}, "failing": ["starting"], "reason": reason});
        return (false, body);
    };
    let answer = readiness.answer().await;
    let last_tick = *LAST_TICK.lock().unwrap_or_else(|e| e.into_inner());
    let policy = match &answer.policy {
        Some(read) => Some(read.clone()),
        None => readiness.policy.lock().unwrap_or_else(|e| e.into_inner()).clone().map(Ok),
    };
    let checks = [
        ("redis", redis_check(answer.failure.as_deref())),
        ("mover", mover_check(last_tick, readiness.started, Instant::now(), readiness.stale_after)),
        ("eviction", eviction_check(policy.as_ref())),
    ];
    judge(&checks)
}

/// The checks' verdict: `{"status", "checks"}`, plus `"failing"` (names)
/// and `"reason"` (their reasons, joined) when one fails.
fn judge(checks: &[(&str, Value)]) -> (bool, Value) {
    let failing: Vec<&(&str, Value)> = checks.iter().filter(|(_, c)| c["ok"] != true).collect();
    let all: serde_json::Map<String, Value> = checks.iter().map(|(name, c)| (name.to_string(), c.clone())).collect();
    if failing.is_empty() {
        return (true, json!({"status": "ready", "checks": all}));
    }
    let names: Vec<&str> = failing.iter().map(|(name, _)| *name).collect();
    let reasons: Vec<String> =
        failing.iter().map(|(name, c)| format!("{name}: {}", c["reason"].as_str().unwrap_or("failed"))).collect();
    (false, json!({"status": "not_ready", "checks": all, "failing": names, "reason": reasons.join("; ")}))
}

fn redis_check(failure: Option<&str>) -> Value {
    match failure {
        None => json!({"ok": true}),
        Some(why) => json!({"ok": false, "reason": why}),
    }
}

/// The mover's check: a tick or batch completed within `stale_after` of
/// `now` (the process `started` at that instant).
fn mover_check(last: Option<Instant>, started: Instant, now: Instant, stale_after: Duration) -> Value {
    let bound = stale_after.as_secs_f64();
    match last {
        Some(at) if now.saturating_duration_since(at) <= stale_after => json!({
            "ok": true,
            "last_tick_seconds_ago": round_ms(now.saturating_duration_since(at)),
            "bound_seconds": bound,
        }),
        Some(at) => {
            let ago = round_ms(now.saturating_duration_since(at));
            json!({
                "ok": false,
                "last_tick_seconds_ago": ago,
                "bound_seconds": bound,
                "reason": format!(
                    "the mover's last tick completed {ago} s ago (more than {bound} s): ticks fail or hang"
                ),
            })
        }
        None => json!({
            "ok": false,
            "last_tick_seconds_ago": null,
            "bound_seconds": bound,
            "reason": format!(
                "the mover has not completed a tick yet ({} s since start)",
                round_ms(now.saturating_duration_since(started))
            ),
        }),
    }
}

/// The eviction check: `policy` as read (or why it cannot be), `None`
/// before Redis ever answered (the redis check says why).
fn eviction_check(policy: Option<&Result<String, String>>) -> Value {
    match policy {
        Some(Ok(p)) if delayer_protocol::eviction::is_safe(p) => json!({"ok": true, "policy": p}),
        Some(Ok(p)) => json!({"ok": false, "policy": p, "reason": delayer_protocol::eviction::warning(p)}),
        Some(Err(why)) => json!({"ok": true, "policy": null, "note": format!("cannot tell: {why}")}),
        None => json!({"ok": true, "policy": null, "note": "not read yet"}),
    }
}

/// Seconds to the millisecond, for the JSON.
fn round_ms(d: Duration) -> f64 {
    d.as_millis() as f64 / 1000.0
}

/// How long without a completed tick means stalled.
fn stale_after(timer_interval: Duration, floor: Duration) -> Duration {
    timer_interval.saturating_mul(STALE_TICKS).max(floor)
}

/// [`STALE_FLOOR`]; debug builds take `DELAYER_TEST_STALE_FLOOR_MS`, so a
/// test sees a stalled mover in a second rather than ten.
fn floor() -> Duration {
    #[cfg(debug_assertions)]
    if let Some(ms) = std::env::var("DELAYER_TEST_STALE_FLOOR_MS").ok().and_then(|v| v.parse().ok()) {
        return Duration::from_millis(ms);
    }
    STALE_FLOOR
}

impl Readiness {
    /// Redis's answer, fresh within [`CACHE_FOR`]; asked for at most once
    /// at a time, and waited for at most [`ANSWER_BOUND`].
    async fn answer(&'static self) -> Answer {
        let mut cached = self.answer.lock().await;
        if let Some((at, answer)) = cached.as_ref() {
            if at.elapsed() < CACHE_FOR {
                return answer.clone();
            }
        }
        let asked = tokio::time::timeout(ANSWER_BOUND, tokio::task::spawn_blocking(move || self.ask())).await;
        let answer = match asked {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => Answer { failure: Some(format!("the probe failed: {e}")), policy: None },
            Err(_) => Answer {
                failure: Some(format!("redis at {} did not answer within {} ms", self.redis, ANSWER_BOUND.as_millis())),
                policy: None,
            },
        };
        if let Some(Ok(policy)) = &answer.policy {
            *self.policy.lock().unwrap_or_else(|e| e.into_inner()) = Some(policy.clone());
        }
        *cached = Some((Instant::now(), answer.clone()));
        answer
    }

    /// PING and the policy, on the probes' connection (opened if needed,
    /// dropped after an error). Blocking: run on a blocking thread.
    fn ask(&self) -> Answer {
        // A previous probe's call still waiting (a stalled Redis): not a
        // second connection, the same verdict.
        let Ok(mut slot) = self.conn.try_lock() else {
            let failure = format!("redis at {} has not answered the previous probe yet", self.redis);
            return Answer { failure: Some(failure), policy: None };
        };
        let conn = match slot.take().filter(|conn| conn.is_open()) {
            Some(conn) => Ok(conn),
            None => self.manager.connect(),
        };
        let answered = conn.and_then(|mut conn| redis::cmd("PING").query::<()>(&mut conn).map(|()| conn));
        match answered {
            Ok(mut conn) => {
                let policy = delayer_protocol::eviction::read(&mut conn);
                *slot = Some(conn);
                Answer { failure: None, policy: Some(policy) }
            }
            Err(e) => {
                let e = self.manager.target().explain(e, ANSWER_BOUND);
                let failure = if crate::credentials::refused(&e) {
                    format!("redis at {} refused our credentials: {e}", self.redis)
                } else {
                    format!("redis at {} does not answer: {e}", self.redis)
                };
                Answer { failure: Some(failure), policy: None }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mover_is_stalled_after_ten_intervals_or_the_floor() {
        let floor = Duration::from_secs(10);
        assert_eq!(stale_after(Duration::from_millis(100), floor), floor);
        assert_eq!(stale_after(Duration::from_secs(5), floor), Duration::from_secs(50));
        // timer_interval's largest (an hour) does not overflow.
        assert_eq!(stale_after(Duration::from_secs(3600), floor), Duration::from_secs(36_000));
    }

    #[test]
    fn readiness_fails_before_the_first_tick_and_when_the_last_is_old() {
        let bound = Duration::from_secs(10);
        let started = Instant::now();
        let now = started + Duration::from_secs(3);
        let before = mover_check(None, started, now, bound);
        assert_eq!(before["ok"], false);
        assert!(before["reason"].as_str().is_some_and(|r| r.contains("not completed a tick yet")), "{before}");
        let recent = mover_check(Some(now - Duration::from_secs(2)), started, now, bound);
        assert_eq!((recent["ok"].clone(), recent["last_tick_seconds_ago"].clone()), (json!(true), json!(2.0)));
        let later = now + Duration::from_secs(30);
        let old = mover_check(Some(now), started, later, bound);
        assert_eq!(old["ok"], false);
        assert!(old["reason"].as_str().is_some_and(|r| r.contains("30 s ago")), "{old}");
        // A tick recorded "after" now (clocks read on two threads) is recent.
        assert_eq!(mover_check(Some(later), started, now, bound)["ok"], true);
    }

    #[test]
    fn only_noeviction_is_safe_and_an_unreadable_policy_passes() {
        assert_eq!(eviction_check(Some(&Ok("noeviction".into())))["ok"], true);
        let lru = eviction_check(Some(&Ok("allkeys-lru".into())));
        assert_eq!((lru["ok"].clone(), lru["policy"].clone()), (json!(false), json!("allkeys-lru")));
        assert!(lru["reason"].as_str().is_some_and(|r| r.contains("allkeys-lru")), "{lru}");
        assert_eq!(eviction_check(Some(&Err("CONFIG refused".into())))["ok"], true);
        assert_eq!(eviction_check(None)["ok"], true);
    }

    #[test]
    fn the_verdict_names_each_failing_check_and_its_reason() {
        let (ready, body) = judge(&[("redis", redis_check(None)), ("eviction", eviction_check(None))]);
        assert!(ready);
        assert_eq!(body["status"], "ready");
        assert!(body.get("failing").is_none(), "{body}");
        let (ready, body) = judge(&[
            ("redis", redis_check(Some("redis at x does not answer"))),
            ("mover", mover_check(None, Instant::now(), Instant::now(), Duration::from_secs(10))),
            ("eviction", eviction_check(None)),
        ]);
        assert!(!ready);
        assert_eq!((body["status"].clone(), body["failing"].clone()), (json!("not_ready"), json!(["redis", "mover"])));
        let reason = body["reason"].as_str().unwrap_or_default();
        assert!(reason.starts_with("redis: redis at x does not answer; mover: the mover"), "{reason}");
    }
}
