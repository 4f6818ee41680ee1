//! A warning when jobs wait where this server does not look: in the other
//! key layout under its prefix, or under another prefix (`other_prefix`).
//!
//! A client left on the other `layout` or `key_prefix` pushes jobs this
//! server never moves, and nothing else would say so: the job just waits
//! (README, "Key layouts"). Each mover looks once a minute: a per-topic
//! server at the classic pool (`ZCARD <prefix>job_pool`), a classic server
//! at the pools and reservations of the topics in the per-topic index
//! (`<prefix>due`, or, when no per-topic server keeps one, the pools a
//! bounded SCAN finds; at most `TOPICS_LOOKED_AT` of them), and both at the
//! overdue jobs of other prefixes. It warns when what it finds changes (a
//! place starts or stops holding jobs), and again every ten minutes while
//! jobs keep waiting (a migration fills both layouts for a while).
//! `delayer stats` shows the same findings, worded the same.

use crate::other_prefix::{Budget, Finder, Stray};
use delayer_protocol::connection::{Batch, Conn};
use delayer_protocol::keys::{Keys, Layout, TopicKeys};
use log::warn;
use serde_json::json;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often the other layout's keys are looked at.
const CHECK_EVERY: Duration = Duration::from_secs(60);
/// [`CHECK_EVERY`], or the milliseconds in `DELAYER_TEST_LOOK_EVERY_MS`
/// (for the tests of a running server: they cannot wait minutes). Debug
/// builds only, as `DELAYER_TEST_PANIC`.
#[cfg(not(debug_assertions))]
fn check_every() -> Duration {
    CHECK_EVERY
}

#[cfg(debug_assertions)]
fn check_every() -> Duration {
    static EVERY: std::sync::LazyLock<Duration> = std::sync::LazyLock::new(|| {
        let ms = std::env::var("DELAYER_TEST_LOOK_EVERY_MS").ok().and_then(|v| v.parse::<u64>().ok());
        ms.map_or(CHECK_EVERY, Duration::from_millis)
    });
    *EVERY
}

/// How often the warning is repeated while jobs keep waiting there.
const WARN_EVERY: Duration = Duration::from_secs(600);
/// Index entries a classic server looks at (a bounded look, not a census).
const TOPICS_LOOKED_AT: isize = 20;

/// What waits where this server (or command) does not look.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Elsewhere {
    /// Jobs scheduled or reserved in the other layout under our prefix (a
    /// lower bound when that is the per-topic layout).
    pub other_layout: u64,
    /// Overdue jobs under other prefixes.
    pub strays: Vec<Stray>,
}

/// Looks: the other layout under `prefix`, and other prefixes as far as
/// `finder` gets within `budget`.
pub fn look(
    conn: &mut Conn,
    layout: Layout,
    prefix: &str,
    finder: &mut Finder,
    budget: Budget,
) -> redis::RedisResult<Elsewhere> {
    let other_layout = waiting(conn, layout, prefix)?;
    // A Redis before 6.0 has no SCAN TYPE: the known prefixes are still read.
    let _ = finder.scan(conn, budget);
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(conn)?;
    let strays = finder.strays(conn, secs as f64 + micros as f64 / 1e6)?;
    Ok(Elsewhere { other_layout, strays })
}

/// A layout's name in delayer.conf.
fn name(layout: Layout) -> &'static str {
    match layout {
        Layout::Classic => "classic",
        Layout::Topic => "topic",
    }
}

fn other(layout: Layout) -> Layout {
    match layout {
        Layout::Classic => Layout::Topic,
        Layout::Topic => Layout::Classic,
    }
}

