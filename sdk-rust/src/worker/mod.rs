//! Workers that run themselves: register a handler per topic, and the
//! worker takes the jobs, runs the handlers (N at once), acks what succeeds,
//! releases what fails with the job's backoff and the error as its last
//! error, touches long-running jobs, rides out Redis restarts, and stops
//! gracefully. Every consumer used to write that loop by hand.
//!
//! Two kinds, one behaviour: [`Worker`] runs handlers on threads, with the
//! blocking [`crate::Delayer`]; [`aio::Worker`] (feature `aio`) runs them as
//! tokio tasks, with [`crate::aio::Delayer`]. All their decisions are shared
//! (`engine`); each does only its own I/O.
//!
//! At least once (the default): jobs are reserved for the worker's ttr, a
//! handler returning `Ok` acks its job, one returning `Err` (or panicking)
//! releases it to run again after its backoff, a dead letter after its last
//! attempt. A handler still running at half its ttr has its reservation
//! touched. Fetching is batched: one `reserve_many` call sends the acks of
//! the jobs just finished and takes jobs for every free slot. A worker with
//! nothing to do waits as `breserve` does (BLMOVE) for a job to be ready,
//! taking nothing until it fetches: a stop meanwhile leaves the job to other
//! workers. At most once ([`Worker::at_most_once`]): jobs are popped, and a
//! failure is only reported.

#[cfg(feature = "aio")]
pub mod aio;
mod blocking;
mod engine;
mod hooks;
mod stop;

pub use blocking::{Task, Worker};
pub use hooks::{Event, Hooks};
pub use stop::Stopper;

use crate::{Message, Reserved};

/// A job as a handler gets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The id given at push.
    pub id: String,
    /// Its topic.
    pub topic: String,
    /// The body given at push (empty if none).
    pub body: Vec<u8>,
    /// How many times it has been reserved, this time included; 0 at most
    /// once.
    pub attempts: u32,
    /// Reservations allowed before it goes to dead letters (0: no limit, or
    /// at most once).
    pub max_attempts: u32,
    /// The reservation's receipt; `None` at most once.
    pub receipt: Option<String>,
    /// The id's exact bytes when they are not UTF-8 (then `id` is a lossy
    /// rendering); the worker acks and releases by them.
    pub raw_id: Option<Vec<u8>>,
    /// The topic's exact bytes when they are not UTF-8.
    pub raw_topic: Option<Vec<u8>>,
    /// The W3C trace context the producer pushed with, as
    /// [`crate::Message::traceparent`]: the parent of the handler's span.
    pub traceparent: Option<String>,
}

impl Delivery {
    /// The body as UTF-8 text, if it is.
    pub fn body_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.body).ok()
    }

    /// Whether a failure now makes it a dead letter.
    pub fn is_last_attempt(&self) -> bool {
        self.max_attempts > 0 && self.attempts >= self.max_attempts
    }

    /// The id as Redis holds it.
    pub fn id_bytes(&self) -> &[u8] {
        self.raw_id.as_deref().unwrap_or(self.id.as_bytes())
    }

    fn job_ref(&self) -> crate::JobRef<'_> {
        crate::JobRef {
            id: &self.id,
            receipt: self.receipt.as_deref(),
            topic: Some(&self.topic),
            raw_id: self.raw_id.as_deref(),
        }
    }
}

impl From<Reserved> for Delivery {
    fn from(r: Reserved) -> Self {
        Delivery {
            id: r.id,
            topic: r.topic,
            body: r.body,
            attempts: r.attempts,
            max_attempts: r.max_attempts,
            receipt: Some(r.receipt),
            raw_id: r.raw_id,
            raw_topic: r.raw_topic,
            traceparent: r.traceparent,
        }
    }
}

impl From<Message> for Delivery {
    fn from(m: Message) -> Self {
        Delivery {
            id: m.id,
            topic: m.topic,
            body: m.body,
            attempts: 0,
            max_attempts: 0,
            receipt: None,
            raw_id: m.raw_id,
            raw_topic: m.raw_topic,
            traceparent: m.traceparent,
        }
    }
}

