//! `failover-loss`: how many acknowledged pushes a Sentinel failover loses.
//!
//! Redis replicates asynchronously, so a push the master acknowledged may
//! not have reached its replica when the master dies. This starts a Sentinel
//! deployment (testkit: 1 master, 1 replica, 3 sentinels on loopback ports),
//! pushes from several threads as fast as they go through the Rust SDK in
//! sentinel mode, recording every push that returned Ok, kills the master
//! with SIGKILL, keeps pushing through the failover, and then counts the
//! recorded ids missing from the promoted replica's pool. With `--durable-ms`
//! the client is `durable(...)`: a push is Ok only once a replica has it
//! (WAIT 1), so none should be missing; its cost shows in the push rate.
//!
//! usage: failover-loss [--threads N] [--secs N] [--durable-ms MS] [--runs N]

use delayer::conf::RedisSettings;
use delayer::sentinel::{parse_nodes, SentinelSettings};
use delayer::{Delayer, Error, PoolOptions};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use testkit::sentinel::{Sentinels, MASTER_NAME};

struct Options {
    threads: usize,
    secs: u64,
    durable_ms: Option<u64>,
    runs: usize,
}

fn options() -> Result<Options, String> {
    let mut o = Options { threads: 8, secs: 3, durable_ms: None, runs: 1 };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> Result<u64, String> {
            args.next().and_then(|v| v.parse().ok()).ok_or_else(|| format!("{name} needs a number"))
        };
        match a.as_str() {
            "--threads" => o.threads = num("--threads")?.max(1) as usize,
            "--secs" => o.secs = num("--secs")?,
            "--durable-ms" => o.durable_ms = Some(num("--durable-ms")?.max(1)),
            "--runs" => o.runs = num("--runs")?.max(1) as usize,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(o)
}

/// One run's numbers.
struct Run {
    acked: usize,
    acked_before_kill: usize,
    rate_before_kill: f64,
    not_replicated: usize,
    errors: usize,
    missing: usize,
}

fn run(o: &Options) -> Run {
    let mut deployment = Sentinels::start();
    let settings = RedisSettings {
        sentinel: Some(SentinelSettings {
            nodes: parse_nodes(&deployment.nodes_setting()).expect("nodes"),
            master_name: MASTER_NAME.into(),
            username: None,
            password: None,
            tls: false,
        }),
        ..RedisSettings::default()
    };
    let pool = PoolOptions { max_size: o.threads as u32, ..PoolOptions::default() };
    let mut client = Delayer::with_target(settings.target().expect("target"), "loss:", &pool);
    if let Some(ms) = o.durable_ms {
        client = client.durable(Duration::from_millis(ms));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let killed = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..o.threads)
        .map(|t| {
            let (client, stop, killed) = (client.clone(), stop.clone(), killed.clone());
            thread::spawn(move || {
                let (mut acked, mut before, mut not_replicated, mut errors) = (Vec::new(), 0usize, 0usize, 0usize);
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let id = format!("{t}-{n}");
                    match client.push("loss", &id, Duration::from_secs(3600)) {
                        Ok(_) => {
                            acked.push(id);
                            if !killed.load(Ordering::Relaxed) {
                                before += 1;
                            }
                        }
                        Err(Error::NotReplicated(_)) => not_replicated += 1,
                        Err(_) => {
                            errors += 1;
                            thread::sleep(Duration::from_millis(5));
                        }
                    }
                }
                (acked, before, not_replicated, errors)
            })
        })
        .collect();
    let started = Instant::now();
    thread::sleep(Duration::from_secs(o.secs));
    killed.store(true, Ordering::Relaxed);
    let elapsed_before = started.elapsed().as_secs_f64();
    let new_master = deployment.kill_master();
    // Keep pushing on the new master a little, so the clients prove they follow.
    thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    let mut r = Run { acked: 0, acked_before_kill: 0, rate_before_kill: 0.0, not_replicated: 0, errors: 0, missing: 0 };
    let mut ids = Vec::new();
    for w in workers {
        let (acked, before, not_replicated, errors) = w.join().expect("pusher");
        r.acked += acked.len();
        r.acked_before_kill += before;
        r.not_replicated += not_replicated;
        r.errors += errors;
        ids.extend(acked);
    }
    r.rate_before_kill = r.acked_before_kill as f64 / elapsed_before;
    let mut conn = deployment.connection(new_master);
    for chunk in ids.chunks(10_000) {
        let scores: Vec<Option<f64>> =
            redis::cmd("ZMSCORE").arg("loss:job_pool").arg(chunk).query(&mut conn).expect("ZMSCORE");
        r.missing += scores.iter().filter(|s| s.is_none()).count();
    }
    r
}

fn main() {
    let o = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("failover-loss: {e}\nusage: failover-loss [--threads N] [--secs N] [--durable-ms MS] [--runs N]");
            std::process::exit(2);
        }
    };
    let mode = o.durable_ms.map_or("plain push".to_string(), |ms| format!("durable push (WAIT 1 {ms})"));
    println!("{mode}, {} threads, master killed after {} s", o.threads, o.secs);
    for i in 1..=o.runs {
        let r = run(&o);
        println!(
            "run {i}: acked {} ({} before the kill, {:.0} pushes/s), lost {} acked pushes, {} not replicated in time, \
             {} failed calls during the failover",
            r.acked, r.acked_before_kill, r.rate_before_kill, r.missing, r.not_replicated, r.errors
        );
    }
}
