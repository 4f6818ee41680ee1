//! Rounds of one script over many topics, for the per-topic mover: every
//! call of a round goes in one round trip, so Redis, not the round trip,
//! sets the pace of a drain; a topic whose keys hold the wrong type is set
//! apart with Redis's error, and the others go on.

use crate::scripts;
use delayer_protocol::connection::Conn;
use redis::{Cmd, RedisError, RedisResult, Script, Value};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Ids a round of calls may move at most: Redis runs a round's calls back to
/// back, so other clients (pops, pushes) wait at most about this many ids'
/// work (a few milliseconds) for their turn, while the round trip between
/// rounds is paid once per this many ids rather than once per batch.
const IDS_PER_ROUND: u32 = 8192;

/// One script run for many topics, in rounds: every call of a round goes
/// in one round trip ([`scripts::eval_each`]), at most `IDS_PER_ROUND`
/// ids' worth; a topic whose last call came back full goes to the back of
/// the queue with as many calls as it asks for.
pub struct Waves<'a> {
    script: &'a Script,
    per_round: usize,
}

/// What the rounds left: each topic's last reply, and the topics whose keys
/// hold the wrong type, with Redis's error.
pub struct Drained<R> {
    pub last: Vec<(String, R)>,
    pub bad: Vec<(String, RedisError)>,
}

impl<'a> Waves<'a> {
    pub fn new(script: &'a Script, batch_size: u32) -> Waves<'a> {
        Waves { script, per_round: (IDS_PER_ROUND / batch_size.max(1)).max(1) as usize }
    }

    /// Runs `call(topic)` for every topic, then again for those `more` asks
    /// for (the number of calls it wants; 0 when done), until none is left
    /// or `stop` is set. `read` gets each reply with its share of the
    /// round's time.
    pub fn run<R>(
        &self,
        conn: &mut Conn,
        topics: &[String],
        stop: &AtomicBool,
        call: impl Fn(&str) -> Cmd,
        mut read: impl FnMut(&str, Value, Duration) -> RedisResult<R>,
        more: impl Fn(&R) -> usize,
    ) -> RedisResult<Drained<R>> {
        let mut queue: VecDeque<(&str, usize)> = topics.iter().map(|t| (t.as_str(), 1)).collect();
        let mut drained = Drained { last: Vec::with_capacity(topics.len()), bad: Vec::new() };
        while !queue.is_empty() {
            let mut round = Vec::new();
            let mut calls = Vec::new();
            while calls.len() < self.per_round {
                let Some((topic, wanted)) = queue.pop_front() else { break };
                let n = wanted.clamp(1, self.per_round - calls.len());
                calls.extend((0..n).map(|_| call(topic)));
                round.push((topic, n));
            }
            let started = Instant::now();
            let mut replies = scripts::eval_each(conn, self.script, &calls)?.into_iter();
            let took = started.elapsed() / calls.len() as u32;
            for (topic, n) in round {
                let (mut last, mut bad) = (None, None);
                for reply in replies.by_ref().take(n) {
                    match reply {
                        Ok(value) => last = Some(read(topic, value, took)?),
                        Err(e) if bad_keys(&e) => bad = Some(e),
                        Err(e) => return Err(e),
                    }
                }
                match (bad, last) {
                    (Some(e), _) => drained.bad.push((topic.to_string(), e)),
                    (None, Some(last)) => match more(&last) {
                        wanted if wanted > 0 && !stop.load(Ordering::SeqCst) => queue.push_back((topic, wanted)),
                        _ => drained.last.push((topic.to_string(), last)),
                    },
                    (None, None) => {}
                }
            }
        }
        Ok(drained)
    }
}

/// Whether Redis refused a topic's keys themselves (a key of the wrong type),
/// as opposed to being unreachable.
pub fn bad_keys(e: &redis::RedisError) -> bool {
    e.code() == Some("WRONGTYPE") || e.to_string().contains("WRONGTYPE")
}
