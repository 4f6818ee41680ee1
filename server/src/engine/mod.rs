//! The mover core: what moves due jobs, and nothing that serves or calls
//! HTTP (the `http` tree serves its metrics and probes).
//!
//! The Lua scripts (`scripts`); one tick of moving (`mover`, and
//! `topic_mover` with its rounds of calls, `waves`, for the per-topic
//! layout; what both moved is summed up every minute by `summary`), the
//! timer around it (`timer`) and what wakes it (`wake`); metrics
//! (`telemetry`, with the per-topic numbers of `activity`) and the probes'
//! state (`readiness`). The classic flow drain (`flow`) runs in the mover. What Redis holds is input: odd numbers are logged
//! once per key (`oddities`), keys of the wrong type are named and watched
//! until fixed (`badkeys`), a Redis out of memory (`memory`) or one that may
//! evict jobs (`eviction`) is said once, refused credentials
//! (`credentials`) are said plainly, and jobs waiting in the other layout
//! (`other_layout`) or under a prefix nobody serves (`other_prefix`) are
//! said when found.

pub mod activity;
pub mod badkeys;
pub mod credentials;
pub mod eviction;
pub mod flow;
pub mod memory;
pub mod mover;
pub mod oddities;
pub mod other_layout;
pub mod other_prefix;
pub mod readiness;
pub mod scripts;
pub mod summary;
pub mod telemetry;
pub mod timer;
pub mod topic_mover;
pub mod wake;
pub mod waves;
