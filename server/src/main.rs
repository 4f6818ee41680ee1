//! `delayer`: the server.
//!
//! It does one thing: on a timer, it moves due job ids from Redis's job pool
//! to their topics' ready queues, in atomic batches (see docs/PROTOCOL.md).
//! Each concern has its own module: the command line (`cli`) and Delayer
//! 1.x's spellings of its flags (`goflags`), the configuration file
//! (`config`), failures and their exit codes (`fatal`), starting and
//! stopping the server (`server`) and the signals it obeys (`signals`),
//! detaching (`daemon`), logging (`logging`, the line's shape
//! `logformat`) and panics (`panics`), the pid file (`pidfile`), refused credentials (`credentials`), the Lua scripts
//! (`scripts`), one tick of moving (`mover`, and `topic_mover` with its
//! rounds of calls, `waves`, for the per-topic layout; what both moved is
//! summed up every minute by `summary`), the timer around it
//! (`timer`) and what wakes it (`wake`), metrics (`telemetry`), and the
//! operator commands (`commands`) with their read-only views (`inspect`),
//! job bodies (`body`) and standard output (`output`), and the HTTP API with
//! its dashboard (`http`). What Redis holds is input: odd numbers are logged
//! once per key (`oddities`), keys of the wrong type are named and watched
//! until fixed (`badkeys`), a Redis out of memory (`memory`) or one that may
//! evict jobs (`eviction`) is said once, and jobs waiting in the other
//! layout (`other_layout`) or under a prefix nobody serves (`other_prefix`)
//! are said when found. The probes (`readiness`) say whether the process
//! serves and whether it does its job.
//! `delayer webhook` (`webhook`) is a consumer run from the same binary: it
//! delivers jobs over HTTP. `delayer health` (`healthcheck`) asks a running
//! server's probe, for a container's HEALTHCHECK. The commands write through
//! `output`, which a reader hanging up cannot turn into a panic.

// Standard output goes through `output` (a closed pipe must not panic).
#![deny(clippy::print_stdout)]

mod activity;
mod badkeys;
mod body;
mod cli;
mod commands;
mod config;
mod credentials;
mod daemon;
mod effective;
mod eviction;
mod fatal;
mod goflags;
mod healthcheck;
mod http;
mod inspect;
mod jobview;
mod logformat;
mod logging;
mod memory;
mod migrate;
mod mover;
mod oddities;
mod other_layout;
mod other_prefix;
mod output;
mod panics;
mod pidfile;
mod readiness;
mod scripts;
mod server;
mod signals;
mod summary;
mod telemetry;
mod timer;
mod topic_mover;
mod wake;
mod waves;
mod webhook;

use clap::Parser;
use fatal::Fatal;
use std::process::ExitCode;

fn main() -> ExitCode {
    // 1.x's Go-style flags (`-daemon`, `-configuration=FILE`, `--c FILE`)
    // are rewritten first, so its scripts and unit files work unchanged.
    let cli = cli::Cli::parse_from(goflags::normalize::<cli::Cli>(std::env::args_os()));
    let done = match cli.command {
        Some(_) if cli.daemon => Err(Fatal::usage("-d runs the server; the commands run in the foreground")),
        Some(cli::Command::Webhook) if cli.url.is_some() || cli.prefix.is_some() => Err(Fatal::usage(
            "delayer webhook reads -c FILE ([redis], key_prefix and its [webhook.<topic>] sections), not --url or --prefix",
        )),
        Some(cli::Command::Webhook) => webhook::run(cli.configuration.as_deref()),
        Some(cli::Command::Health { .. }) if cli.url.is_some() || cli.prefix.is_some() => {
            Err(Fatal::usage("delayer health asks the server's probe (-c FILE, or --probe-url), not Redis: no --url"))
        }
        Some(cli::Command::Health { ready, probe_url, timeout }) => healthcheck::run(
            cli.configuration.as_deref(),
            if ready { healthcheck::Probe::Ready } else { healthcheck::Probe::Live },
            probe_url.as_deref(),
            std::time::Duration::from_secs(timeout),
        ),
        Some(cli::Command::Config { .. }) if cli.url.is_some() || cli.prefix.is_some() => {
            Err(Fatal::usage("delayer config shows what -c FILE and the DELAYER_* variables make, not --url"))
        }
        Some(cli::Command::Config { json }) => effective::run(cli.configuration.as_deref(), json),
        Some(command) => {
            commands::Target::resolve(cli.url.as_deref(), cli.prefix.as_deref(), cli.configuration.as_deref())
                .and_then(|target| commands::run(&target, command))
        }
        None if cli.url.is_some() || cli.prefix.is_some() => {
            Err(Fatal::usage("--url and --prefix are for the commands (stats, peek, dead); the server reads -c FILE"))
        }
        None => server::run(cli.configuration.as_deref(), cli.daemon),
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(fatal) => report(&fatal),
    }
}

/// Says why, once: through the logger when the server installed one (it
/// writes errors to stderr and to the error log), else on stderr. A usage
/// error ends as clap's do.
fn report(fatal: &Fatal) -> ExitCode {
    if log::log_enabled!(log::Level::Error) {
        log::error!("{fatal}");
    } else if fatal.kind == fatal::Kind::Usage {
        output::error(format_args!("error: {fatal}\n\nFor more information, try '--help'."));
    } else {
        output::error(format_args!("delayer: {fatal}"));
    }
    ExitCode::from(fatal.code())
}
