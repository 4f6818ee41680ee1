//! Client for Delayer, the delayed-job
//! queue on Redis.
//!
//! Push a job with a delay; when it is due, the `delayer` server moves it to
//! its topic's ready queue, and a consumer pops it. The data layout is
//! Delayer 1.x's, so this client works with the original server and clients
//! too; docs/PROTOCOL.md in the repository describes it.
//!
//! ```no_run
//! use delayer::{Delayer, Job};
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
//! // A worker:
//! while let Some(job) = delayer.bpop("sms", Duration::from_secs(5))? {
//!     println!("{} {:?}", job.id, job.body_str());
//! }
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

#[cfg(feature = "aio")]
pub mod aio;
mod client;
pub mod conf;
pub mod connection;
mod error;
pub mod keys;
mod ops;
mod reliable;
pub mod scripts;
pub mod validate;
mod wait;

pub use client::{Delayer, Job, Message};
pub use connection::PoolOptions;
pub use error::{Error, IdTaken, Result, Taken};
pub use keys::Keys;
pub use reliable::{Backoff, DeadLetter, JobRef, Reserved};
