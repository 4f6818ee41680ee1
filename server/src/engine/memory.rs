//! Whether Redis is out of memory (`maxmemory` reached under
//! `maxmemory-policy noeviction`), read from `INFO memory` at most once a
//! second by the movers. Redis then refuses every write that may need
//! memory as a script's first: pushes fail (the backpressure producers
//! need), while moving, popping, reserving, acking and releasing go on,
//! since their scripts free memory first (PROTOCOL.md, "Operations"; in the
//! per-topic layout a client's index write after a reserve is refused). So
//! the server does not fail here: it says so once when Redis fills up,
//! counts it (`delayer_redis_oom_total`), and says so again when memory is
//! free.

use crate::telemetry;
use delayer_protocol::connection::Conn;
use log::{debug, info, warn};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const CHECK_EVERY: Duration = Duration::from_secs(1);

/// What the last look at Redis's memory found.
#[derive(Default)]
pub struct MemoryWatch {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    checked: Option<Instant>,
    full: bool,
    /// INFO is refused (an ACL without it): not asked again.
    refused: bool,
}

/// The numbers of `INFO memory` that say whether Redis is full.
#[derive(Debug, Default, PartialEq)]
struct Memory {
    used: u64,
    /// Memory Redis leaves out when it compares with maxmemory (replication
    /// and AOF buffers).
    not_counted: u64,
    max: u64,
    policy: String,
}

impl Memory {
    fn parse(info: &str) -> Memory {
        let mut m = Memory::default();
        for line in info.lines() {
            let Some((name, value)) = line.trim_end().split_once(':') else { continue };
            let number = || value.parse::<u64>().unwrap_or(0);
            match name {
                "used_memory" => m.used = number(),
                "mem_not_counted_for_evict" => m.not_counted = number(),
                "maxmemory" => m.max = number(),
                "maxmemory_policy" => m.policy = value.to_string(),
                _ => {}
            }
        }
        m
    }

    /// As Redis decides: a write that may need memory is refused (rather
    /// than a key evicted) when the memory it counts is over maxmemory.
    fn full(&self) -> bool {
        self.max > 0 && self.policy == "noeviction" && self.used.saturating_sub(self.not_counted) > self.max
    }
}

impl MemoryWatch {
    /// Reads Redis's memory when the last look is a second old, and logs a
    /// change. Never fails the tick: a reply it cannot read is left alone.
    pub fn check(&self, conn: &mut Conn) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.refused || state.checked.is_some_and(|at| at.elapsed() < CHECK_EVERY) {
            return;
        }
        state.checked = Some(Instant::now());
        let info: String = match redis::cmd("INFO").arg("memory").query(conn) {
            Ok(info) => info,
            Err(e) => {
                if e.code() == Some("NOPERM") {
                    state.refused = true;
                    info!("cannot read INFO memory ({e}): a full Redis is told by its refusals only");
                } else {
                    debug!("cannot read INFO memory: {e}");
                }
                return;
            }
        };
        let memory = Memory::parse(&info);
        let full = memory.full();
        if full && !state.full {
            telemetry::redis_oom();
            warn!(
                "redis is out of memory (used {} of maxmemory {} bytes, policy noeviction): pushes, reschedules, \
                 touches and dead-letter requeues are refused until memory frees; moving, popping, acking and \
                 releasing go on (consumers free memory)",
                memory.used, memory.max
            );
        } else if !full && state.full {
            info!(
                "redis has memory again (used {} of maxmemory {} bytes): pushes are accepted again",
                memory.used, memory.max
            );
        }
        state.full = full;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_is_over_maxmemory_under_noeviction_only() {
        let info = "# Memory\r\nused_memory:2000\r\nused_memory_human:1.95K\r\nmaxmemory:1000\r\n\
                    maxmemory_policy:noeviction\r\nmem_not_counted_for_evict:500\r\n";
        let m = Memory::parse(info);
        assert_eq!(m, Memory { used: 2000, not_counted: 500, max: 1000, policy: "noeviction".into() });
        assert!(m.full());
        assert!(!Memory { not_counted: 1000, ..Memory::parse(info) }.full(), "at maxmemory is not over it");
        assert!(!Memory { max: 0, ..Memory::parse(info) }.full(), "no maxmemory");
        assert!(!Memory { policy: "allkeys-lru".into(), ..Memory::parse(info) }.full(), "evicts instead");
        assert_eq!(Memory::parse("garbage\r\nused_memory:x\r\n"), Memory::default());
    }
}
