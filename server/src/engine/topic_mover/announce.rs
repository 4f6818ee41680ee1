//! The per-topic index from what the scripts announce (PROTOCOL.md, "The
//! per-topic layout"): each tick first writes the topics announced since the
//! last one (`ZADD <prefix>due LT`, and `SADD <prefix>topics` the first time
//! this process meets a topic), and after every (re)subscription of the
//! wake-up listener rebuilds the index from the key space (every pool, and
//! every known topic's pool and reserved heads), since what was published
//! while it was away is lost. The listener subscribes before it asks for
//! the rescan, so an announcement is either heard or found by it.
//!
//! An announcement of a topic this process has indexed before is trusted for
//! its time (an early one only makes the server drain the topic early, which
//! writes the right time back); a topic met for the first time is indexed
//! from its keys (pool and reserved heads), and only when it has a job, so
//! junk published on the channel adds no topic to `<prefix>topics`. Redis refusing an index write (a full
//! Redis, a key of the wrong type) costs that write only: it is said once per
//! key, and the sweeps write the index later.

use super::{out_of_memory_is_later, TopicMover, SLICE};
use crate::scripts::BadKey;
use delayer_protocol::connection::{Batch, Conn};
use log::{debug, warn};
use redis::{RedisResult, Value};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Topics remembered as added to `<prefix>topics`, at most: past it the set
/// starts again (an SADD of a topic already there changes nothing).
const MAX_SEEN: usize = 100_000;

impl TopicMover {
    /// Writes the announcements heard since the last tick into the index,
    /// after the full rescan a (re)subscription asked for.
    pub(super) fn apply_announced(&self, conn: &mut Conn) -> RedisResult<()> {
        let (topics, rescan) = self.announced.take();
        if rescan {
            // Failed half-way (Redis away): asked for again, for the next tick.
            self.rescan_all(conn).inspect_err(|_| self.announced.rescan())?;
        }
        if topics.is_empty() {
            return Ok(());
        }
        let (due, known) = (self.keys.due(), self.keys.topics());
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let (old, fresh): (Vec<_>, Vec<_>) = topics.iter().partition(|(topic, _)| seen.contains(topic));
        drop(seen);
        // A topic met for the first time is taken from its keys, not from
        // the message: junk published on the channel adds no topic.
        let fresh = self.heads_of(conn, &fresh).inspect_err(|_| self.announced.rescan())?;
        let mut write = Batch::new();
        // Which key each command writes, its topic and (a ZADD's) time.
        let mut writes: Vec<(usize, &str, f64)> = Vec::new();
        for (topic, at) in old.iter().map(|(t, at)| (t, *at)).chain(fresh.iter().map(|(t, at)| (*t, *at))) {
            write.add(redis::cmd("ZADD").arg(&due).arg("LT").arg(at).arg(topic).clone());
            writes.push((0, topic, at));
        }
        for (topic, at) in &fresh {
            write.add(redis::cmd("SADD").arg(&known).arg(*topic).clone());
            writes.push((1, topic, *at));
        }
        let replies: Vec<RedisResult<Value>> = match write.query_each(conn) {
            Ok(replies) => replies,
            Err(e) => {
                // Not written (Redis away): the rescan after it finds them all.
                self.announced.rescan();
                return Err(e);
            }
        };
        let (mut added, mut full) = (Vec::new(), Vec::new());
        for ((key, topic, at), reply) in writes.into_iter().zip(replies) {
            match reply {
                Ok(_) if key == 1 => added.push(topic),
                Ok(_) => {}
                // Redis out of memory takes the index entry by index.lua.
                Err(e) if key == 0 && super::out_of_memory(&e) => full.push((topic, at)),
                Err(e) => self.refused(conn, key, &e),
            }
        }
        self.lower_index(conn, &full)?;
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() + added.len() > MAX_SEEN {
            seen.clear();
        }
        seen.extend(added.into_iter().map(str::to_string));
        Ok(())
    }

    /// The topics (met for the first time) that have a job waiting or
    /// reserved, each with its index time read from its keys.
    fn heads_of<'t>(&self, conn: &mut Conn, topics: &[&'t (String, f64)]) -> RedisResult<Vec<(&'t String, f64)>> {
        if topics.is_empty() {
            return Ok(Vec::new());
        }
        let mut read = Batch::new();
        topics.iter().for_each(|(t, _)| self.read_head(&mut read, t));
        // A key of the wrong type answers an error for itself alone (the
        // topic is left to the sweeps, which name the key).
        let heads: Vec<RedisResult<super::Head>> = read.query_each(conn)?;
        Ok(topics
            .iter()
            .zip(heads.chunks(2))
            .filter_map(|((topic, _), pair)| match pair {
                [Ok(pool), Ok(reserved)] => self.head_time(topic, pool, reserved).map(|at| (topic, at)),
                _ => None,
            })
            .collect())
    }

    /// Says once per key that Redis refused an index write: a key of the
    /// wrong type is named as every bad key is; anything else (out of
    /// memory, an ACL) in a line of its own. The sweeps write it later.
    fn refused(&self, conn: &mut Conn, key: usize, e: &redis::RedisError) {
        let name = if key == 0 { self.keys.due() } else { self.keys.topics() };
        if e.code() == Some("WRONGTYPE") {
            let expected = if key == 0 { "zset" } else { "set" };
            let kind: String = redis::cmd("TYPE").arg(&name).query(conn).unwrap_or_default();
            self.bad.met(&[BadKey { key: name, kind, expected: expected.into() }], |bad| self.effect(bad));
        } else if !self.refused_said[key].swap(true, Ordering::Relaxed) {
            warn!(
                "{name}: redis refused the index write of an announcement ({e}); the sweeps write it later (said once)"
            );
        }
    }

    /// Rebuilds the index from the key space: every pool's topic into
    /// `<prefix>topics`, and every known topic's pool and reserved heads
    /// into `<prefix>due`. One SCAN of the key space (every master's on a
    /// cluster): run at start and after every (re)subscription only.
    fn rescan_all(&self, conn: &mut Conn) -> RedisResult<()> {
        let started = Instant::now();
        let pools = conn.scan_match_all(&self.keys.pool_pattern())?;
        let mut topics: Vec<String> =
            pools.iter().filter_map(|k| self.keys.topic_of_pool(k)).map(str::to_string).collect();
        for chunk in topics.chunks(SLICE) {
            // Refused while Redis is out of memory: the 60 s rescan adds them.
            let added = redis::cmd("SADD").arg(self.keys.topics()).arg(chunk).query::<()>(conn);
            self.topics_of_wrong_type(conn, out_of_memory_is_later(added))?;
        }
        let mut cursor = 0u64;
        loop {
            let read = redis::cmd("SSCAN").arg(self.keys.topics()).arg(cursor).arg("COUNT").arg(SLICE).query(conn);
            let (next, known): (u64, Vec<String>) = self.topics_of_wrong_type(conn, read)?;
            topics.extend(known);
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        topics.sort_unstable();
        topics.dedup();
        for chunk in topics.chunks(SLICE) {
            self.index_heads(conn, chunk)?;
        }
        debug!("rescanned the key space: {} topic(s) indexed in {:?}", topics.len(), started.elapsed());
        Ok(())
    }
}
