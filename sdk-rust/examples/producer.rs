//! Schedules jobs, as an application does when something must happen later.
//!
//! `DELAYER_URL=redis://127.0.0.1:6379/0 cargo run --example producer`

use delayer::{Backoff, Delayer, Error, Job};
use std::time::Duration;

fn main() -> delayer::Result<()> {
    let url = std::env::var("DELAYER_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/0".into());
    // Also rediss:// (TLS), unix:///path, or Delayer::from_conf("delayer.conf").
    let delayer = Delayer::open(&url)?;

    // Close order 42 in 30 minutes, unless it is paid.
    delayer.push("close_order", "order:42", Duration::from_secs(30 * 60))?;
    // A text message in 3 days, with a body, kept for a day once due.
    delayer.push_job(
        &Job::new("sms", "sms:7", Duration::from_secs(3 * 86400))
            .body(r#"{"phone":"+15550100","text":"Your trial ends today"}"#)
            .ready_max_lifetime(Duration::from_secs(86400)),
    )?;
    // Paid: cancel it.
    delayer.remove("order:42")?;
    // For an at-least-once worker (reliable_worker.rs): how often, and how
    // far apart, to try it.
    delayer.push_job(
        &Job::new("sms", "sms:8", Duration::from_secs(60))
            .body("Your parcel is on its way")
            .max_attempts(5) // default 25; 0: no limit
            .backoff(Backoff::exponential(Duration::from_secs(10), Duration::from_secs(600))),
    )?;

    // Ids are global across topics: a push replaces the job holding its id,
    // whatever its topic. To be told instead, push "if absent".
    match delayer.push_job(&Job::new("sms", "sms:7", Duration::from_secs(60)).if_absent()) {
        Ok(due) => println!("sms:7 is due at {due:?}"),
        Err(Error::IdTaken(taken)) => println!("kept the first job: {taken}"),
        Err(e) => return Err(e),
    }
    Ok(())
}
