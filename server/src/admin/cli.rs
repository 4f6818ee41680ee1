//! The command line, flag for flag as Delayer 1.x (`-d`, `-c FILE`, `-h`,
//! `-v`; 1.x's Go-style spellings such as `-daemon` or `--c FILE` are
//! rewritten into these first, by `goflags`), plus commands for operators:
//! read-only inspection, and the dead-letter lists.
//!
//! Every argument is checked here (names, counts), so a bad one is a usage
//! error (exit 2) before anything connects to Redis.

use clap::builder::TypedValueParser;
use clap::{ArgAction, Parser, Subcommand};
use delayer_protocol::validate::MAX_DEAD_PER_CALL;
use std::path::PathBuf;

/// The environment variable the commands read a Redis URL from.
pub const URL_ENV: &str = "DELAYER_URL";

/// Moves due jobs from Redis's job pool to per-topic ready queues.
///
/// Without a command it runs the server.
#[derive(Debug, Parser)]
#[command(name = "delayer", version, disable_version_flag = true)]
// `version: ()` is clap's -v flag, not a marker against construction.
#[allow(clippy::manual_non_exhaustive)]
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

/// Which topics `delayer pause` and `resume` act on, and how they answer.
#[derive(Debug, clap::Args)]
pub struct FlowTarget {
    /// The topic.
    #[arg(value_parser = topic, required_unless_present = "all", conflicts_with = "all")]
    pub topic: Option<String>,
    /// Every topic `delayer stats` lists now instead of one (resume: those that are paused).
    #[arg(long)]
    pub all: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `delayer limit`'s arguments.
#[derive(Debug, clap::Args)]
pub struct LimitTarget {
    /// The topic.
    #[arg(value_parser = topic)]
    pub topic: String,
    /// The rate: N/s, N/min or N/h (N a decimal: 30/min is 0.5 a second), or "off" to remove the limit.
    #[arg(value_parser = rate, allow_hyphen_values = true)]
    pub rate: Rate,
    /// How many jobs may become ready at once after a quiet spell (default: one second's worth, at least 1).
    #[arg(long, value_name = "B")]
    pub burst: Option<u64>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `delayer limit`'s rate: jobs per second, or none.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    PerSecond(f64),
    Off,
}

/// What a rate must look like, said when it does not.
const RATE_SPELLING: &str = "a rate is N/s, N/min or N/h, or off: say 100/s, 30/min or 2/h";

/// `N/s`, `N/min`, `N/h` (N a decimal), or `off`. Only the spelling is
/// checked here: which rates are allowed is flow.lua's rule (its refusal
/// comes back as a usage error), so the CLI, HTTP and every SDK agree.
fn rate(value: &str) -> Result<Rate, String> {
    if value == "off" {
        return Ok(Rate::Off);
    }
    let (n, unit) = value.split_once('/').ok_or_else(|| format!("{value:?}: {RATE_SPELLING}"))?;
    let seconds = match unit {
        "s" => 1.0,
        "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(format!("{value:?}: unknown unit {unit:?}; {RATE_SPELLING}")),
    };
    let n: f64 = n.trim().parse().map_err(|_| format!("{value:?}: {n:?} is no number; {RATE_SPELLING}"))?;
    Ok(Rate::PerSecond(n / seconds))
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
    /// Where one job is: scheduled (and when it is due), ready, reserved (until when), dead (why), or unknown.
    Job {
        /// The job's topic (a job of another topic is reported unknown).
        #[arg(value_parser = topic)]
        topic: String,
        /// The job's id (any bytes: one that is not UTF-8 is given as is).
        #[arg(value_parser = raw_id())]
        id: RawId,
        /// Show the body too: as text, bytes that are not UTF-8 escaped, the first 64 KiB (JSON: `body`, or
        /// `body_base64`, whole up to 16 MiB).
        #[arg(long)]
        body: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// A page of a topic's jobs in one state (--state): scheduled (by due time; the default), ready (next out
    /// first), reserved (by deadline) or dead (newest first).
    List {
        /// The topic whose jobs to list.
        #[arg(value_parser = topic)]
        topic: String,
        /// Which jobs.
        #[arg(long, value_enum, default_value = "scheduled")]
        state: ListState,
        /// How many to show (1 to 1000).
        #[arg(long, default_value_t = 20, value_parser = count)]
        count: usize,
        /// Where to start: 0, or the "next" cursor a previous page printed.
        #[arg(long, default_value_t = 0, value_parser = |v: &str| position("cursor", v))]
        cursor: u64,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Pause TOPIC: no Delayer 2 consumer (SDKs, Workers, HTTP, webhook) is handed its jobs and no server makes
    /// its due jobs ready until `delayer resume`; pushes, removes and reschedules go on, ready jobs stay. --all
    /// pauses every topic `delayer stats` lists now (topics that appear later are not paused).
    Pause(FlowTarget),
    /// Resume TOPIC (or --all paused topics): waiting consumers wake, and its held due jobs become ready.
    Resume(FlowTarget),
    /// Limit how many of TOPIC's jobs become ready: at most RATE (N/s, N/min or N/h), --burst at once, for every
    /// server together; due jobs beyond it wait in due order (held). Jobs already ready are not paced. "off"
    /// removes the limit.
    Limit(LimitTarget),
    /// Cancel a job of TOPIC, wherever it is (waiting, ready, reserved or dead).
    Remove {
        /// The job's topic (the job is not touched if it belongs to another).
        #[arg(value_parser = topic)]
        topic: String,
        /// The job's id (any bytes).
        #[arg(value_parser = raw_id())]
        id: RawId,
    },
    /// Change when a waiting job of TOPIC is due: DELAY from now (seconds, or "90s", "5m", "2h"; a negative
    /// one, "-5" or "-- -5m", means due now).
    #[command(allow_negative_numbers = true)]
    Reschedule {
        /// The job's topic (the job is not touched if it belongs to another).
        #[arg(value_parser = topic)]
        topic: String,
        /// The job's id (any bytes).
        #[arg(value_parser = raw_id())]
        id: RawId,
        /// The new delay from now (negative: due now).
        #[arg(value_parser = delay)]
        delay: std::time::Duration,
    },
    /// Schedule a job: ID on TOPIC, due after DELAY (as reschedule's), replacing a job that holds ID, as every
    /// SDK's push does. Prints when it is due.
    #[command(allow_negative_numbers = true)]
    Push {
        /// The topic whose ready queue the job goes to when due.
        #[arg(value_parser = topic)]
        topic: String,
        /// The job's id (ids are shared across topics in the classic layout).
        #[arg(value_parser = |v: &str| name("id", v))]
        id: String,
        /// How long from now until it is due: seconds, or "90s", "5m", "2h" (negative: due now).
        #[arg(value_parser = delay)]
        delay: std::time::Duration,
        /// The body, as given (default: empty).
        #[arg(long, value_name = "TEXT", conflicts_with = "body_file")]
        body: Option<std::ffi::OsString>,
        /// Read the body from this file, byte for byte ("-": standard input).
        #[arg(long, value_name = "PATH")]
        body_file: Option<PathBuf>,
    },
    /// A topic's dead letters: jobs buried, or out of attempts (`dead requeue TOPIC ID` re-queues one).
    Dead {
        #[command(subcommand)]
        action: DeadCommand,
    },
    // The doc comment is the command's help text (clap), where `<topic>` is
    // meant literally: rustdoc's reading of it as an HTML tag is allowed here.
    #[allow(rustdoc::invalid_html_tags)]
    /// Deliver the jobs of the topics in the file's [webhook.<topic>] sections as signed HTTP POSTs, until
    /// SIGTERM or SIGINT (reads -c FILE, not --url).
    Webhook,
    /// Ask the running server's probe (from the configuration: metrics_addr's /healthz or /readyz, else
    /// http_addr's /v1/health or /v1/ready): exit 0 on 200, else 1 with the reason (a container's HEALTHCHECK).
    Health {
        /// The readiness probe (Redis answers, the mover ticks) instead of liveness.
        #[arg(long, conflicts_with = "probe_url")]
        ready: bool,
        /// The probe's URL, instead of the configuration's addresses.
        #[arg(long = "probe-url", value_name = "URL")]
        probe_url: Option<String>,
        /// Seconds to wait for the answer (1 to 60).
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=60))]
        timeout: u64,
    },
    /// Print the effective configuration (-c FILE or the default places, then DELAYER_* variables), each
    /// value with its source (default, file, env), secrets masked.
    Config {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Move every job (waiting, ready, reserved, dead) to the other key layout, job by job, while clients
    /// and servers keep running; jobs another command must first end are counted and left (run it again).
    Migrate {
        /// The layout to move jobs to (from the other one).
        #[arg(long, value_enum)]
        to: LayoutArg,
    },
}

/// `delayer migrate --to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LayoutArg {
    Classic,
    Topic,
}

