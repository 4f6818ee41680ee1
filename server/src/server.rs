//! Running the server: the checks before it starts, detaching in daemon
//! mode, then the timer until SIGTERM or SIGINT.
//!
//! Everything that can keep it from running is checked first, in the
//! foreground, so daemon and foreground refuse alike and the reason reaches
//! the operator's terminal: the configuration file (exit 2), the pid file's
//! lock, the log files, and Redis's answer to our credentials (exit 1).

use crate::config::Config;
use crate::daemon::{self, Launcher};
use crate::fatal::Fatal;
#[cfg(feature = "http")]
use crate::http;
use crate::pidfile::PidFile;
use crate::signals::Signals;
use crate::{credentials, logging, mover, panics, readiness, summary, timer, topic_mover, wake};
use delayer_protocol::connection::Manager;
use delayer_protocol::keys::{Keys, Layout, TopicKeys};
use delayer_protocol::target::Target;
use log::{info, warn};
use std::path::Path;
use std::sync::Arc;

/// Runs the server with the configuration file at `configuration` (or the
/// default places), as a daemon when `daemon` is set. Returns when stopped
/// by a signal; in daemon mode, the launching process never returns.
pub fn run(configuration: Option<&Path>, daemon: bool) -> Result<(), Fatal> {
    let config = Config::load(configuration)?;
    let mut pid_file = config.pid.as_deref().map(PidFile::lock).transpose()?;
    let log_files = logging::init(&config)?;
    panics::install();
    // Delayer 1.x keys we let through unused: said, not silently dropped.
    config.ignored.iter().for_each(|ignored| warn!("{ignored}"));
    config.notes.iter().for_each(|(level, note)| log::log!(*level, "{note}"));
    // In sentinel mode the target asks the sentinels at every connection,
    // so the mover and the wake-up listener follow a failover.
    let target = config
        .redis
        .target()
        .map_err(|e| Fatal::config(format!("{}: [redis]: cannot use these settings: {e}", config.path.display())))?;
    probe_target(&target, &config, daemon)?;
    if config.require_noeviction {
        require_noeviction(&target, &config)?;
    }

    let mut launcher = if daemon { daemon::detach()? } else { Launcher::foreground() };
    let served = pid_file
        .as_mut()
        .map_or(Ok(()), PidFile::write_pid)
        .and_then(|()| serve(&config, target, log_files, &mut launcher));
    if let Err(e) = &served {
        launcher.failed(e);
    }
    // The pid file goes with a clean stop (it is removed on drop).
    drop(pid_file);
    served
}

/// Fails fast on credentials Redis refuses (retrying cannot fix them). An
/// unreachable Redis is waited for in the foreground (a supervisor may start
/// us first); a daemon is not started without it, since nobody would see it
/// wait. `target`: a fixed Redis or the sentinels' master.
pub fn probe_target(target: &Target, config: &Config, daemon: bool) -> Result<(), Fatal> {
    let timeout = config.pool.connect_timeout;
    let manager = Manager::with_target(target.clone(), timeout, Some(timeout));
    let answer = manager.connect().and_then(|mut conn| redis::cmd("PING").query::<()>(&mut conn));
    let answer = answer.map_err(|e| target.explain(e, timeout));
    let redis = config.redis.describe();
    match answer {
        Ok(()) => Ok(()),
        Err(e) if credentials::refused(&e) => {
            Err(Fatal::failed(credentials::refused_message(&redis, &e, &credentials::Source::File(&config.path))))
        }
        // Not an outage: no wait will make it work.
        Err(e) if e.kind() == redis::ErrorKind::InvalidClientConfig => {
            Err(Fatal::config(format!("{}: [redis]: {e}", config.path.display())))
        }
        Err(e) if daemon => Err(Fatal::failed(format!(
            "cannot reach redis at {redis}: {e}; not starting the daemon (in the foreground, the server waits for \
             Redis)"
        ))),
        Err(e) => {
            warn!("redis at {redis} is not reachable yet ({e}); will keep trying");
            Ok(())
        }
    }
}

/// `[redis] require_noeviction`: refuses to start (exit 1) unless Redis's
/// maxmemory-policy is `noeviction`, read now (so Redis must answer now,
/// in the foreground too: the policy cannot be waited for).
fn require_noeviction(target: &Target, config: &Config) -> Result<(), Fatal> {
    let timeout = config.pool.connect_timeout;
    let mut conn = Manager::with_target(target.clone(), timeout, Some(timeout)).connect().map_err(|e| {
        Fatal::failed(format!(
            "cannot reach redis at {} to read its maxmemory-policy ([redis] require_noeviction is set): {e}",
            config.redis.describe()
        ))
    })?;
    crate::eviction::required(&mut conn).map_err(|why| Fatal::failed(format!("{why} ({})", config.path.display())))
}

