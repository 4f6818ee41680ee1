//! The types of the at-least-once mode (reserve / ack; docs/PROTOCOL.md,
//! "Reserve and ack"): what a worker gets, how it names what it holds, how a
//! job retries, and what a dead letter shows.
//!
//! Classic `pop` deletes a job as it hands it out; `reserve` hands out a
//! [`Reserved`] job that stays in Redis, invisible to other workers, until
//! the worker acks, releases or buries it, or its time-to-run passes and the
//! server hands it out again.

use std::time::{Duration, SystemTime};

/// A job handed out by `reserve`: it stays reserved for this worker until
/// `ack`, `release` or `bury`, or until [`Reserved::deadline`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reserved {
    /// The id given at push.
    pub id: String,
    /// The topic it was pushed to.
    pub topic: String,
    /// The body given at push (empty if none).
    pub body: Vec<u8>,
    /// How many times it has been reserved, this time included (1 on the
    /// first delivery).
    pub attempts: u32,
    /// Reservations allowed before it goes to dead letters; 0: no limit.
    pub max_attempts: u32,
    /// Names this reservation: ack, release and bury given this job act on
    /// it only, never on a later reservation of the same id.
    pub receipt: String,
    /// When the reservation ends by itself (Redis's clock): after it, the
    /// server counts a failed attempt and the job is delivered again.
    pub deadline: SystemTime,
    /// The id's exact bytes when they are not UTF-8 (then `id` is a lossy
    /// rendering); ack, touch, release and bury given this job use them.
    pub raw_id: Option<Vec<u8>>,
    /// The topic's exact bytes when they are not UTF-8.
    pub raw_topic: Option<Vec<u8>>,
    /// The W3C trace context the producer pushed with, as
    /// [`crate::Message::traceparent`].
    pub traceparent: Option<String>,
}

impl Reserved {
    crate::job::bytes_accessors!();

    /// Whether a failure now would send the job to dead letters.
    pub fn is_last_attempt(&self) -> bool {
        self.max_attempts > 0 && self.attempts >= self.max_attempts
    }
}

/// What `ack`, `release` and `bury` act on: a job id, with the receipt of the
/// reservation meant. Without a receipt they act on whichever reservation of
/// the id is current. Made from a [`Reserved`] (id and receipt) or an id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobRef<'a> {
    /// The job id.
    pub id: &'a str,
    /// The reservation's receipt, if known.
    pub receipt: Option<&'a str>,
    /// The job's topic: needed in the per-topic layout, where ids are per
    /// topic (a [`Reserved`] job carries its own).
    pub topic: Option<&'a str>,
    /// The id's exact bytes, used instead of `id` when given: an id that is
    /// not UTF-8 (a [`Reserved`] job carries its own; [`JobRef::raw`]).
    pub raw_id: Option<&'a [u8]>,
}

impl<'a> JobRef<'a> {
    /// The reservation `receipt` of job `id`.
    pub fn with_receipt(id: &'a str, receipt: &'a str) -> JobRef<'a> {
        JobRef { id, receipt: Some(receipt), topic: None, raw_id: None }
    }

    /// Job `id` given as bytes, any bytes (an id that is not UTF-8, as a
    /// listing or a dead letter shows it in `raw_id`).
    pub fn raw(id: &'a [u8]) -> JobRef<'a> {
        JobRef { id: "", receipt: None, topic: None, raw_id: Some(id) }
    }

    /// The same job, held under `receipt`.
    pub fn receipt(self, receipt: &'a str) -> JobRef<'a> {
        JobRef { receipt: Some(receipt), ..self }
    }

    /// The id as sent to Redis.
    pub fn id_bytes(&self) -> &'a [u8] {
        self.raw_id.unwrap_or(self.id.as_bytes())
    }

    /// The same job, of `topic` (the per-topic layout needs it).
    pub fn in_topic(self, topic: &'a str) -> JobRef<'a> {
        JobRef { topic: Some(topic), ..self }
    }
}

impl<'a> From<&'a Reserved> for JobRef<'a> {
    fn from(job: &'a Reserved) -> Self {
        JobRef { id: &job.id, receipt: Some(&job.receipt), topic: Some(&job.topic), raw_id: job.raw_id.as_deref() }
    }
}

impl<'a> From<&'a str> for JobRef<'a> {
    fn from(id: &'a str) -> Self {
        JobRef { id, receipt: None, topic: None, raw_id: None }
    }
}

impl<'a> From<&'a String> for JobRef<'a> {
    fn from(id: &'a String) -> Self {
        JobRef { id, receipt: None, topic: None, raw_id: None }
    }
}

/// How long a job waits before its next attempt, after a failed one
/// (a release without a delay, or a reservation that ran out).
/// Without one, a job retries exponentially from 1 s, up to 1 h.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backoff {
    /// Always the same wait.
    Fixed(Duration),
    /// `base`, doubled after each failure, never more than `max`.
    Exponential {
        /// The first wait.
        base: Duration,
        /// The longest wait.
        max: Duration,
    },
}

impl Backoff {
    /// Always `delay`.
    pub fn fixed(delay: Duration) -> Backoff {
        Backoff::Fixed(delay)
    }

    /// `base`, `2 * base`, `4 * base`, ... up to `max`.
    pub fn exponential(base: Duration, max: Duration) -> Backoff {
        Backoff::Exponential { base, max }
    }
}

/// A job on a topic's dead-letter list: buried, or out of attempts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// The job id.
    pub id: String,
    /// Its topic.
    pub topic: String,
    /// Its body.
    pub body: Vec<u8>,
    /// How many times it was reserved.
    pub attempts: u32,
    /// `"buried"` or `"max_attempts"`.
    pub reason: String,
    /// When it died (Redis's clock); the Unix epoch when the job's
    /// `dead_at` field holds no time (written by hand or damaged).
    pub dead_at: SystemTime,
    /// Why its last attempt failed, as the worker said (release or bury
    /// with an error) or "ttr expired"; `None` when no attempt gave one.
    pub last_error: Option<String>,
    /// The id's exact bytes when they are not UTF-8 (then `id` is a lossy
    /// rendering): re-queue or purge it by these.
    pub raw_id: Option<Vec<u8>>,
    /// The topic's exact bytes when they are not UTF-8.
    pub raw_topic: Option<Vec<u8>>,
}

impl DeadLetter {
    /// The id as Redis holds it.
    pub fn id_bytes(&self) -> &[u8] {
        self.raw_id.as_deref().unwrap_or(self.id.as_bytes())
    }
}
