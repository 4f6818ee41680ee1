//! `delayer webhook -c delayer.conf`: delivers the jobs of configured topics
//! over HTTP, so applications without an SDK (or a worker process of their
//! own) receive them as signed POSTs.
//!
//! It is a consumer, not part of the server: it takes jobs as any worker
//! does (the Rust SDK's async [`delayer::worker::aio::Worker`], one per
//! topic, sharing one stop handle), so the server stays a broker, and
//! several webhook processes may run side by side. A 2xx answer acks the
//! job; anything else releases it with its backoff and the failure as its
//! last error, and after its last attempt it is a dead letter.
//! A job pushed with a W3C trace context goes with a `traceparent` header,
//! so the receiver's span joins the producer's trace.
//!
//! Concerns, one module each: the `[webhook.<topic>]` sections (`config`),
//! the signature (`sign`), the JSON body (`payload`), one HTTP delivery
//! (`deliver`), and running the workers until SIGTERM or SIGINT (`run`).

pub(crate) mod config;
mod deliver;
mod payload;
mod run;
mod sign;

pub use run::run;