/// The states `delayer list` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ListState {
    Scheduled,
    Ready,
    Reserved,
    Dead,
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
        #[arg(long, default_value_t = 0, value_parser = start)]
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
    /// The ids of the dead letters (any bytes: one that is not UTF-8 is given as is).
    #[arg(required_unless_present = "all", conflicts_with = "all", value_parser = raw_id())]
    pub ids: Vec<RawId>,
    /// Every dead letter of the topic.
    #[arg(long)]
    pub all: bool,
}

/// A topic, as the SDK accepts it.
fn topic(value: &str) -> Result<String, String> {
    name("topic", value)
}

/// A job id as the command line gives it: any non-empty bytes (on Unix an
/// argument is bytes, so an id a Delayer 1.x or PHP client wrote that is
/// not UTF-8, as `--json` shows it in `id_base64`, can be named).
fn raw_id() -> impl TypedValueParser<Value = RawId> {
    clap::builder::OsStringValueParser::new().try_map(|value| {
        let bytes = value.into_encoded_bytes();
        if bytes.is_empty() {
            return Err("id must not be empty");
        }
        Ok(RawId(bytes))
    })
}

/// A job id as given on the command line: its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RawId(pub Vec<u8>);

fn name(what: &str, value: &str) -> Result<String, String> {
    delayer_protocol::validate::name(what, value).map(|()| value.to_string()).map_err(|e| e.0)
}

