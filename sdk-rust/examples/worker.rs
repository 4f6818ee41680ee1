//! A worker: takes the jobs of topic "sms" as they come due, for ever.
//!
//! A Redis restart or a network hiccup reaches it as `Error::Connection`:
//! it waits a second and carries on, and the next call reconnects. Any
//! other error is a bug or a misconfiguration, and stops it.
//!
//! `DELAYER_URL=redis://127.0.0.1:6379/0 cargo run --example worker`

use delayer::{Delayer, Error, Message};
use std::time::Duration;

fn main() -> delayer::Result<()> {
    let url = std::env::var("DELAYER_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/0".into());
    let delayer = Delayer::open(&url)?;
    loop {
        match delayer.bpop("sms", Duration::from_secs(5)) {
            Ok(Some(job)) => send_sms(&job),
            Ok(None) => {} // nothing came due within 5 s: wait again
            Err(e @ Error::Connection(_)) => {
                eprintln!("worker: {e}; trying again in 1 s");
                std::thread::sleep(Duration::from_secs(1));
            }
            Err(e) => return Err(e),
        }
    }
}

/// The work. A popped job is gone from Redis: it is done at most once.
fn send_sms(job: &Message) {
    println!("sent {}: {}", job.id, job.body_str().unwrap_or("<not UTF-8>"));
}
