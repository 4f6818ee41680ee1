//! `delayer`: the server.
//!
//! It does one thing: on a timer, it moves due job ids from Redis's job pool
//! to their topics' ready queues, in atomic batches (see docs/PROTOCOL.md).
//! Each concern has its own module: the command line (`cli`), the
//! configuration file (`config`), failures and their exit codes (`fatal`),
//! starting and stopping the server (`server`), detaching (`daemon`),
//! logging (`logging`), the pid file (`pidfile`), refused credentials
//! (`credentials`), the Lua scripts (`scripts`), one tick of moving
//! (`mover`), the timer around it (`timer`) and what wakes it (`wake`),
//! metrics (`telemetry`), and read-only views for operators (`inspect`).

mod cli;
mod config;
mod credentials;
mod daemon;
mod fatal;
mod inspect;
mod logging;
mod mover;
mod pidfile;
mod scripts;
mod server;
mod telemetry;
mod timer;
mod wake;

use clap::Parser;
use delayer::Keys;
use fatal::Fatal;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let done = match cli.command {
        Some(command) => config::locate(cli.configuration.as_deref())
            .and_then(|path| config::Config::load(&path))
            .map_err(Fatal::from)
            .and_then(|config| run_command(&config, command)),
        None => server::run(cli.configuration.as_deref(), cli.daemon),
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(fatal) => report(&fatal),
    }
}

/// Says why, once: through the logger when the server installed one (it
/// writes errors to stderr and to the error log), else on stderr.
fn report(fatal: &Fatal) -> ExitCode {
    if log::log_enabled!(log::Level::Error) {
        log::error!("{fatal}");
    } else {
        eprintln!("delayer: {fatal}");
    }
    ExitCode::from(fatal.code())
}

/// `delayer stats` / `peek` / `dead ...`: print and exit.
fn run_command(config: &config::Config, command: cli::Command) -> Result<(), Fatal> {
    let mut conn = inspect::connect(&config.redis).map_err(Fatal::failed)?;
    let keys = Keys::new(&config.key_prefix);
    let failed =
        |e: redis::RedisError| Fatal::failed(format!("reading from redis at {}: {e}", config.redis.describe()));
    match command {
        cli::Command::Stats { json } => {
            let stats = inspect::stats(&mut conn, &keys).map_err(failed)?;
            if json {
                println!("{}", stats.to_json());
            } else {
                print!("{}", stats.to_text());
            }
        }
        cli::Command::Peek { topic, count, json } => {
            delayer::validate::name("topic", &topic).map_err(|e| Fatal::failed(e.to_string()))?;
            let jobs = inspect::peek(&mut conn, &keys, &topic, count).map_err(failed)?;
            if json {
                println!("{}", inspect::peek_json(&jobs));
            } else {
                print!("{}", inspect::peek_text(&topic, &jobs));
            }
        }
        cli::Command::Dead { action } => return dead_letters(config, action),
    }
    Ok(())
}

/// `delayer dead list|requeue|purge`, through the SDK (it owns dead.lua).
fn dead_letters(config: &config::Config, action: cli::DeadCommand) -> Result<(), Fatal> {
    let client = config.redis.client().map_err(|e| Fatal::failed(format!("bad redis settings: {e}")))?;
    let pool = delayer::PoolOptions { max_size: 1, ..Default::default() };
    let delayer = delayer::Delayer::with_options(client, &config.key_prefix, &pool);
    let failed = |e: delayer::Error| Fatal::failed(format!("redis at {}: {e}", config.redis.describe()));
    let (which, purge) = match action {
        cli::DeadCommand::List { topic, count, start, json } => {
            let letters = delayer.dead_letters(&topic, start, count).map_err(failed)?;
            if json {
                println!("{}", inspect::dead_json(&letters));
            } else {
                print!("{}", inspect::dead_text(&topic, &letters));
            }
            return Ok(());
        }
        cli::DeadCommand::Requeue(which) => (which, false),
        cli::DeadCommand::Purge(which) => (which, true),
    };
    let ids: Vec<&str> = which.ids.iter().map(String::as_str).collect();
    let ids = (!which.all).then_some(&ids[..]);
    let n = if purge { delayer.purge_dead(&which.topic, ids) } else { delayer.requeue_dead(&which.topic, ids) };
    let verb = if purge { "purged" } else { "re-queued" };
    println!("{verb} {} dead letter(s) of {:?}", n.map_err(failed)?, which.topic);
    Ok(())
}
