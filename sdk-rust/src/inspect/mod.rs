//! Seeing every job: where one job is ([`Delayer::job`]), pages of a
//! topic's scheduled, ready and reserved jobs, and per-topic numbers
//! ([`Delayer::stats`]).
//!
//! It exists so that "was order 42's auto-close scheduled, and when does it
//! fire?" needs no redis-cli and no knowledge of the keys. Everything here
//! only reads: `lookup.lua`, `list.lua` and `stats.lua` (see their headers
//! and docs/PROTOCOL.md, "Inspecting jobs"), and one `LRANGE` for the ready
//! listing. Requests are built and replies read without I/O in
//! `delayer_protocol::inspect`, which these types are re-exported from; the
//! blocking and async clients below only send them.

pub use delayer_protocol::inspect::{
    Activity, Body, Head, JobInfo, JobState, Listed, Page, RateLimit, Stats, TopicFlow, TopicStats, MAX_PAGE,
    RESERVED_CAP,
};
/// The largest `cursor` (or `dead_letters`' `start`) a listing takes:
/// 2^53 - 1, the HTTP API's and the CLI's bound too.
pub use delayer_protocol::validate::MAX_POSITION;

use crate::error::Result;
use crate::Delayer;
use delayer_protocol::inspect::{activity, body, dead_len, ids, list_ready, lookup, lossy, stats, ListScan, Walked};

twins! {
    /// Where job `id` of `topic` is, and what it carries: scheduled (with its
    /// due time), ready, reserved (with its deadline), dead (with why and
    /// when), malformed or unknown. A job of another topic is unknown. Only
    /// reads.
    #[aio]
    /// As [`crate::Delayer::job`].
    pub fn job(&self, topic: &str, id: &str) -> Result<JobInfo> =
        lookup(self.keys(), topic, id.as_bytes());

    /// [`Delayer::job`] with the id given as bytes, any bytes (an id that
    /// is not UTF-8, as a listing's `raw_id` shows it).
    #[aio]
    /// As [`crate::Delayer::job_raw`].
    pub fn job_raw(&self, topic: &str, id: &[u8]) -> Result<JobInfo> =
        lookup(self.keys(), topic, id);

    /// A page of `topic`'s scheduled jobs, earliest due first, from `cursor`
    /// (0 to start; then the page's `next`; at most
    /// [`MAX_POSITION`]), at most `count` (1 to 1000).
    #[aio]
    /// As [`crate::Delayer::list_scheduled`].
    pub fn list_scheduled(&self, topic: &str, cursor: u64, count: usize) -> Result<Page<Listed>> =
        ListScan::new(self.keys(), Walked::Pool, topic, cursor, count).map(ListScan::op);

    /// A page of `topic`'s reserved jobs, earliest deadline first (paged as
    /// [`Delayer::list_scheduled`]).
    #[aio]
    /// As [`crate::Delayer::list_reserved`].
    pub fn list_reserved(&self, topic: &str, cursor: u64, count: usize) -> Result<Page<String>> =
        ListScan::new(self.keys(), Walked::Reserved, topic, cursor, count)
            .map(|scan| scan.op().map(|page| Ok(ids(page))));

    /// A page of `topic`'s reserved jobs with their deadlines.
    #[aio]
    /// As [`crate::Delayer::list_reserved_with_deadlines`].
    pub fn list_reserved_with_deadlines(&self, topic: &str, cursor: u64, count: usize) -> Result<Page<Listed>> =
        ListScan::new(self.keys(), Walked::Reserved, topic, cursor, count).map(ListScan::op);

    /// A page of the ids in `topic`'s ready queue, next out first.
    #[aio]
    /// As [`crate::Delayer::list_ready`].
    pub fn list_ready(&self, topic: &str, cursor: u64, count: usize) -> Result<Page<String>> =
        list_ready(self.keys(), topic, cursor, count).map(|op| op.map(|page| Ok(lossy(page))));

    /// [`Delayer::list_ready`] with each id as Redis holds it, any bytes.
    #[aio]
    /// As [`crate::Delayer::list_ready_raw`].
    pub fn list_ready_raw(&self, topic: &str, cursor: u64, count: usize) -> Result<Page<Vec<u8>>> =
        list_ready(self.keys(), topic, cursor, count);

    /// The body of job `id` (any bytes) of `topic`, when it is at most
    /// `limit` bytes (a body may be large: say how large instead). Only reads.
    #[aio]
    /// As [`crate::Delayer::job_body`].
    pub fn job_body(&self, topic: &str, id: &[u8], limit: usize) -> Result<Body> =
        body(self.keys(), topic, id, limit);

    /// How many entries `topic`'s dead-letter list holds (stale ones too:
    /// a listing skips those), to page through it to the end.
    #[aio]
    /// As [`crate::Delayer::dead_len`].
    pub fn dead_len(&self, topic: &str) -> Result<u64> =
        dead_len(self.keys(), topic);

    /// Scheduled, ready, reserved and dead jobs per topic. Cheap on any
    /// backlog: no scan of the pool.
    #[aio]
    /// As [`crate::Delayer::stats`].
    pub fn stats(&self) -> Result<Stats> =
        Ok(stats(self.keys()));
}

impl Delayer {
    /// The reservations ended per topic and outcome, and the oldest ready
    /// job of each of `topics` (as [`Delayer::stats`] names them). Only reads.
    pub fn activity(&self, topics: &[String]) -> Result<Activity> {
        self.run(Ok(activity(self.keys(), topics)))
    }
}