/// The `Worker` both kinds are, written once: its client, settings, handlers
/// and stopper (`struct Worker(Client, Handler)`), its `Debug` (`as` the
/// name it shows) and `new`.
macro_rules! worker_type {
    (
        $(#[$attr:meta])*
        struct Worker($client:ty, $handler:ty) as $name:literal;
    ) => {
        $(#[$attr])*
        pub struct Worker {
            client: $client,
            settings: $crate::worker::engine::Settings,
            handlers: std::collections::HashMap<String, $handler>,
            stopper: $crate::worker::Stopper,
        }

        impl std::fmt::Debug for Worker {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct($name).field("topics", &self.handlers.keys()).finish_non_exhaustive()
            }
        }

        impl Worker {
            /// A worker taking jobs with `delayer`; add handlers, then [`Worker::run`].
            pub fn new(delayer: $client) -> Worker {
                Worker {
                    client: delayer,
                    settings: $crate::worker::engine::Settings::new(),
                    handlers: std::collections::HashMap::new(),
                    stopper: $crate::worker::Stopper::new(),
                }
            }
        }
    };
}
use worker_type;

/// The builder methods both workers share, on their `settings` field.
macro_rules! settings_builder {
    () => {
        /// How many handlers run at once, all topics together (default 10).
        pub fn concurrency(mut self, n: usize) -> Self {
            self.settings.concurrency = n;
            self
        }

        /// How long a job is reserved for (default 60 s); a handler running
        /// past half of it has its reservation touched for as long again.
        pub fn ttr(mut self, ttr: std::time::Duration) -> Self {
            self.settings.ttr = ttr;
            self
        }

        /// How long, after a stop, running handlers may take to finish
        /// (default 25 s: inside Kubernetes' 30 s before SIGKILL); then their
        /// reservations are released.
        pub fn grace(mut self, grace: std::time::Duration) -> Self {
            self.settings.grace = grace;
            self
        }

        /// Pops jobs instead of reserving them: each runs at most once, and a
        /// failure is only reported (no retry, no dead letter).
        pub fn at_most_once(mut self) -> Self {
            self.settings.mode = $crate::worker::engine::Mode::AtMostOnce;
            self
        }

        /// Receives the worker's [`Event`](crate::worker::Event)s (a closure `|e: &Event| ...`
        /// will do): logging, metrics.
        pub fn hooks(mut self, hooks: impl $crate::worker::Hooks) -> Self {
            self.settings.hooks = std::sync::Arc::new(hooks);
            self
        }

        /// Its stop handle: [`Stopper::stop`](crate::worker::Stopper::stop) stops it.
        pub fn stopper(&self) -> $crate::worker::Stopper {
            self.stopper.clone()
        }

        /// Stops with `stopper` (one stopper can stop many workers).
        pub fn with_stopper(mut self, stopper: $crate::worker::Stopper) -> Self {
            self.stopper = stopper;
            self
        }
    };
}
use settings_builder;

/// The `Task` both workers hand their handlers: the [`Delivery`] (by
/// `Deref`) and `extend`, on the worker's client (`struct Task(Client)`),
/// written once; the async worker's says `async` and `await`, and its
/// client's calls are awaited.
macro_rules! task_type {
    (
        $(#[$attr:meta])*
        struct Task($client:ty);
        $(#[$extend_doc:meta])*
        fn extend $($async:ident $await:tt)?;
    ) => {
        $(#[$attr])*
        pub struct Task {
            delivery: std::sync::Arc<$crate::worker::Delivery>,
            lease: std::sync::Arc<$crate::worker::engine::Lease>,
            client: $client,
        }

        impl std::ops::Deref for Task {
            type Target = $crate::worker::Delivery;
            fn deref(&self) -> &$crate::worker::Delivery {
                &self.delivery
            }
        }

        impl std::fmt::Debug for Task {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_tuple("Task").field(&self.delivery).finish()
            }
        }

        impl Task {
            /// The job.
            pub fn delivery(&self) -> &$crate::worker::Delivery {
                &self.delivery
            }

            $(#[$extend_doc])*
            pub $($async)? fn extend(&self, ttr: std::time::Duration) -> $crate::Result<bool> {
                if self.delivery.receipt.is_none() {
                    return Ok(false);
                }
                let now = std::time::Instant::now();
                let held = self.client.touch(self.delivery.job_ref(), ttr)$(.$await)??.is_some();
                if held {
                    self.lease.extended(ttr, now);
                }
                Ok(held)
            }
        }
    };
}
use task_type;

/// The answer to both workers' [`engine::Fetch`], as a
/// `Result<`[`engine::Fetched`]`>`: at most once, pops until `n` jobs or an
/// empty queue (a failure after some jobs keeps them: they are gone from
/// Redis, so they run); at least once, one `reserve_many` with the acks.
/// Either says when the topic is paused. `await` for the async worker's
/// client.
macro_rules! fetch {
    ($client:ident, $settings:ident, $f:ident $(, $await:tt)?) => {{
        let (topic, n) = ($f.topic.as_str(), $f.n);
        if $settings.mode == $crate::worker::engine::Mode::AtMostOnce {
            let (mut jobs, mut flow) = (Vec::new(), None);
            let mut failed = None;
            while jobs.len() < n {
                match $client.pop_or_wait(topic)$(.$await)? {
                    Ok((Some(m), _)) => jobs.push(m.into()),
                    Ok((None, paused)) => {
                        flow = paused;
                        break;
                    }
                    // The jobs popped are gone from Redis: run them.
                    Err(_) if !jobs.is_empty() => break,
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            match failed {
                Some(e) => Err(e),
                None => Ok((Vec::new(), jobs, flow)),
            }
        } else {
            let refs: Vec<_> = $f.acks.iter().map(|d| d.job_ref()).collect();
            $client.fetch_reserved(topic, $settings.ttr, n, &refs)$(.$await)?.map(|(flags, jobs, flow)| {
                (flags, jobs.into_iter().map($crate::worker::Delivery::from).collect(), flow)
            })
        }
    }};
}
use fetch;
