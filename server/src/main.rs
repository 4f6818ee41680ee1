//! `delayer`: the server.
//!
//! It does one thing: on a timer, it moves due job ids from Redis's job pool
//! to their topics' ready queues, in atomic batches (see docs/PROTOCOL.md).
//! Each concern has its own module: the command line (`cli`), the
//! configuration file (`config`), logging (`logging`), the pid file
//! (`pidfile`), the Lua script (`scripts`), one tick of moving (`mover`),
//! the timer around it (`timer`), and read-only views for operators
//! (`inspect`).

mod cli;
mod config;
mod inspect;
mod logging;
mod mover;
mod pidfile;
mod scripts;
mod telemetry;
mod timer;
mod wake;

use clap::Parser;
use delayer::connection::{build_pool, Manager};
use delayer::Keys;
use log::{error, info, warn};
use r2d2::ManageConnection;
use std::process::ExitCode;
use std::sync::Arc;

/// A configuration the server cannot use.
const EXIT_CONFIG: u8 = 2;
/// Anything else that keeps it from running.
const EXIT_FAILURE: u8 = 1;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let loaded = config::locate(cli.configuration.as_deref()).and_then(|path| config::Config::load(&path));
    let config = match loaded {
        Ok(c) => c,
        Err(e) => return fail(EXIT_CONFIG, &e.to_string()),
    };
    if let Some(command) = cli.command {
        return match run_command(&config, command) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(EXIT_FAILURE, &e),
        };
    }
    // Before daemonizing: a refusal must reach the operator's terminal.
    let mut pid_file = match config.pid.as_deref().map(pidfile::PidFile::lock).transpose() {
        Ok(p) => p,
        Err(e) => return fail(EXIT_FAILURE, &e),
    };
    let log_files = match logging::init(&config, !cli.daemon) {
        Ok(files) => files,
        Err(e) => return fail(EXIT_CONFIG, &format!("{}: {e}", config.path.display())),
    };
    if cli.daemon {
        if let Err(e) = daemonize::Daemonize::new().start() {
            return fail(EXIT_FAILURE, &format!("cannot daemonize: {e}"));
        }
    }
    if let Some(Err(e)) = pid_file.as_mut().map(pidfile::PidFile::write_pid) {
        return fail(EXIT_FAILURE, &e);
    }
    let code = match serve(&config, log_files) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(EXIT_FAILURE, &e),
    };
    drop(pid_file);
    code
}

fn fail(code: u8, message: &str) -> ExitCode {
    if log::log_enabled!(log::Level::Error) {
        error!("{message}");
    } else {
        eprintln!("delayer: {message}");
    }
    ExitCode::from(code)
}

/// `delayer stats` / `peek` / `dead ...`: print and exit.
fn run_command(config: &config::Config, command: cli::Command) -> Result<(), String> {
    let mut conn = inspect::connect(&config.redis)?;
    let keys = Keys::new(&config.key_prefix);
    let failed = |e: redis::RedisError| format!("reading from redis at {}: {e}", config.redis.describe());
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
            delayer::validate::name("topic", &topic).map_err(|e| e.to_string())?;
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
fn dead_letters(config: &config::Config, action: cli::DeadCommand) -> Result<(), String> {
    let client = config.redis.client().map_err(|e| format!("bad redis settings: {e}"))?;
    let pool = delayer::PoolOptions { max_size: 1, ..Default::default() };
    let delayer = delayer::Delayer::with_options(client, &config.key_prefix, &pool);
    let failed = |e: delayer::Error| format!("redis at {}: {e}", config.redis.describe());
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

/// Runs the timer until SIGINT or SIGTERM.
fn serve(config: &config::Config, log_files: logging::LogFiles) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async {
        // Signal handlers first: a SIGTERM from here on is a clean stop.
        let signals = Signals::register().map_err(|e| format!("cannot listen for signals: {e}"))?;
        info!(
            "delayer {} starting: redis {}, key_prefix {:?}, timer_interval {} ms, batch_size {}, config {}",
            env!("CARGO_PKG_VERSION"),
            config.redis.describe(),
            config.key_prefix,
            config.timer_interval.as_millis(),
            config.batch_size,
            config.path.display()
        );
        let client = config.redis.client().map_err(|e| format!("bad redis settings: {e}"))?;
        let pool = build_pool(client.clone(), &config.pool);
        probe(client.clone(), config)?;
        if let Some(addr) = config.metrics_addr {
            telemetry::serve(addr)?;
            info!("serving metrics on http://{addr}/metrics");
        }
        let stop = Arc::new(timer::Stop::default());
        let mover = Arc::new(mover::Mover::new(
            pool,
            Keys::new(&config.key_prefix),
            config.batch_size,
            config.metrics_addr.is_some(),
        ));
        let keys = Keys::new(&config.key_prefix);
        let wakes = wake::listen(client, keys.wake(), config.pool.connect_timeout, stop.clone());
        tokio::spawn(signals.handle(stop.clone(), log_files));
        timer::run(mover, config.timer_interval, stop, Some(wakes)).await;
        Ok::<(), String>(())
    })?;
    info!("stopped");
    Ok(())
}

/// Fails fast on credentials Redis refuses (retrying cannot fix them);
/// an unreachable Redis is only reported, and waited for.
fn probe(client: redis::Client, config: &config::Config) -> Result<(), String> {
    let manager = Manager::new(client, config.pool.connect_timeout, config.pool.io_timeout);
    match manager.connect() {
        Ok(_) => Ok(()),
        Err(e)
            if e.kind() == redis::ErrorKind::AuthenticationFailed
                || matches!(e.code(), Some("WRONGPASS" | "NOAUTH" | "NOPERM")) =>
        {
            Err(format!("redis at {} refused our credentials: {e}", config.redis.describe()))
        }
        Err(e) => {
            warn!("redis at {} is not reachable yet ({e}); will keep trying", config.redis.describe());
            Ok(())
        }
    }
}

/// SIGTERM and SIGINT (stop), SIGHUP (reopen the log files), listened for.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    fn register() -> std::io::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    async fn handle(mut self, stop: Arc<timer::Stop>, log_files: logging::LogFiles) {
        let name = loop {
            tokio::select! {
                _ = self.term.recv() => break "SIGTERM",
                _ = self.int.recv() => break "SIGINT",
                _ = self.hup.recv() => {
                    let failed = log_files.reopen();
                    if failed.is_empty() {
                        info!("SIGHUP: log files reopened");
                    } else {
                        error!("SIGHUP: cannot reopen {}", failed.join(", "));
                    }
                }
            }
        };
        info!("{name}: finishing the batch in flight, then stopping");
        stop.request();
    }
}