/// How many to show: 1 to [`MAX_DEAD_PER_CALL`].
fn count(value: &str) -> Result<usize, String> {
    let expected = format!("a whole number from 1 to {MAX_DEAD_PER_CALL}");
    match value.parse::<usize>() {
        Ok(n) if (1..=MAX_DEAD_PER_CALL).contains(&n) => Ok(n),
        _ => Err(expected),
    }
}

/// A listing's position (`what`: cursor, start): 0 to the SDK's bound,
/// the HTTP API's too.
fn position(what: &str, value: &str) -> Result<u64, String> {
    let max = delayer_protocol::validate::MAX_POSITION;
    let n = value.parse::<u64>().map_err(|_| format!("a whole number from 0 to {max}"))?;
    delayer_protocol::validate::position(what, n).map_err(|e| e.0)
}

/// How many dead letters to skip: as [`position`].
fn start(value: &str) -> Result<usize, String> {
    let n = position("start", value)?;
    usize::try_from(n).map_err(|_| format!("{n} is too large on this machine"))
}

/// A delay: seconds (fractions allowed) or a duration with units ("90s",
/// "5m", "1h 30m"), within the SDK's limits. A negative one ("-5", "-2m",
/// within the same limits) is due now: a time already past, as Delayer 1.x
/// (and the PHP SDK's 1.x API) took it; never earlier than now, since the
/// SDKs' delays start at 0 (they refuse a negative one as a caller's bug,
/// where a person at a prompt means "now").
fn delay(value: &str) -> Result<std::time::Duration, String> {
    match value.trim().strip_prefix('-') {
        Some(past) => unsigned_delay(past).map(|_| std::time::Duration::ZERO),
        None => unsigned_delay(value),
    }
}

