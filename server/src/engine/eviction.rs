//! Redis's eviction policy, as the server last read it: warned about at
//! start and at every reconnect, refused at start with `[redis]
//! require_noeviction = yes`, and shown by `/v1/stats`, the dashboard and
//! the gauge `delayer_redis_eviction_unsafe` (1 while the policy is not
//! `noeviction`, 0 when it is; absent until read).
//!
//! Reading and wording are the SDK's (`delayer_protocol::eviction`), shared with
//! `delayer stats` and the workers. The mover reads the policy on each new
//! connection and at most every `RECHECK` on a live one (an operator's
//! `CONFIG SET` shows within that); the warning is repeated after a
//! reconnect, and when the policy changes, not on every look.

use delayer_protocol::connection::Conn;
use delayer_protocol::eviction;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often a live connection's policy is read again.
const RECHECK: Duration = Duration::from_secs(60);

/// The gauge: 1 while Redis may evict, 0 when it may not.
pub const GAUGE: &str = "delayer_redis_eviction_unsafe";

#[derive(Default)]
struct State {
    /// The policy last read (`None`: not read yet, or unreadable).
    policy: Option<String>,
    /// When it was read.
    at: Option<Instant>,
    /// Whether "cannot read it" was said already.
    unreadable_said: bool,
}

static STATE: Mutex<State> = Mutex::new(State { policy: None, at: None, unreadable_said: false });

/// Reads the policy on `conn` when `fresh` (a new connection: at start or
/// after a reconnect: the warning is repeated) or when the last read is
/// older than `RECHECK` (said only when it changed).
pub fn check(conn: &mut Conn, fresh: bool) {
    let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
    if !fresh && state.at.is_some_and(|at| at.elapsed() < RECHECK) {
        return;
    }
    state.at = Some(Instant::now());
    match eviction::read(conn) {
        Ok(policy) => {
            let changed = state.policy.as_deref() != Some(policy.as_str());
            let safe = eviction::is_safe(&policy);
            metrics::gauge!(GAUGE).set(if safe { 0.0 } else { 1.0 });
            if !safe && (fresh || changed) {
                log::warn!("{}", eviction::warning(&policy));
            } else if safe && changed && state.policy.is_some() {
                log::info!("redis has maxmemory-policy noeviction now: no job can be evicted");
            }
            state.policy = Some(policy);
        }
        Err(why) => {
            if !state.unreadable_said {
                log::warn!(
                    "cannot tell redis's maxmemory-policy ({why}); unless it is noeviction, jobs can be evicted \
                     undelivered"
                );
                state.unreadable_said = true;
            }
        }
    }
}

/// The policy last read, if any.
pub fn policy() -> Option<String> {
    STATE.lock().unwrap_or_else(|e| e.into_inner()).policy.clone()
}

/// `{"maxmemory_policy": ..., "eviction_safe": ...}` (nulls until read),
/// for `/v1/stats` and `delayer stats --json`.
pub fn json(policy: Option<&str>) -> serde_json::Value {
    serde_json::json!({
        "maxmemory_policy": policy,
        "eviction_safe": policy.map(eviction::is_safe),
    })
}

/// `[redis] require_noeviction`: the reason to refuse to start, unless the
/// policy on `conn` is `noeviction`.
pub fn required(conn: &mut Conn) -> Result<(), String> {
    match eviction::read(conn) {
        Ok(policy) if eviction::is_safe(&policy) => Ok(()),
        Ok(policy) => {
            Err(format!("not starting: [redis] require_noeviction is set, and {}", eviction::warning(&policy)))
        }
        Err(why) => Err(format!(
            "cannot tell redis's maxmemory-policy ({why}), and [redis] require_noeviction is set: not starting \
             (allow the user CONFIG GET or INFO, or leave require_noeviction out)"
        )),
    }
}
