//! What goes in and comes out: a [`Job`] to push (with its optional
//! settings) and the [`Message`] a consumer gets, shared by both clients.

use crate::reliable::Backoff;
use crate::validate::DEFAULT_READY_MAX_LIFETIME;
use std::time::Duration;

/// A job handed to a consumer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The id given at push (when it is not UTF-8: a lossy rendering, see
    /// [`Message::raw_id`]).
    pub id: String,
    /// The topic it was pushed to (as `id`).
    pub topic: String,
    /// The body given at push (empty if none).
    pub body: Vec<u8>,
    /// The id's exact bytes when they are not UTF-8 (a Delayer 1.x or PHP
    /// client writes any bytes); `None` when `id` is exact.
    pub raw_id: Option<Vec<u8>>,
    /// The topic's exact bytes when they are not UTF-8.
    pub raw_topic: Option<Vec<u8>>,
    /// The W3C trace context the producer pushed with ([`Job::traceparent`]);
    /// `None` when none was given (or the job's hash holds a malformed one:
    /// see [`crate::trace`]).
    pub traceparent: Option<String>,
}

// The accessors a popped [`Message`] and a [`crate::Reserved`] job share,
// on their `body`, `id`/`raw_id` and `topic`/`raw_topic` fields.
macro_rules! bytes_accessors {
    () => {
        /// The body as UTF-8 text, if it is.
        pub fn body_str(&self) -> Option<&str> {
            std::str::from_utf8(&self.body).ok()
        }

        /// The id as Redis holds it.
        pub fn id_bytes(&self) -> &[u8] {
            self.raw_id.as_deref().unwrap_or(self.id.as_bytes())
        }

        /// The topic as Redis holds it.
        pub fn topic_bytes(&self) -> &[u8] {
            self.raw_topic.as_deref().unwrap_or(self.topic.as_bytes())
        }
    };
}
pub(crate) use bytes_accessors;

impl Message {
    bytes_accessors!();
}

/// A job to push: the common case is `Job::new(topic, id, delay)`, then
/// optionally a body and a ready_max_lifetime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// The ready queue the job goes to when due.
    pub topic: String,
    /// The caller's id for the job: one job per id, *across all topics*
    /// (the Delayer 1.x layout): a push replaces the job holding the id,
    /// whatever its topic, unless [`Job::if_absent`] is set.
    pub id: String,
    /// How long from now (Redis's clock) until it is due.
    pub delay: Duration,
    /// Opaque bytes for the consumer.
    pub body: Vec<u8>,
    /// How long the job's data is kept once due, if nobody pops it.
    pub ready_max_lifetime: Duration,
    /// For reserve: reservations allowed before dead letters (0: no limit).
    /// `None` leaves it to reserve's default, 25.
    pub max_attempts: Option<u32>,
    /// For reserve: the wait before a retry. `None` leaves it to reserve's
    /// default, exponential from 1 s to 1 h.
    pub backoff: Option<Backoff>,
    /// Write the job only if no job holds its id: otherwise write nothing
    /// and fail with [`Error::IdTaken`](crate::Error::IdTaken). `false`
    /// (the default): replace.
    pub if_absent: bool,
    /// The producer's W3C trace context, `00-<trace id>-<span id>-<flags>`:
    /// kept with the job and handed to its consumer ([`crate::trace`]).
    /// Checked at push by [`crate::validate::traceparent`].
    pub traceparent: Option<String>,
}

impl Job {
    /// A job with an empty body and the default ready_max_lifetime (7 days).
    pub fn new(topic: impl Into<String>, id: impl Into<String>, delay: Duration) -> Job {
        Job {
            topic: topic.into(),
            id: id.into(),
            delay,
            body: Vec::new(),
            ready_max_lifetime: DEFAULT_READY_MAX_LIFETIME,
            max_attempts: None,
            backoff: None,
            if_absent: false,
            traceparent: None,
        }
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Job {
        self.body = body.into();
        self
    }

    /// Sets how long the job's data is kept once due (whole seconds).
    pub fn ready_max_lifetime(mut self, lifetime: Duration) -> Job {
        self.ready_max_lifetime = lifetime;
        self
    }

    /// Sets how many reservations the job gets before it goes to dead
    /// letters (0: no limit). Classic pop ignores it.
    pub fn max_attempts(mut self, n: u32) -> Job {
        self.max_attempts = Some(n);
        self
    }

    /// Sets the wait before each retry. Classic pop ignores it.
    pub fn backoff(mut self, backoff: Backoff) -> Job {
        self.backoff = Some(backoff);
        self
    }

    /// Pushes only if no job holds the id (on any topic): when one does,
    /// nothing is written and the push fails with
    /// [`Error::IdTaken`](crate::Error::IdTaken), naming that job's topic
    /// and due time. Without it a push replaces the job holding the id, as
    /// Delayer 1.x does.
    pub fn if_absent(mut self) -> Job {
        self.if_absent = true;
        self
    }

    /// Carries the producer's W3C trace context (`traceparent` header form,
    /// `00-<32 hex>-<16 hex>-<2 hex>`) to the consumer: pop, reserve and
    /// the workers hand it back. A malformed one fails the push with
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument).
    pub fn traceparent(mut self, traceparent: impl Into<String>) -> Job {
        self.traceparent = Some(traceparent.into());
        self
    }
}
