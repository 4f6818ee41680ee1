//! `layout-push`: what the per-topic layout costs a pushing client.
//!
//! In the per-topic layout a push is the script call plus the index write
//! (`ZADD <prefix>due LT CH`, `SADD <prefix>topics`: one more round trip per
//! push call, and one per topic per push_many call). This pushes through the
//! Rust SDK on a redis-server of its own, in both layouts, alternating for
//! `--rounds` rounds, and prints each rate and the per-topic / classic ratio
//! of the same round: single pushes from one thread, then push_many of
//! 100-job batches over 10 topics.
//!
//! usage: layout-push [--jobs N] [--rounds N]   (N: push_many jobs; single pushes: N / 20)

use delayer::{Delayer, Job, Layout};
use std::time::{Duration, Instant};
use testkit::RedisServer;

const TOPICS: u64 = 10;

fn arg(name: &str, default: u64) -> Result<u64, String> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.replace('_', "").parse().ok())
            .filter(|n| *n > 0)
            .ok_or(format!("{name} needs a positive number")),
    }
}

/// Jobs per second of `n` single pushes, then of `n * 20` jobs by push_many.
fn round(redis: &RedisServer, layout: Layout, n: u64) -> Result<(f64, f64), delayer::Error> {
    redis::cmd("FLUSHALL").query::<()>(&mut redis.connection())?;
    let d = Delayer::open(&redis.url())?.with_layout(layout)?;
    let delay = Duration::from_secs(3600);
    let started = Instant::now();
    for i in 0..n {
        d.push(&format!("t{}", i % TOPICS), &format!("s{i}"), delay)?;
    }
    let single = n as f64 / started.elapsed().as_secs_f64();
    let jobs: Vec<Job> =
        (0..n * 20).map(|i| Job::new(format!("t{}", (i / 100) % TOPICS), format!("m{i}"), delay)).collect();
    let started = Instant::now();
    for chunk in jobs.chunks(1000) {
        d.push_many(chunk)?;
    }
    let many = jobs.len() as f64 / started.elapsed().as_secs_f64();
    Ok((single, many))
}

fn main() {
    let (jobs, rounds) = match (arg("--jobs", 200_000), arg("--rounds", 3)) {
        (Ok(j), Ok(r)) => (j, r),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("layout-push: {e}\nusage: layout-push [--jobs N] [--rounds N]");
            std::process::exit(2);
        }
    };
    let redis = RedisServer::start();
    let n = (jobs / 20).max(1);
    println!("{n} single pushes, {} by push_many (100-job runs over {TOPICS} topics), per layout and round", n * 20);
    for r in 1..=rounds {
        let measured = round(&redis, Layout::Classic, n).and_then(|c| round(&redis, Layout::Topic, n).map(|t| (c, t)));
        match measured {
            Ok(((cs, cm), (ts, tm))) => println!(
                "round {r}: push {cs:.0} vs {ts:.0} jobs/s (topic/classic {:.2}); push_many {cm:.0} vs {tm:.0} jobs/s ({:.2})",
                ts / cs,
                tm / cm
            ),
            Err(e) => {
                eprintln!("layout-push: {e}");
                std::process::exit(1);
            }
        }
    }
}
