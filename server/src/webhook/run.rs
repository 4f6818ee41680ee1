//! Running the webhook process: read the file, start one worker per topic,
//! log each failed delivery, stop on SIGTERM or SIGINT.
//!
//! Each topic gets its own [`Worker`] (its `concurrency` and `ttr` are the
//! section's); all share one [`Stopper`], so a signal stops them together:
//! no new jobs are taken, deliveries in flight get until the longest
//! `timeout` (plus a margin) to finish, and what is still running then is
//! released to be delivered again. Redis going away is the workers' to
//! ride out (they reconnect with backoff); it is logged once per outage.

use super::config::{hooks, Hook};
use super::deliver::{Failure, Sender};
use crate::config::{self, Config};
use crate::fatal::Fatal;
use crate::signals::Signals;
use crate::{logging, panics, server};
use delayer::worker::aio::{Task, Worker};
use delayer::worker::{Event, Stopper};
use log::{debug, error, info, warn};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Added to the longest timeout for the grace period at stop: time to ack.
const GRACE_MARGIN: Duration = Duration::from_secs(2);

/// Runs `delayer webhook` with the configuration file at `configuration`
/// (or the default places) until SIGTERM or SIGINT.
pub fn run(configuration: Option<&Path>) -> Result<(), Fatal> {
    let (file, notes) = config::read(configuration)?;
    // [delayer] and [redis] as the server reads them (key prefix, logs,
    // Redis), then the webhook sections.
    let config = Config { notes, ..Config::from_file(&file)? };
    let hooks = hooks(&file)?;
    let log_files = logging::init(&config)?;
    panics::install();
    config.ignored.iter().for_each(|ignored| warn!("{ignored}"));
    config.notes.iter().for_each(|(level, note)| log::log!(*level, "{note}"));
    // The server's target: in sentinel mode deliveries follow a failover.
    let target = config
        .redis
        .target()
        .map_err(|e| Fatal::config(format!("{}: [redis]: cannot use these settings: {e}", config.path.display())))?;
    server::probe_target(&target, &config, false)?;
    let sender = Sender::new().map_err(Fatal::failed)?;

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Fatal::failed(format!("cannot start the runtime: {e}")))?;
    runtime.block_on(async {
        let stopper = Stopper::new();
        // Signal handlers first: a SIGTERM from here on is a clean stop.
        let signals = Signals::register().map_err(|e| Fatal::failed(format!("cannot listen for signals: {e}")))?;
        let stopping = stopper.clone();
        tokio::spawn(async move {
            let name = signals.until_stop(log_files).await;
            info!("{name}: finishing the deliveries in flight, then stopping");
            stopping.stop();
        });
        let delayer = delayer::aio::Delayer::with_target(target, &config.key_prefix)
            .and_then(|d| d.with_layout(config.layout))
            .map_err(|e| Fatal::failed(format!("cannot use redis at {}: {e}", config.redis.describe())))?;
        let grace = hooks.iter().map(|h| h.timeout).max().unwrap_or_default() + GRACE_MARGIN;
        info!(
            "delayer webhook {} starting (pid {}): redis {}, key_prefix {:?}, layout {}, config {}",
            env!("CARGO_PKG_VERSION"),
            std::process::id(),
            config.redis.describe(),
            config.key_prefix,
            if config.layout == delayer::Layout::Topic { "topic" } else { "classic" },
            config.path.display()
        );
        let mut workers = tokio::task::JoinSet::new();
        for hook in hooks {
            info!(
                "webhook {}: delivering to {} (concurrency {}, timeout {} s, ttr {} s)",
                hook.topic,
                hook.target(),
                hook.concurrency,
                hook.timeout.as_secs(),
                hook.ttr.as_secs()
            );
            let topic = hook.topic.clone();
            let worker = worker(hook, delayer.clone(), sender.clone(), grace, stopper.clone());
            workers.spawn(async move { (topic, worker.run().await) });
        }
        let mut failed = None;
        while let Some(done) = workers.join_next().await {
            let problem = match done {
                Ok((_, Ok(()))) => continue,
                Ok((topic, Err(e))) => format!("webhook {topic}: the worker stopped: {e}"),
                Err(e) => format!("a webhook worker ended abnormally: {e}"),
            };
            // One worker down (Redis refused its commands): stop them all,
            // cleanly, and exit non-zero for the supervisor to see.
            error!("{problem}");
            stopper.stop();
            failed.get_or_insert(problem);
        }
        failed.map_or(Ok(()), |problem| Err(Fatal::failed(problem)))
    })?;
    info!("stopped");
    Ok(())
}

