//! A worker that runs itself: a handler per topic, up to 20 jobs at once, at
//! least once. The Worker reserves jobs, acks those whose handler returns
//! `Ok`, releases the others to run again after their backoff (the error's
//! text kept as the job's last error; a dead letter after the last attempt),
//! keeps long jobs reserved, waits out Redis restarts, and on SIGTERM or
//! SIGINT lets running handlers finish before it exits.
//!
//! `DELAYER_URL=redis://127.0.0.1:6379/0 cargo run --example task_worker`

use delayer::worker::aio::{shutdown_signal, Task, Worker};
use delayer::worker::Event;
use std::time::Duration;

#[tokio::main]
async fn main() -> delayer::Result<()> {
    let url = std::env::var("DELAYER_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/0".into());
    let delayer = delayer::aio::Delayer::open(&url)?;
    Worker::new(delayer)
        .concurrency(20) // handlers at once, all topics together
        .ttr(Duration::from_secs(30)) // a handler running longer is touched
        .grace(Duration::from_secs(10)) // on a stop: time left to finish
        .handle("sms", send_sms)
        .hooks(log)
        .run_until(shutdown_signal())
        .await
}

/// The work: make it idempotent, a job may come more than once.
async fn send_sms(job: Task) -> Result<(), String> {
    let text = job.body_str().filter(|t| !t.is_empty()).ok_or("no text")?;
    println!("sent {}: {text}", job.id);
    Ok(())
}

/// Logging (or metrics): every event the worker reports.
fn log(event: &Event<'_>) {
    match event {
        Event::Failed { delivery: job, error, .. } => {
            eprintln!("worker: {} failed ({error}), attempt {} of {}", job.id, job.attempts, job.max_attempts)
        }
        Event::ConnectionLost { error, retry_in } => eprintln!("worker: {error}; trying again in {retry_in:?}"),
        Event::Reconnected => eprintln!("worker: Redis answers again"),
        Event::UnsafeEviction { warning, .. } => eprintln!("worker: {warning}"),
        Event::Stopping => eprintln!("worker: stopping"),
        _ => {}
    }
}