/// Runs the timer until SIGINT or SIGTERM; tells the launcher once running.
fn serve(config: &Config, target: Target, log_files: logging::LogFiles, launcher: &mut Launcher) -> Result<(), Fatal> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Fatal::failed(format!("cannot start the runtime: {e}")))?;
    runtime.block_on(async {
        // Signal handlers first: a SIGTERM from here on is a clean stop.
        let signals = Signals::register().map_err(|e| Fatal::failed(format!("cannot listen for signals: {e}")))?;
        info!(
            "delayer {} starting (pid {}): redis {}, key_prefix {:?}, layout {}, timer_interval {} ms, batch_size {}, \
             config {}",
            env!("CARGO_PKG_VERSION"),
            std::process::id(),
            config.redis.describe(),
            config.key_prefix,
            if config.layout == Layout::Topic { "topic" } else { "classic" },
            config.timer_interval.as_millis(),
            config.batch_size,
            config.path.display()
        );
        // The probes of both listeners.
        readiness::init(target.clone(), config.redis.describe(), config.timer_interval);
        #[cfg(feature = "http")]
        if let Some(addr) = config.metrics_addr {
            http::metrics::serve(addr, config.metrics_limits).await.map_err(Fatal::failed)?;
            info!("serving metrics on http://{addr}/metrics");
            // The per-topic gauges, read on a thread of their own.
            crate::telemetry::watch_topics(
                target.clone(),
                &delayer_protocol::keys::Names::new(&config.key_prefix, config.layout),
            );
        }
        #[cfg(feature = "http")]
        if let Some(settings) = &config.http {
            // Through the target, so in sentinel mode the API follows a failover.
            let names = delayer_protocol::keys::Names::new(&config.key_prefix, config.layout);
            let addr = http::serve(settings, target.clone(), &names).await.map_err(Fatal::failed)?;
            info!("serving the HTTP API and dashboard on http://{addr}/");
        }
        // Every server's moves go into the dashboard's history in Redis.
        #[cfg(feature = "http")]
        let history = format!("{}history", config.key_prefix);
        #[cfg(feature = "http")]
        http::shared::start(target.clone(), history, config.pool.connect_timeout, config.pool.io_timeout);
        let stop = Arc::new(timer::Stop::default());
        let keys = Keys::new(&config.key_prefix);
        // The wake-up listener starts a thread: only after detaching.
        // The announcements the listener hears: the per-topic mover's index,
        // the classic mover's paused and limited topics.
        let announced = Arc::new(match config.layout {
            Layout::Topic => wake::Announced::default(),
            Layout::Classic => wake::Announced::classic(),
        });
        let wakes = wake::listen(
            target.clone(),
            keys.wake(),
            config.pool.connect_timeout,
            stop.clone(),
            Some(announced.clone()),
        );
        let manager = Manager::with_target(target, config.pool.connect_timeout, config.pool.io_timeout);
        // Per-job lateness feeds the metrics and the dashboard's chart.
        #[cfg(feature = "http")]
        let lateness = config.metrics_addr.is_some() || config.http.is_some();
        #[cfg(not(feature = "http"))]
        let lateness = false;
        let mover: Arc<dyn mover::Tick> = match config.layout {
            Layout::Classic => Arc::new(mover::Mover::new(
                manager,
                config.pool.max_lifetime,
                keys,
                config.batch_size,
                lateness,
                announced,
            )),
            Layout::Topic => Arc::new(topic_mover::TopicMover::new(
                manager,
                config.pool.max_lifetime,
                TopicKeys::new(&config.key_prefix),
                config.batch_size,
                lateness,
                announced,
            )),
        };
        let stopping = stop.clone();
        tokio::spawn(async move {
            let name = signals.until_stop(log_files).await;
            info!("{name}: finishing the batch in flight, then stopping");
            stopping.request();
        });
        // What moved, said at info every minute (each batch at debug).
        tokio::spawn(summary::every());
        launcher.ready();
        timer::run(mover, config.timer_interval, stop, Some(wakes)).await;
        summary::flush();
        Ok::<(), Fatal>(())
    })?;
    info!("stopped");
    Ok(())
}
