//! Pushes a job due in two seconds and waits for it, as a consumer would.
//!
//! Needs a Redis and a running `delayer` server using the same settings:
//! `cargo run --example quickstart -- delayer.conf` (or a redis:// URL).

use delayer::{Delayer, Job};
use std::time::{Duration, Instant};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let target = std::env::args().nth(1).unwrap_or_else(|| "delayer.conf".to_string());
    let delayer = if target.starts_with("redis://") { Delayer::open(&target)? } else { Delayer::from_conf(&target)? };

    let id = format!("demo-{}", std::process::id());
    let started = Instant::now();
    delayer.push_job(&Job::new("demo", &id, Duration::from_secs(2)).body("hello from Delayer"))?;
    println!("pushed job {id} to topic \"demo\", due in 2 s");

    match delayer.bpop("demo", Duration::from_secs(10))? {
        Some(job) => {
            println!(
                "popped job {} after {:.3} s: {}",
                job.id,
                started.elapsed().as_secs_f64(),
                job.body_str().unwrap_or("<binary>")
            );
            Ok(())
        }
        None => Err("no job within 10 s: is the delayer server running with the same settings?".into()),
    }
}
