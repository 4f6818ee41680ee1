//! Finding jobs under a key prefix nobody serves: a client left on
//! `delayer:` while the servers run `myapp:` (or the reverse) pushes jobs no
//! server moves, and the job just waits.
//!
//! Another prefix may well be another application's, with servers of its
//! own, so only jobs *overdue* (due more than [`OVERDUE`] ago, far beyond a
//! working server's lateness) count: those nobody moves. A prefix is found
//! by its pool: a classic `<prefix>job_pool`, or a per-topic `<prefix>due`
//! index, both sorted sets. The default prefix is always looked at (it is
//! the usual mistake, and costs two reads); any other is found by SCAN
//! with `TYPE zset`, a few calls per look ([`Budget`]) and its cursor kept
//! from look to look, so a server covers a large keyspace slowly instead of
//! stalling Redis: about 10,000 keys a minute. On a Redis Cluster only the
//! default prefix is looked at (a SCAN reaches one node), and on a Redis
//! before 6.0 too (no `SCAN ... TYPE`).
//!
//! A candidate is checked before it counts: a classic pool's first overdue
//! id must have a job hash (`<prefix>job_bucket:<id>` with a topic), and a
//! per-topic index counts only the overdue ids of its topics' pools, so an
//! application's own `...job_pool` or `...due` sorted set is not taken for
//! one of ours.

use delayer_protocol::connection::{Batch, Conn};
use delayer_protocol::keys::{Keys, Layout, TopicKeys};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// Overdue by this much: no server moves these jobs.
pub const OVERDUE: Duration = Duration::from_secs(60);
/// Prefixes remembered (the first found; more are not looked for).
const MAX_PREFIXES: usize = 16;
/// Topics of a per-topic index whose pools are counted.
const TOPICS_COUNTED: isize = 20;
/// Keys each SCAN call walks.
const SCAN_COUNT: u64 = 1000;

/// How much one look may SCAN.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub calls: u32,
    pub time: Duration,
}

impl Budget {
    /// A running server's look, once a minute.
    pub const SERVER: Budget = Budget { calls: 10, time: Duration::from_millis(20) };
    /// `delayer stats`: a person waits for it.
    pub const COMMAND: Budget = Budget { calls: 200, time: Duration::from_secs(1) };
}

/// Overdue jobs under a prefix not served here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stray {
    pub prefix: String,
    pub layout: Layout,
    /// Jobs overdue by more than [`OVERDUE`] (a lower bound in the per-topic
    /// layout: `TOPICS_COUNTED` topics are counted).
    pub jobs: u64,
}

/// The prefixes found so far, and where the SCAN goes on from.
#[derive(Debug)]
pub struct Finder {
    own: String,
    found: BTreeSet<String>,
    cursor: u64,
    /// Whether the SCAN has been round the whole keyspace once.
    pub scanned_all: bool,
}

impl Finder {
    pub fn new(own_prefix: &str) -> Finder {
        let mut found = BTreeSet::new();
        if own_prefix != delayer_protocol::keys::DEFAULT_PREFIX {
            found.insert(delayer_protocol::keys::DEFAULT_PREFIX.to_string());
        }
        Finder { own: own_prefix.to_string(), found, cursor: 0, scanned_all: false }
    }

    /// SCANs on within `budget`, noting the prefixes of the pools it meets.
    pub fn scan(&mut self, conn: &mut Conn, budget: Budget) -> redis::RedisResult<()> {
        if matches!(conn, Conn::Cluster(_)) {
            return Ok(());
        }
        let started = Instant::now();
        for _ in 0..budget.calls {
            if started.elapsed() >= budget.time || self.found.len() >= MAX_PREFIXES {
                break;
            }
            let (next, keys): (u64, Vec<Vec<u8>>) =
                redis::cmd("SCAN").arg(self.cursor).arg("COUNT").arg(SCAN_COUNT).arg("TYPE").arg("zset").query(conn)?;
            for key in keys {
                // Key names are bytes; a prefix that is not UTF-8 is not ours to name.
                let Ok(key) = String::from_utf8(key) else { continue };
                let prefix = key.strip_suffix("job_pool").or_else(|| key.strip_suffix("due"));
                if let Some(prefix) = prefix.filter(|p| *p != self.own && self.found.len() < MAX_PREFIXES) {
                    self.found.insert(prefix.to_string());
                }
            }
            self.cursor = next;
            if next == 0 {
                self.scanned_all = true;
                break;
            }
        }
        Ok(())
    }

    /// The overdue jobs under each prefix found (`now`: Redis's clock, Unix
    /// seconds), those with none left out.
    pub fn strays(&self, conn: &mut Conn, now: f64) -> redis::RedisResult<Vec<Stray>> {
        let before = now - OVERDUE.as_secs_f64();
        let mut strays = Vec::new();
        for prefix in &self.found {
            for layout in [Layout::Classic, Layout::Topic] {
                // A key of another type is not one of ours: nothing there.
                let jobs = overdue(conn, prefix, layout, before).unwrap_or(0);
                if jobs > 0 {
                    strays.push(Stray { prefix: prefix.clone(), layout, jobs });
                }
            }
        }
        Ok(strays)
    }
}

/// Jobs of `layout` under `prefix` due before `before`.
fn overdue(conn: &mut Conn, prefix: &str, layout: Layout, before: f64) -> redis::RedisResult<u64> {
    match layout {
        Layout::Classic => {
            let keys = Keys::new(prefix);
            let first: Vec<Vec<u8>> = redis::cmd("ZRANGEBYSCORE")
                .arg(keys.job_pool())
                .arg("-inf")
                .arg(before)
                .arg("LIMIT")
                .arg(0)
                .arg(1)
                .query(conn)?;
            let Some(id) = first.first() else { return Ok(0) };
            let ours: bool = redis::cmd("HEXISTS").arg(keys.job_bucket_bytes(id)).arg("topic").query(conn)?;
            if !ours {
                return Ok(0);
            }
            redis::cmd("ZCOUNT").arg(keys.job_pool()).arg("-inf").arg(before).query(conn)
        }
        Layout::Topic => {
            let keys = TopicKeys::new(prefix);
            let topics: Vec<Vec<u8>> = redis::cmd("ZRANGEBYSCORE")
                .arg(keys.due())
                .arg("-inf")
                .arg(before)
                .arg("LIMIT")
                .arg(0)
                .arg(TOPICS_COUNTED)
                .query(conn)?;
            // As the movers do: a name with braces or not UTF-8 is left out.
            let topics: Vec<&str> =
                topics.iter().filter_map(|t| std::str::from_utf8(t).ok()).filter(|t| !t.contains(['{', '}'])).collect();
            if topics.is_empty() {
                return Ok(0);
            }
            // A paused topic's due jobs wait on purpose: not strays.
            let mut counts = Batch::new();
            for t in topics {
                counts.add(redis::cmd("HEXISTS").arg(keys.flow(t)).arg("paused").clone());
                counts.add(redis::cmd("ZCOUNT").arg(keys.pool(t)).arg("-inf").arg(before).clone());
            }
            let counts: Vec<u64> = counts.query(conn)?;
            Ok(counts.chunks(2).filter(|c| c[0] == 0).map(|c| c.get(1).copied().unwrap_or(0)).sum())
        }
    }
}
