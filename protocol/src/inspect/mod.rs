//! Seeing every job, without I/O: the calls of the Rust SDK's inspection
//! (`delayer::inspect`, re-exported there) and the records they read: where
//! one job is ([`JobInfo`]), pages of a topic's scheduled, ready and
//! reserved jobs ([`Page`], [`Listed`]), per-topic numbers ([`Stats`]) and a
//! metrics exporter's per-topic activity ([`Activity`]).
//!
//! Here, not in the client, because they are the wire contract of
//! `lookup.lua`, `list.lua` and `stats.lua` (see their headers and
//! docs/PROTOCOL.md, "Inspecting jobs") and of the few commands a listing
//! sends, and the server's admin commands, HTTP API and metrics read these
//! very records. Requests are built and replies read in `calls` and
//! `stats` and `activity`, as [`crate::op::Op`]s; the clients send them.

mod activity;
mod calls;
mod stats;

/// The largest `cursor` (or `dead_letters`' `start`) a listing takes:
/// 2^53 - 1, the HTTP API's and the CLI's bound too.
pub use crate::validate::MAX_POSITION;
pub use activity::activity;
pub use activity::{Activity, Head};
pub use calls::*;
pub use stats::*;

use crate::op::Error;
pub use crate::replies::RateLimit;
use crate::replies::Result;
use crate::validate::Invalid;
use std::time::SystemTime;

/// The most entries one listing page holds.
pub const MAX_PAGE: usize = 1000;
/// Entries list.lua examines per call: bounds each call's time in Redis.
const EXAMINE_PER_CALL: usize = 1000;
/// Calls one page may take before it is handed back short (with a cursor to
/// go on from), so a page of a rare topic in a huge pool stays bounded.
const CALLS_PER_PAGE: usize = 10;
/// Per-topic reserved counts are read while the reserved set is no larger.
pub const RESERVED_CAP: usize = 1000;

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobState {
    /// Waiting in the pool for its due time.
    Scheduled,
    /// Due, in its topic's ready queue.
    Ready,
    /// Held by a worker until its deadline.
    Reserved,
    /// In its topic's dead-letter list.
    Dead,
    /// Its data has no topic, or is not a hash: an operator should look.
    Malformed,
    /// No such job (never pushed, done, removed or expired), or a job of
    /// another topic.
    Unknown,
}

impl JobState {
    /// The protocol's name: `scheduled`, `ready`, `reserved`, `dead`,
    /// `malformed` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Scheduled => "scheduled",
            JobState::Ready => "ready",
            JobState::Reserved => "reserved",
            JobState::Dead => "dead",
            JobState::Malformed => "malformed",
            JobState::Unknown => "unknown",
        }
    }

    fn parse(s: &str) -> Result<JobState> {
        Ok(match s {
            "scheduled" => JobState::Scheduled,
            "ready" => JobState::Ready,
            "reserved" => JobState::Reserved,
            "dead" => JobState::Dead,
            "malformed" => JobState::Malformed,
            "unknown" => JobState::Unknown,
            other => return Err(Error::BadReply(format!("lookup: unknown state {other:?}"))),
        })
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What `delayer::Delayer::job` found. Fields that do not apply to the state (or
/// are not known) are `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct JobInfo {
    /// The id looked up.
    pub id: String,
    /// Where the job is.
    pub state: JobState,
    /// Its topic.
    pub topic: Option<String>,
    /// Its body's length in bytes.
    pub body_size: Option<u64>,
    /// Reservations so far.
    pub attempts: Option<u64>,
    /// Reservations allowed (0: no limit), when set.
    pub max_attempts: Option<u64>,
    /// Scheduled: when it is due.
    pub due: Option<SystemTime>,
    /// Reserved: the reservation's deadline.
    pub deadline: Option<SystemTime>,
    /// Dead: when it died.
    pub dead_at: Option<SystemTime>,
    /// Dead: `buried` or `max_attempts`.
    pub dead_reason: Option<String>,
    /// The last failed attempt's error, when a worker gave one (or "ttr
    /// expired").
    pub last_error: Option<String>,
    /// The id's exact bytes when they are not UTF-8 (then `id` is a lossy
    /// rendering).
    pub raw_id: Option<Vec<u8>>,
    /// The W3C trace context it was pushed with, if any (`delayer::trace`).
    pub traceparent: Option<String>,
    /// What flow control does to its topic (PROTOCOL.md, "Flow control").
    pub flow: TopicFlow,
}

/// What flow control does to a topic, as a job's lookup says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TopicFlow {
    /// Nothing: its jobs become ready when due and are handed out.
    #[default]
    Running,
    /// Paused: a scheduled job is not made ready when due, a ready one is
    /// not handed out (a pause wins over a limit).
    Paused,
    /// Rate-limited: a due job waits for its turn before it becomes ready;
    /// a ready one is handed out as usual.
    Limited,
}