/// The worker delivering `hook`'s topic.
fn worker(hook: Hook, delayer: delayer::aio::Delayer, sender: Sender, grace: Duration, stopper: Stopper) -> Worker {
    let hook = Arc::new(hook);
    let log = DeliveryLog { topic: hook.topic.clone(), target: hook.target(), outage: Mutex::new(None) };
    let (concurrency, ttr, topic) = (hook.concurrency, hook.ttr, hook.topic.clone());
    Worker::new(delayer)
        .concurrency(concurrency)
        .ttr(ttr)
        .grace(grace)
        .with_stopper(stopper.clone())
        .hooks(move |event: &Event<'_>| log.event(event))
        .handle(&topic, move |task: Task| {
            let (hook, sender, stopper) = (hook.clone(), sender.clone(), stopper.clone());
            async move {
                // A job handed over after the stop (a wait for jobs already
                // under way then) is not delivered: after SIGTERM no new
                // request goes out. It goes back to be delivered later.
                if stopper.is_stopped() {
                    return Err(Failure::Stopping);
                }
                panics::test_trigger("webhook");
                sender.deliver(&hook, task.id_bytes(), &task.body, task.attempts, task.traceparent.as_deref()).await
            }
        })
}

/// Log lines for one topic's deliveries: one per failure (never the
/// secret, nor the URL's credentials), and Redis outages once each. A
/// delivery's line carries `topic`, `id` and `ms` as fields (`log_format
/// = json`).
struct DeliveryLog {
    topic: String,
    /// The URL without credentials ([`Hook::target`]).
    target: String,
    /// Since when Redis is away: said once, and how long when it is back.
    outage: Mutex<Option<Instant>>,
}

impl DeliveryLog {
    fn event(&self, event: &Event<'_>) {
        let topic = &self.topic;
        match event {
            Event::Failed { delivery, error, elapsed } => {
                let next =
                    if delivery.is_last_attempt() { "moved to dead letters" } else { "retried after its backoff" };
                let of = match delivery.max_attempts {
                    0 => String::new(),
                    max => format!(" of {max}"),
                };
                let ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
                warn!(
                    topic = topic.as_str(), id = delivery.id.as_str(), attempt = delivery.attempts, ms = ms;
                    "webhook {topic}: job {:?} attempt {}{of} to {} failed after {ms} ms: {error}; {next}",
                    delivery.id,
                    delivery.attempts,
                    self.target
                );
            }
            Event::Succeeded { delivery, elapsed } => {
                let ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
                debug!(
                    topic = topic.as_str(), id = delivery.id.as_str(), ms = ms;
                    "webhook {topic}: job {:?} delivered in {ms} ms", delivery.id
                )
            }
            Event::NotHeld { delivery } => warn!(
                "webhook {topic}: job {:?}: its reservation ran out (ttr) before the answer was recorded; it is \
                 delivered again",
                delivery.id
            ),
            Event::ReleasedAtStop { delivery } => {
                warn!("webhook {topic}: job {:?}: still in flight at stop; released to be delivered again", delivery.id)
            }
            // Once per outage, not per retry.
            Event::ConnectionLost { error, retry_in } => {
                let mut outage = self.outage.lock().unwrap_or_else(|e| e.into_inner());
                if outage.is_none() {
                    *outage = Some(Instant::now());
                    warn!("webhook {topic}: lost redis ({error}); retrying every {} ms or so", retry_in.as_millis())
                }
            }
            Event::Reconnected => {
                if let Some(since) = self.outage.lock().unwrap_or_else(|e| e.into_inner()).take() {
                    info!("webhook {topic}: redis answers again after {:.1} s", since.elapsed().as_secs_f64())
                }
            }
            Event::UnsafeEviction { warning, .. } => warn!("webhook {topic}: {warning}"),
            Event::Error { error } => error!("webhook {topic}: redis refused a command: {error}"),
            Event::Stopping => info!("webhook {topic}: stopping: no new jobs, waiting for deliveries in flight"),
            _ => {}
        }
    }
}
