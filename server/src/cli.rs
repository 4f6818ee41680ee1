//! The command line, flag for flag as Delayer 1.x (`-d`, `-c FILE`, `-h`,
//! `-v`), plus commands for operators: read-only inspection, and the
//! dead-letter lists.

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

/// Operator commands. `stats`, `peek` and `dead list` read Redis and change
/// nothing; `dead requeue` and `dead purge` change only the dead letters
/// they are given.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Pool size, next due time, how far behind the oldest due job is, ready, reserved and dead counts.
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
    /// A topic's dead letters: jobs buried, or out of attempts.
    Dead {
        #[command(subcommand)]
        action: DeadCommand,
    },
}

/// What to do with dead letters.
#[derive(Debug, Subcommand)]
pub enum DeadCommand {
    /// Show dead letters, newest first.
    List {
        /// The topic whose dead letters to show.
        topic: String,
        /// How many to show (1 to 1000).
        #[arg(default_value_t = 10)]
        count: usize,
        /// Skip this many newest ones first.
        #[arg(long, default_value_t = 0)]
        start: usize,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Schedule dead letters again, due now, attempts reset.
    Requeue(DeadSelection),
    /// Delete dead letters for good.
    Purge(DeadSelection),
}

/// Which dead letters: the ids given, or all of them with `--all`.
#[derive(Debug, clap::Args)]
pub struct DeadSelection {
    /// The topic whose dead letters to take.
    pub topic: String,
    /// The ids of the dead letters.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub ids: Vec<String>,
    /// Every dead letter of the topic.
    #[arg(long)]
    pub all: bool,
}
