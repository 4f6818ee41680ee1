//! What the Delayer server and its Rust client share, and applications do
//! not call: the wire contract (every key's name in each layout, [`keys`];
//! the Lua scripts, [`scripts`]; each call as an operation without I/O,
//! [`op`], and the readers of their replies, [`replies`]; the inspecting
//! calls and the records they read, [`inspect`]), reading `delayer.conf` ([`conf`]),
//! reaching Redis in each deployment mode ([`target`], [`connection`],
//! [`sentinel`], [`cluster`]), the input rules of docs/PROTOCOL.md
//! ([`validate`]), and how numbers and settings read back from Redis are
//! taken ([`numbers`], [`eviction`]).
//!
//! A crate of its own so that this plumbing is no part of the `delayer`
//! crate's public API (that crate re-exports what applications use), and so
//! that the server takes it without the client's call layer. Its modules
//! form no import circle: `conf` reads the file (with the settings of
//! `sentinel` and `cluster` mode), `target` makes clients from it, and
//! `connection` connects to a target.

#![warn(missing_docs)]

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
