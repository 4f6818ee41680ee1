//! What the Delayer server and its Rust client share, and applications do
//! not call. The wire contract: every key's name in each layout
//! ([`keys`]), the Lua scripts ([`scripts`]) and each one's KEYS and ARGV
//! ([`calls`]), each call as an operation without I/O ([`op`]; the blocking
//! calls' wait, [`wait`]), the readers of the replies ([`replies`]), the
//! inspecting calls and the records they read ([`inspect`]). And the
//! plumbing: reading `delayer.conf` ([`conf`]), reaching Redis in each
//! deployment mode ([`target`], [`connection`], [`sentinel`], [`cluster`]),
//! the input rules of docs/PROTOCOL.md ([`validate`]), and how numbers and
//! settings read back from Redis are taken ([`numbers`], [`eviction`]).
//!
//! A crate of its own so that none of it is part of the `delayer` crate's
//! public API (that crate re-exports what applications use: the inspection's
//! records, `Layout`, `PoolOptions`), and so that the server takes it
//! without the client. Nothing here does I/O but `connection`, `target`,
//! `sentinel` and `eviction`, which connect and read settings. Its modules
//! form no import circle: `conf` reads the file (with the settings of
//! `sentinel` and `cluster` mode), `target` makes clients from it, and
//! `connection` connects to a target.

#![warn(missing_docs)]

pub mod calls;
pub mod cluster;
pub mod conf;
pub mod connection;
pub mod eviction;
pub mod inspect;
pub mod keys;
pub mod numbers;
pub mod op;
pub mod replies;
pub mod scripts;
pub mod sentinel;
pub mod target;
pub mod validate;
pub mod wait;
