//! The command line, flag for flag as Delayer 1.x (`-d`, `-c FILE`, `-h`,
//! `-v`), plus read-only inspection commands for operators.

use clap::{ArgAction, Parser, Subcommand};
use std::path::PathBuf;

/// Moves due jobs from Redis's job pool to per-topic ready queues.
///
/// Without a command it runs the server.
#[derive(Debug, Parser)]
#[command(name = "delayer", version, disable_version_flag = true)]
pub struct Cli {
    /// Run in the background as a daemon.
    #[arg(short = 'd', long = "daemon")]
    pub daemon: bool,

    /// Configuration file (default: ./delayer.conf, then /etc/delayer/delayer.conf).
    #[arg(short = 'c', long = "configuration", value_name = "FILE", global = true)]
    pub configuration: Option<PathBuf>,

    /// Print the version and exit.
    #[arg(short = 'v', long = "version", action = ArgAction::Version)]
    version: (),

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Inspection commands: they read Redis and change nothing.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Pool size, next due time, how far behind the oldest due job is, ready counts per topic.
    Stats {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The next jobs a consumer of TOPIC would pop, without popping them.
    Peek {
        /// The topic whose ready queue to look at.
        topic: String,
        /// How many jobs to show.
        #[arg(default_value_t = 10)]
        count: usize,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}
