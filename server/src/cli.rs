//! The command line, flag for flag as Delayer 1.x: `-d`, `-c FILE`, `-h`, `-v`.

use clap::{ArgAction, Parser};
use std::path::PathBuf;

/// Moves due jobs from Redis's job pool to per-topic ready queues.
#[derive(Debug, Parser)]
#[command(name = "delayer", version, disable_version_flag = true)]
pub struct Cli {
    /// Run in the background as a daemon.
    #[arg(short = 'd', long = "daemon")]
    pub daemon: bool,

    /// Configuration file (default: ./delayer.conf, then /etc/delayer/delayer.conf).
    #[arg(short = 'c', long = "configuration", value_name = "FILE")]
    pub configuration: Option<PathBuf>,

    /// Print the version and exit.
    #[arg(short = 'v', long = "version", action = ArgAction::Version)]
    version: (),
}