impl Elsewhere {
    /// One sentence per place where jobs wait, for the log and for
    /// `delayer stats`, with the place: (prefix, layout). `layout` and
    /// `prefix`: what the reader (a server, a command's configuration) uses.
    fn notes(&self, layout: Layout, prefix: &str) -> Vec<((String, &'static str), String)> {
        let (here, there) = (name(layout), name(other(layout)));
        let mut out = Vec::new();
        if self.other_layout > 0 {
            let note = format!(
                "{} job(s) wait in the {there} key layout under prefix {prefix:?}, which this configuration \
                 (layout = {here}) never moves: a client or server there uses layout = {there}. Give every client \
                 and server the same layout, or move the jobs with `delayer migrate --to {here}` (README, \"Key \
                 layouts\")",
                self.other_layout
            );
            out.push(((prefix.to_string(), there), note));
        }
        for s in &self.strays {
            let note = format!(
                "{} job(s) under key prefix {:?} ({} layout) are overdue by more than {} s: no server moves them, \
                 and this configuration has key_prefix {prefix:?}. Give the clients and servers of those jobs the \
                 same key_prefix, or run a server with key_prefix = {:?}",
                s.jobs,
                s.prefix,
                name(s.layout),
                crate::other_prefix::OVERDUE.as_secs(),
                s.prefix
            );
            out.push(((s.prefix.clone(), name(s.layout)), note));
        }
        out
    }

    /// `Elsewhere::notes`'s sentences.
    pub fn warnings(&self, layout: Layout, prefix: &str) -> Vec<String> {
        self.notes(layout, prefix).into_iter().map(|(_, note)| note).collect()
    }

    /// For `delayer stats --json`: `[{prefix, layout, jobs, overdue}]`.
    pub fn json(&self, layout: Layout, prefix: &str) -> serde_json::Value {
        let mut items: Vec<_> = self
            .strays
            .iter()
            .map(|s| json!({"prefix": s.prefix, "layout": name(s.layout), "jobs": s.jobs, "overdue": true}))
            .collect();
        if self.other_layout > 0 {
            items.insert(
                0,
                json!({"prefix": prefix, "layout": name(other(layout)), "jobs": self.other_layout, "overdue": false}),
            );
        }
        json!(items)
    }
}

/// Watches the layout this server does not run.
pub struct OtherLayout {
    /// The layout this server runs.
    layout: Layout,
    prefix: String,
    state: Mutex<State>,
}

/// `delayer stats`'s lines on what waits elsewhere: nothing when nothing
/// does, and whether all of the keyspace was searched for other prefixes.
pub fn text(found: &Elsewhere, layout: Layout, prefix: &str, searched_all: bool) -> String {
    let mut out: String = found.warnings(layout, prefix).iter().map(|w| format!("WARNING: {w}\n")).collect();
    if !searched_all {
        out.push_str("(other key prefixes: only part of the keyspace was searched, within a second)\n");
    }
    out
}

struct State {
    checked: Option<Instant>,
    warned: Option<Instant>,
    /// Where jobs waited at the last look.
    places: Vec<(String, &'static str)>,
    finder: Finder,
}

impl OtherLayout {
    pub fn new(layout: Layout, prefix: &str) -> OtherLayout {
        let state = State { checked: None, warned: None, places: Vec::new(), finder: Finder::new(prefix) };
        OtherLayout { layout, prefix: prefix.to_string(), state: Mutex::new(state) }
    }

    /// Looks, when a minute has passed, and warns when where jobs wait
    /// elsewhere changed, or ten minutes after the last warning while they
    /// still do. A failed look is left to the next one: the tick's own
    /// calls report an unreachable Redis.
    pub fn check(&self, conn: &mut Conn) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.checked.is_some_and(|at| at.elapsed() < check_every()) {
            return;
        }
        state.checked = Some(Instant::now());
        let Ok(found) = look(conn, self.layout, &self.prefix, &mut state.finder, Budget::SERVER) else { return };
        let notes = found.notes(self.layout, &self.prefix);
        let places: Vec<_> = notes.iter().map(|(place, _)| place.clone()).collect();
        if places.is_empty() {
            state.places = places;
            state.warned = None;
            return;
        }
        // A new place is said at once; all of them again every WARN_EVERY.
        let remind = state.warned.is_none_or(|at| at.elapsed() >= WARN_EVERY);
        for (place, note) in &notes {
            if remind || !state.places.contains(place) {
                warn!("{note}");
            }
        }
        if remind {
            state.warned = Some(Instant::now());
        }
        state.places = places;
    }
}

/// Jobs scheduled or reserved in the layout other than `layout` under
/// `prefix` (a lower bound for a classic reader).
/// Pages of SCAN walked for per-topic pools when the index is empty.
const SCAN_PAGES: usize = 10;

/// Topics whose per-topic pool exists, up to [`TOPICS_LOOKED_AT`], from at
/// most [`SCAN_PAGES`] pages of `SCAN MATCH <pool pattern>`.
fn pool_topics(conn: &mut Conn, keys: &TopicKeys) -> redis::RedisResult<Vec<String>> {
    let (mut cursor, mut topics) = (0u64, Vec::new());
    for _ in 0..SCAN_PAGES {
        let (next, found): (u64, Vec<String>) =
            redis::cmd("SCAN").arg(cursor).arg("MATCH").arg(keys.pool_pattern()).arg("COUNT").arg(1000).query(conn)?;
        topics.extend(found.iter().filter_map(|k| keys.topic_of_pool(k)).map(str::to_string));
        cursor = next;
        if cursor == 0 || topics.len() >= TOPICS_LOOKED_AT as usize {
            break;
        }
    }
    topics.truncate(TOPICS_LOOKED_AT as usize);
    Ok(topics)
}

fn waiting(conn: &mut Conn, layout: Layout, prefix: &str) -> redis::RedisResult<u64> {
    match layout {
        Layout::Topic => redis::cmd("ZCARD").arg(Keys::new(prefix).job_pool()).query(conn),
        Layout::Classic => {
            let keys = TopicKeys::new(prefix);
            let mut topics: Vec<String> =
                redis::cmd("ZRANGE").arg(keys.due()).arg(0).arg(TOPICS_LOOKED_AT - 1).query(conn)?;
            if topics.is_empty() {
                // No per-topic server keeps the index (clients write none
                // since the scripts announce): look for the pools themselves,
                // a bounded walk (a classic deployment is never a cluster).
                topics = pool_topics(conn, &keys)?;
            }
            let topics: Vec<&String> = topics.iter().filter(|t| !t.contains(['{', '}'])).collect();
            if topics.is_empty() {
                return Ok(0);
            }
            let mut counts = Batch::new();
            for t in topics {
                counts.add(redis::Cmd::zcard(keys.pool(t))).add(redis::Cmd::zcard(keys.reserved(t)));
            }
            let counts: Vec<u64> = counts.query(conn)?;
            Ok(counts.iter().sum())
        }
    }
}
