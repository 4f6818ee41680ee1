//! `delayer`: the server's binary. It reads the command line and runs the
//! server or one of its commands, all of them in the library
//! (`src/lib.rs`, whose docs say where each concern lives).

// Standard output goes through `admin::output` (a closed pipe must not panic).
#![deny(clippy::print_stdout)]

use clap::Parser;
use delayer_server::admin::{cli, commands, effective, goflags, output};
use delayer_server::fatal::{self, Fatal};
use delayer_server::server;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    // 1.x's Go-style flags (`-daemon`, `-configuration=FILE`, `--c FILE`)
    // are rewritten first, so its scripts and unit files work unchanged.
    let cli = cli::Cli::parse_from(goflags::normalize::<cli::Cli>(std::env::args_os()));
    let done = match cli.command {
        Some(_) if cli.daemon => Err(Fatal::usage("-d runs the server; the commands run in the foreground")),
        Some(cli::Command::Webhook) if cli.url.is_some() || cli.prefix.is_some() => Err(Fatal::usage(
            "delayer webhook reads -c FILE ([redis], key_prefix and its [webhook.<topic>] sections), not --url or --prefix",
        )),
        Some(cli::Command::Webhook) => webhook(cli.configuration.as_deref()),
        Some(cli::Command::Health { .. }) if cli.url.is_some() || cli.prefix.is_some() => {
            Err(Fatal::usage("delayer health asks the server's probe (-c FILE, or --probe-url), not Redis: no --url"))
        }
        Some(cli::Command::Health { ready, probe_url, timeout }) => {
            health(cli.configuration.as_deref(), ready, probe_url.as_deref(), std::time::Duration::from_secs(timeout))
        }
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

/// `delayer webhook`, in a build with it.
fn webhook(conf: Option<&Path>) -> Result<(), Fatal> {
    #[cfg(feature = "webhook")]
    {
        delayer_server::webhook::run(conf)
    }
    #[cfg(not(feature = "webhook"))]
    {
        let _ = conf;
        Err(Fatal::usage("delayer webhook: this build has no webhook feature"))
    }
}

/// `delayer health`, in a build with an HTTP client (the `http` feature).
fn health(conf: Option<&Path>, ready: bool, probe_url: Option<&str>, timeout: Duration) -> Result<(), Fatal> {
    #[cfg(feature = "http")]
    {
        use delayer_server::admin::healthcheck::{run, Probe};
        run(conf, if ready { Probe::Ready } else { Probe::Live }, probe_url, timeout)
    }
    #[cfg(not(feature = "http"))]
    {
        let _ = (conf, ready, probe_url, timeout);
        Err(Fatal::usage("delayer health: this build has no http feature"))
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