fn unsigned_delay(value: &str) -> Result<std::time::Duration, String> {
    let parsed = match value.trim().parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs >= 0.0 && secs <= delayer_protocol::validate::MAX_DELAY.as_secs_f64() => {
            std::time::Duration::try_from_secs_f64(secs).map_err(|_| "a delay from 0 to 10 years".to_string())
        }
        Ok(_) => Err("a delay from 0 to 10 years".to_string()),
        Err(_) => humantime::parse_duration(value.trim())
            .map_err(|e| format!("not a delay ({e}): use seconds or e.g. 90s, 5m")),
    }?;
    delayer_protocol::validate::delay_ms(parsed).map_err(|e| e.to_string())?;
    Ok(parsed)
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
            &["job", "t"],
            &["job", "", "a"],
            &["list", "t", "--state", "waiting"],
            &["list", "t", "--state", "ready", "--count", "0"],
            &["list", "t", "--state", "scheduled", "--cursor", "9007199254740992"],
            &["list", "t", "--state", "reserved", "--cursor", "18446744073709551616"],
            &["list", "t", "--state", "dead", "--cursor", "-1"],
            &["dead", "list", "t", "--start", "9223372036854775808"],
            &["dead", "list", "t", "99999999999999999999"],
            &["reschedule", "t", "a", "-11y"],
            &["reschedule", "t", "a", "--", "--5"],
            &["push", "t", "a"],
            &["push", "t", "", "5"],
            &["push", "t", "a", "5", "--body", "x", "--body-file", "-"],
            &["reschedule", "t", "a", "soon"],
            &["reschedule", "t", "a", "11y"],
            &["remove", "t"],
            &["limit", "t"],
            &["limit", "t", "100"],
            &["limit", "t", "100/d"],
            &["limit", "t", "fast/s"],
            &["limit", "t", "5/s", "--burst", "-1"],
            &["limit", "", "5/s"],
        ] {
            assert_eq!(parse(args).map(|_| ()).map_err(|e| e.exit_code()), Err(2), "{args:?}");
        }
        let ok = parse(&["stats", "--url", "redis://x/", "--prefix", "app:"]).expect("valid");
        assert_eq!((ok.url.as_deref(), ok.prefix.as_deref()), (Some("redis://x/"), Some("app:")));
        assert!(parse(&["dead", "requeue", "t", "a", "b"]).is_ok());
        assert!(parse(&["list", "t", "--state", "dead", "--cursor", "40", "--count", "20", "--json"]).is_ok());
        assert!(parse(&["list", "t", "--state", "reserved", "--cursor", "9007199254740991"]).is_ok());
        for d in ["1.5", "90s", "1h 30m"] {
            assert!(parse(&["reschedule", "t", "a", d]).is_ok(), "{d}");
        }
        // A negative delay is due now, given bare (a number) or after `--`.
        for args in
            [&["reschedule", "t", "a", "-5"][..], &["reschedule", "t", "a", "--", "-5m"], &["push", "t", "a", "-1.5"]]
        {
            match parse(args).map(|c| c.command) {
                Ok(Some(Command::Reschedule { delay, .. } | Command::Push { delay, .. })) => {
                    assert_eq!(delay, std::time::Duration::ZERO, "{args:?}")
                }
                other => panic!("{args:?}: {other:?}"),
            }
        }
        match parse(&["list", "t"]).map(|c| c.command) {
            Ok(Some(Command::List { state, .. })) => assert_eq!(state, ListState::Scheduled),
            other => panic!("list defaults to scheduled: {other:?}"),
        }
        let limit = |args: &[&str]| match parse(args).map(|c| c.command) {
            Ok(Some(Command::Limit(l))) => (l.rate, l.burst),
            other => panic!("{args:?}: {other:?}"),
        };
        assert_eq!(limit(&["limit", "t", "30/min"]), (Rate::PerSecond(0.5), None));
        assert_eq!(limit(&["limit", "t", "2.5/s", "--burst", "10"]), (Rate::PerSecond(2.5), Some(10)));
        assert_eq!(limit(&["limit", "t", "7200/h"]), (Rate::PerSecond(2.0), None));
        assert_eq!(limit(&["limit", "t", "off"]), (Rate::Off, None));
        // The rate's rules are the script's: these reach it (and it refuses them).
        assert_eq!(limit(&["limit", "t", "0/s"]), (Rate::PerSecond(0.0), None));
        assert_eq!(limit(&["limit", "t", "-5/s"]), (Rate::PerSecond(-5.0), None));
        let bare = parse(&["limit", "t", "100"]).expect_err("a bare number").to_string();
        assert!(bare.contains("say 100/s, 30/min or 2/h"), "{bare}");
        // Any non-empty name, as Delayer 1.x wrote them.
        assert!(parse(&["peek", "close order"]).is_ok());
        assert!(parse(&["dead", "list", "{t}"]).is_ok());
        assert!(parse(&["dead", "purge", "close order", "order 42", "{x}", "x".repeat(300).as_str()]).is_ok());
    }
}
