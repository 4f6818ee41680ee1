//! Client for Delayer, the delayed-job
//! queue on Redis.
//!
//! Push a job with a delay; when it is due, the `delayer` server moves it to
//! its topic's ready queue, and a consumer pops it. The data layout is
//! Delayer 1.x's, so this client works with the original server and clients
//! too; docs/PROTOCOL.md in the repository describes it.
//!
//! **Ids are global across topics** in that layout: pushing an id that a
//! job holds replaces that job, whatever its topic, unless the push is
//! [`Job::if_absent`] (then it fails with [`Error::IdTaken`]).
//!
//! ```no_run
//! use delayer::{Delayer, Error, Job};
//! use std::time::Duration;
//!
//! # fn main() -> delayer::Result<()> {
//! let delayer = Delayer::open("redis://127.0.0.1:6379/0")?;
//!
//! // Close order 42 in 30 minutes unless it is paid.
//! delayer.push("close_order", "order:42", Duration::from_secs(1800))?;
//! // With a body, and kept for a day once due:
//! delayer.push_job(
//!     &Job::new("sms", "sms:7", Duration::from_secs(3 * 86400))
//!         .body(r#"{"phone":"..."}"#)
//!         .ready_max_lifetime(Duration::from_secs(86400)),
//! )?;
//! // Paid: cancel it.
//! delayer.remove("order:42")?;
//!
//! // A worker: a Redis restart is a connection error to wait out.
//! loop {
//!     match delayer.bpop("sms", Duration::from_secs(5)) {
//!         Ok(Some(job)) => println!("{} {:?}", job.id, job.body_str()),
//!         Ok(None) => {}
//!         Err(e @ Error::Connection(_)) => {
//!             eprintln!("{e}; trying again in 1 s");
//!             std::thread::sleep(Duration::from_secs(1));
//!         }
//!         Err(e) => return Err(e),
//!     }
//! }
//! # }
//! ```
//!
//! The repository's `sdk-rust/examples` (producer, worker, reliable_worker)
//! are whole programs, shown in its README and run by its tests.

#![warn(missing_docs)]

#[macro_use]
mod twins;
#[cfg(feature = "aio")]
pub mod aio;
#[cfg(feature = "aio")]
mod aio_shared;
mod client;
mod durable;
mod error;
mod flow;
pub mod inspect;
mod job;
mod ops;
mod reliable;
pub mod trace;
mod validate;
mod wait;
pub mod worker;

// The plumbing and the wire contract shared with the server (key names,
// scripts, delayer.conf), under the paths this crate's files use.
pub(crate) use delayer_protocol::{conf, connection, eviction, keys, scripts, target};

pub use client::Delayer;
pub use delayer_protocol::conf::ConfError;
pub use delayer_protocol::connection::PoolOptions;
pub use delayer_protocol::keys::Layout;
pub use delayer_protocol::replies::{FlowState, RateLimit};
pub use error::{Error, IdTaken, NotReplicated, Result, Taken};
pub use job::{Job, Message};
pub use reliable::{Backoff, DeadLetter, JobRef, Reserved};
