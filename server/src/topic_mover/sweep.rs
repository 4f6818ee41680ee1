//! The slow sweeps, the index's last repair (PROTOCOL.md, "The per-topic
//! layout"): a slice per tick of a full pass over the known topics' pool and
//! reserved heads ([`SWEEP_EVERY`]), and of one over the key space for pools
//! missing from `<prefix>topics` ([`RESCAN_EVERY`]). They find what an
//! announcement lost outside a subscription cut (a PUBLISH an ACL refused, an
//! index write Redis refused) and what writers that announce nothing (Delayer
//! 1.x-style writes, a hand-made job) leave.

use super::{out_of_memory_is_later, TopicMover, SLICE};
use crate::scripts::BadKey;
use delayer::connection::Conn;
use redis::RedisResult;
use std::time::{Duration, Instant};

/// A full pass over the known topics' pool heads at most this often: the
/// longest a job waits when its index write was lost.
const SWEEP_EVERY: Duration = Duration::from_secs(10);
/// A full pass over the key space for topics missing from `<prefix>topics`.
const RESCAN_EVERY: Duration = Duration::from_secs(60);

/// Where each background pass stands.
#[derive(Default)]
pub(super) struct Passes {
    sweep: Pass,
    rescan: Pass,
}

#[derive(Default)]
struct Pass {
    cursor: u64,
    started: Option<Instant>,
}

impl Pass {
    /// Whether to take a slice now: mid-pass, or a new pass is due.
    fn due(&mut self, every: Duration) -> bool {
        if self.cursor != 0 {
            return true;
        }
        if self.started.is_some_and(|at| at.elapsed() < every) {
            return false;
        }
        self.started = Some(Instant::now());
        true
    }
}

impl TopicMover {
    /// One slice of each background pass that is due: known topics' pool
    /// heads into the index; pools in the key space into `<prefix>topics`.
    pub(super) fn passes_slice(&self, conn: &mut Conn) -> redis::RedisResult<()> {
        let mut passes = self.passes.lock().unwrap_or_else(|e| e.into_inner());
        if passes.sweep.due(SWEEP_EVERY) {
            let read = redis::cmd("SSCAN")
                .arg(self.keys.topics())
                .arg(passes.sweep.cursor)
                .arg("COUNT")
                .arg(SLICE)
                .query(conn);
            let (cursor, topics): (u64, Vec<String>) = self.topics_of_wrong_type(conn, read)?;
            passes.sweep.cursor = cursor;
            self.index_heads(conn, &topics)?;
        }
        if passes.rescan.due(RESCAN_EVERY) {
            let pools: Vec<String> = if conn.is_cluster() {
                // Every master holds its own slots' keys: each is scanned
                // to the end (a cursor is one node's).
                passes.rescan.cursor = 0;
                conn.scan_match_all(&self.keys.pool_pattern())?
            } else {
                let (cursor, pools): (u64, Vec<String>) = redis::cmd("SCAN")
                    .arg(passes.rescan.cursor)
                    .arg("MATCH")
                    .arg(self.keys.pool_pattern())
                    .arg("COUNT")
                    .arg(SLICE)
                    .query(conn)?;
                passes.rescan.cursor = cursor;
                pools
            };
            let topics: Vec<&str> = pools.iter().filter_map(|k| self.keys.topic_of_pool(k)).collect();
            if !topics.is_empty() {
                // Refused while Redis is out of memory: the next pass adds them.
                let added = redis::cmd("SADD").arg(self.keys.topics()).arg(&topics).query::<()>(conn);
                self.topics_of_wrong_type(conn, out_of_memory_is_later(added))?;
                let topics: Vec<String> = topics.iter().map(|t| t.to_string()).collect();
                self.index_heads(conn, &topics)?;
            }
        }
        Ok(())
    }

    /// `got` of a command on `<prefix>topics`, unless Redis said it holds
    /// another type: then it is a bad key (logged once, naming it) and the
    /// pass goes on without it (nothing from it): the rescan finds every
    /// topic's pool in the key space all the same.
    pub(super) fn topics_of_wrong_type<T: Default>(&self, conn: &mut Conn, got: RedisResult<T>) -> RedisResult<T> {
        match got {
            Err(e) if e.code() == Some("WRONGTYPE") => {
                let kind: String = redis::cmd("TYPE").arg(self.keys.topics()).query(conn)?;
                let bad = BadKey { key: self.keys.topics(), kind, expected: "set".into() };
                self.bad.met(&[bad], |bad| self.effect(bad));
                Ok(T::default())
            }
            other => other,
        }
    }
}
