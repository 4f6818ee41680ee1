//! `delayer`, the server, as a library: the binary (`src/main.rs`) only
//! parses the command line and calls one of the entry points here.
//!
//! It does one thing: on a timer, it moves due job ids from Redis's job pool
//! to their topics' ready queues, in atomic batches (see docs/PROTOCOL.md).
//! The code sits in trees by concern:
//!
//! - [`engine`], the mover core: the Lua scripts, one tick of moving in
//!   each layout, the timer and what wakes it, what Redis holds that is
//!   odd, the metrics and probes' state. It needs neither an HTTP server nor
//!   an HTTP client: built without the `http` and `webhook` features, the
//!   crate has no axum, reqwest or hmac (test.sh checks it).
//! - [`http`] (feature `http`): the HTTP API, the dashboard, and the
//!   listener of the metrics and probes.
//! - [`webhook`] (feature `webhook`): `delayer webhook`, a consumer that
//!   delivers jobs over HTTP.
//! - [`admin`]: the command line and the operator's commands (stats, peek,
//!   dead, migrate, config, health).
//! - The process around the core, here: the configuration file (`config`),
//!   failures and their exit codes (`fatal`), starting and stopping the
//!   server (`server`) and the signals it obeys (`signals`), detaching
//!   (`daemon`), logging (`logging`, the line's shape `logformat`) and panics
//!   (`panics`), the pid file (`pidfile`), and a job as JSON (`jobview`),
//!   which the commands, the API and the webhook share.

// Standard output goes through `admin::output` (a closed pipe must not panic).
#![deny(clippy::print_stdout)]

pub mod admin;
pub mod config;
mod daemon;
pub mod engine;
pub mod fatal;
#[cfg(feature = "http")]
pub mod http;
mod jobview;
mod logformat;
mod logging;
mod panics;
mod pidfile;
pub mod server;
mod signals;
#[cfg(feature = "webhook")]
pub mod webhook;

// The trees' modules under the short paths the crate's files use.
use admin::{body, cli, inspect, migrate, output};
use engine::{
    activity, badkeys, credentials, eviction, flow, memory, mover, oddities, other_layout, other_prefix, readiness,
    scripts, summary, telemetry, timer, topic_mover, wake, waves,
};
