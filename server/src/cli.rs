//! The command line, flag for flag as Delayer 1.x (`-d`, `-c FILE`, `-h`,
//! `-v`; 1.x's Go-style spellings such as `-daemon` or `--c FILE` are
//! rewritten into these first, by `goflags`), plus commands for operators:
//! read-only inspection, and the dead-letter lists.
//!
//! Every argument is checked here (names, counts), so a bad one is a usage
//! error (exit 2) before anything connects to Redis.

use clap::{ArgAction, Parser, Subcommand};
use delayer::validate::MAX_DEAD_PER_CALL;
use std::path::PathBuf;

/// The environment variable the commands read a Redis URL from.
pub const URL_ENV: &str = "DELAYER_URL";

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

    /// For the commands: the Redis to use, instead of a configuration file
    /// (redis://, rediss://, unix://). Default: $DELAYER_URL, unless -c is given.
    #[arg(long, value_name = "URL", global = true, conflicts_with = "configuration")]
    pub url: Option<String>,

    /// For the commands, with a URL: the key prefix (default "delayer:").
    #[arg(long, value_name = "PREFIX", global = true, conflicts_with = "configuration")]
    pub prefix: Option<String>,

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
        #[arg(value_parser = topic)]
        topic: String,
        /// How many jobs to show (1 to 1000).
        #[arg(default_value_t = 10, value_parser = count)]
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
        #[arg(value_parser = topic)]
        topic: String,
        /// How many to show (1 to 1000).
        #[arg(default_value_t = 10, value_parser = count)]
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
    #[arg(value_parser = topic)]
    pub topic: String,
    /// The ids of the dead letters.
    #[arg(required_unless_present = "all", conflicts_with = "all", value_parser = id)]
    pub ids: Vec<String>,
    /// Every dead letter of the topic.
    #[arg(long)]
    pub all: bool,
}

/// A topic, as the SDK accepts it.
fn topic(value: &str) -> Result<String, String> {
    name("topic", value)
}

/// A job id, as the SDK accepts it.
fn id(value: &str) -> Result<String, String> {
    name("id", value)
}

fn name(what: &str, value: &str) -> Result<String, String> {
    match delayer::validate::name(what, value) {
        Ok(()) => Ok(value.to_string()),
        Err(delayer::Error::InvalidArgument(why)) => Err(why),
        Err(other) => Err(other.to_string()),
    }
}

/// How many to show: 1 to [`MAX_DEAD_PER_CALL`].
fn count(value: &str) -> Result<usize, String> {
    let expected = format!("a whole number from 1 to {MAX_DEAD_PER_CALL}");
    match value.parse::<usize>() {
        Ok(n) if (1..=MAX_DEAD_PER_CALL).contains(&n) => Ok(n),
        _ => Err(expected),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("delayer").chain(args.iter().copied()))
    }

    #[test]
    fn bad_arguments_are_refused_while_parsing() {
        for args in [
            &["peek", ""][..],
            &["peek", "t", "0"],
            &["peek", "t", "1001"],
            &["dead", "list", "t", "x"],
            &["dead", "requeue", "t"],
            &["dead", "purge", "t", "a", "--all"],
            &["dead", "purge", "t", ""],
            &["-c", "f", "--url", "redis://x/", "stats"],
        ] {
            assert_eq!(parse(args).map(|_| ()).map_err(|e| e.exit_code()), Err(2), "{args:?}");
        }
        let ok = parse(&["stats", "--url", "redis://x/", "--prefix", "app:"]).expect("valid");
        assert_eq!((ok.url.as_deref(), ok.prefix.as_deref()), (Some("redis://x/"), Some("app:")));
        assert!(parse(&["dead", "requeue", "t", "a", "b"]).is_ok());
        // Any non-empty name, as Delayer 1.x wrote them.
        assert!(parse(&["peek", "close order"]).is_ok());
        assert!(parse(&["dead", "list", "{t}"]).is_ok());
        assert!(parse(&["dead", "purge", "close order", "order 42", "{x}", "x".repeat(300).as_str()]).is_ok());
    }
}
