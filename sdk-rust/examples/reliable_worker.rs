//! An at-least-once worker: a job is acked when done, released to be tried
//! again later when its work fails (as often and as far apart as it was
//! pushed with: see producer.rs), and handed out again by the server if the
//! worker dies holding it.
//!
//! A Redis restart or a network hiccup reaches it as `Error::Connection`:
//! it waits a second and carries on, and the next call reconnects (a job
//! whose ack was lost is handed out again after its ttr). Any other error is
//! a bug or a misconfiguration, and stops it.
//!
//! `DELAYER_URL=redis://127.0.0.1:6379/0 cargo run --example reliable_worker`

use delayer::{Delayer, Error, Reserved};
use std::time::Duration;

fn main() -> delayer::Result<()> {
    let url = std::env::var("DELAYER_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/0".into());
    let delayer = Delayer::open(&url)?;
    loop {
        match work_once(&delayer) {
            Ok(()) => {}
            Err(e @ Error::Connection(_)) => {
                eprintln!("worker: {e}; trying again in 1 s");
                std::thread::sleep(Duration::from_secs(1));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Waits up to 5 s for a job; has 30 s (its ttr) to finish it before it is
/// handed out again.
fn work_once(delayer: &Delayer) -> delayer::Result<()> {
    let Some(job) = delayer.breserve("sms", Duration::from_secs(30), Duration::from_secs(5))? else {
        return Ok(()); // nothing came due within 5 s
    };
    match send_sms(&job) {
        Ok(()) => delayer.ack(&job)?,
        Err(why) => {
            eprintln!("worker: {} failed ({why}), attempt {} of {}", job.id, job.attempts, job.max_attempts);
            delayer.release(&job, None)? // again after its backoff; a dead letter after the last attempt
        }
    };
    Ok(())
}

/// The work: make it idempotent, a job may come more than once.
fn send_sms(job: &Reserved) -> Result<(), &'static str> {
    let text = job.body_str().filter(|t| !t.is_empty()).ok_or("no text")?;
    println!("sent {}: {text}", job.id);
    Ok(())
}