impl TopicFlow {
    /// lookup.lua's word: `""`, `"paused"` or `"limited"`.
    pub fn as_str(self) -> &'static str {
        match self {
            TopicFlow::Running => "",
            TopicFlow::Paused => "paused",
            TopicFlow::Limited => "limited",
        }
    }

    /// lookup.lua's word read; one it does not say reads as running (the
    /// job's own state stands either way).
    fn parse(s: &str) -> TopicFlow {
        match s {
            "paused" => TopicFlow::Paused,
            "limited" => TopicFlow::Limited,
            _ => TopicFlow::Running,
        }
    }
}

/// A job's body as `delayer::Delayer::job_body` read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// No such job on this topic (or its data is not a hash).
    Absent,
    /// Longer than the limit asked for: its length in bytes.
    TooLarge(u64),
    /// The body.
    Bytes(Vec<u8>),
}

/// A scheduled or reserved job in a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    /// The job's id.
    pub id: String,
    /// Scheduled: its due time; reserved: its deadline.
    pub time: SystemTime,
    /// The id's exact bytes when they are not UTF-8 (a Delayer 1.x or PHP
    /// client writes any bytes; then `id` is a lossy rendering): look it
    /// up, remove it or end it by these.
    pub raw_id: Option<Vec<u8>>,
}

impl Listed {
    /// The id as Redis holds it.
    pub fn id_bytes(&self) -> &[u8] {
        self.raw_id.as_deref().unwrap_or(self.id.as_bytes())
    }
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    /// The entries, in listing order.
    pub items: Vec<T>,
    /// The cursor of the next page, `None` at the end. A page may be
    /// shorter than asked (even empty) while `next` is `Some`: keep going.
    pub next: Option<u64>,
}

/// One topic's numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicStats {
    /// The topic.
    pub topic: String,
    /// Jobs waiting in the pool (exact for Delayer 2 writers; see
    /// docs/PROTOCOL.md on 1.x writers).
    pub scheduled: u64,
    /// Ids in its ready queue.
    pub ready: u64,
    /// Jobs reserved by workers; `None` when the reserved set was too large
    /// to read ([`RESERVED_CAP`]).
    pub reserved: Option<u64>,
    /// Dead letters.
    pub dead: u64,
    /// The topic's exact bytes when they are not UTF-8 (then `topic` is a
    /// lossy rendering).
    pub raw_topic: Option<Vec<u8>>,
    /// The topic is paused (nothing of it handed out or made ready).
    pub paused: bool,
    /// Since when, when known (a flow hash of the wrong type, or a `paused`
    /// that is no time, pauses the topic without saying since when).
    pub paused_since: Option<SystemTime>,
    /// Due jobs a pause or rate limit holds back (counted in `scheduled`
    /// too).
    pub held: u64,
    /// Its rate limit; `None` when it has none.
    pub rate_limit: Option<RateLimit>,
}

/// Per-topic numbers, and totals that count every job.
#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    /// Jobs in the pool, whoever pushed them.
    pub scheduled_total: u64,
    /// Jobs reserved.
    pub reserved_total: u64,
    /// Each known topic, sorted by name.
    pub topics: Vec<TopicStats>,
}

/// A listing's ids alone.
pub fn ids(page: Page<Listed>) -> Page<String> {
    Page { items: page.items.into_iter().map(|l| l.id).collect(), next: page.next }
}

/// A page of ids as text (lossy where an id is not UTF-8).
pub fn lossy(page: Page<Vec<u8>>) -> Page<String> {
    let items = page.items.into_iter().map(|id| String::from_utf8_lossy(&id).into_owned()).collect();
    Page { items, next: page.next }
}
