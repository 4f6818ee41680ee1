//! The command line and what an operator runs besides the server: the
//! arguments (`cli`) and Delayer 1.x's spellings of its flags (`goflags`);
//! the commands (`commands`: stats, peek, dead, ...) with their read-only
//! views (`inspect`), job bodies (`body`), moving jobs between layouts
//! (`migrate`), pausing and resuming topics (`pause`), their rate limits
//! (`limit`); `delayer config` (`effective`), `delayer health`
//! (`healthcheck`, feature `http`: it asks a running server's probe), and
//! standard output (`output`), which a reader hanging up cannot turn into
//! a panic.

pub(crate) mod body;
pub mod cli;
pub mod commands;
pub mod effective;
pub mod goflags;
#[cfg(feature = "http")]
pub mod healthcheck;
pub(crate) mod inspect;
pub(crate) mod limit;
pub(crate) mod migrate;
pub mod output;
pub(crate) mod pause;
