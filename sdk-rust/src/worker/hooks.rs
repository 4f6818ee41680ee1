//! What a worker tells its owner: one [`Event`] per thing that happened,
//! given to a [`Hooks`] (a closure will do), so logging and metrics plug in
//! without the worker choosing a logging crate.

use super::Delivery;
use crate::Error;
use std::time::Duration;

/// Something a worker did or met. Borrowed: copy what you keep.
#[derive(Debug)]
#[non_exhaustive]
pub enum Event<'a> {
    /// A handler starts on a job.
    Started {
        /// The job.
        delivery: &'a Delivery,
    },
    /// A handler returned `Ok`: the job is acked (at least once) or done.
    Succeeded {
        /// The job.
        delivery: &'a Delivery,
        /// How long the handler ran.
        elapsed: Duration,
    },
    /// A handler returned an error or panicked: the job is released with
    /// its backoff and `error` as its last error (a dead letter after its
    /// last attempt).
    Failed {
        /// The job.
        delivery: &'a Delivery,
        /// The error's text (`Display`).
        error: &'a str,
        /// How long the handler ran.
        elapsed: Duration,
    },
    /// The job's ack was done: it is deleted, and never runs again.
    Acked {
        /// The job.
        delivery: &'a Delivery,
    },
    /// An ack, release or touch found the reservation no longer held: it
    /// ran past its ttr and the server handed the job out again.
    NotHeld {
        /// The job.
        delivery: &'a Delivery,
    },
    /// A long-running handler's reservation was extended by another ttr.
    Touched {
        /// The job.
        delivery: &'a Delivery,
    },
    /// The grace period after a stop ran out with this job's handler still
    /// running: its reservation was released, to be run again now.
    ReleasedAtStop {
        /// The job.
        delivery: &'a Delivery,
    },
    /// Redis could not be reached, went away, or cannot serve yet (loading
    /// its data after a restart, a read-only replica during a failover): the
    /// worker tries again in `retry_in` (jobs keep running meanwhile; their
    /// acks wait).
    ConnectionLost {
        /// What failed.
        error: &'a Error,
        /// When the next try comes.
        retry_in: Duration,
    },
    /// Redis answers again after a [`Event::ConnectionLost`].
    Reconnected,
    /// Redis's `maxmemory-policy` is not `noeviction`: at its memory limit
    /// it deletes keys, jobs with them, undelivered. Read at start and
    /// after every reconnect; log `warning`, which names the fix.
    UnsafeEviction {
        /// The policy, e.g. `allkeys-lru`.
        policy: &'a str,
        /// What it means and how to fix it, one line.
        warning: &'a str,
    },
    /// Redis refused a call with an error (not a lost connection: a key of
    /// the wrong type, a script error); the worker carries on, a fetch or
    /// wait tried again after the backoff.
    Error {
        /// What Redis said.
        error: &'a Error,
    },
    /// The worker was told to stop: it takes no more jobs.
    Stopping,
    /// The worker has stopped.
    Stopped,
}

impl Event<'_> {
    /// The event's name, as the other SDKs' hooks call it (PROTOCOL.md, "The
    /// Worker runtime").
    pub fn name(&self) -> &'static str {
        match self {
            Event::Started { .. } => "started",
            Event::Succeeded { .. } => "succeeded",
            Event::Failed { .. } => "failed",
            Event::Acked { .. } => "acked",
            Event::NotHeld { .. } => "not_held",
            Event::Touched { .. } => "touched",
            Event::ReleasedAtStop { .. } => "released_at_stop",
            Event::ConnectionLost { .. } => "connection_lost",
            Event::Reconnected => "reconnected",
            Event::UnsafeEviction { .. } => "unsafe_eviction",
            Event::Error { .. } => "error",
            Event::Stopping => "stopping",
            Event::Stopped => "stopped",
        }
    }
}

/// Receives a worker's events; it runs on the worker's own loop, so keep it
/// quick (log a line, bump a counter). A hook that panics is reported on
/// stderr and otherwise ignored.
pub trait Hooks: Send + Sync + 'static {
    /// Called once per event.
    fn event(&self, event: &Event<'_>);
}

impl<F: Fn(&Event<'_>) + Send + Sync + 'static> Hooks for F {
    fn event(&self, event: &Event<'_>) {
        self(event)
    }
}

/// The hooks of a worker given none.
pub(crate) struct Silent;

impl Hooks for Silent {
    fn event(&self, _: &Event<'_>) {}
}
