//! What the kill -9 tests share (chaos.rs, chaos_flow.rs): each is its own
//! main (`harness = false`, so the same binary is orchestrator and worker),
//! and answers the test harness's flags the way the harness would.

use std::process::ExitCode;
use std::time::{Duration, Instant};
use testkit::{DelayerProcess, RedisServer};

/// xorshift64*: enough randomness for choosing kill times and outcomes,
/// without a dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Plain `cargo test` passes harness flags (--nocapture, filters, --list):
/// `Some(exit)` when the test is not to run (a filter that does not name
/// `name` skips it; `--list` lists it), `None` to run it. Flags that take a
/// value (`--test-threads 2`) are not filters.
pub fn harness_says(args: &[String], name: &str) -> Option<ExitCode> {
    let mut filters = Vec::new();
    let mut rest = args.iter().skip(1);
    while let Some(a) = rest.next() {
        if matches!(a.as_str(), "--test-threads" | "--skip" | "--color" | "--format" | "--logfile" | "-Z") {
            rest.next();
        } else if !a.starts_with('-') {
            filters.push(a);
        }
    }
    if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
        return Some(ExitCode::SUCCESS);
    }
    if args.iter().any(|a| a == "--list") {
        println!("{name}: test");
        return Some(ExitCode::SUCCESS);
    }
    None
}

/// What [`kill_at_random`] did.
pub struct Kills {
    pub workers: u32,
    pub servers: u32,
    pub redis: u32,
}

/// For `chaos_for`: a kill every 50-300 ms, Redis crashed (and restarted
/// from its files) at a third and two thirds of the time, else one server in
/// `server_one_in` kills killed -9 and started again on `conf`, else a worker
/// (`kill_worker` is given the random source to pick one).
pub fn kill_at_random(
    rng: &mut Rng,
    chaos_for: Duration,
    redis: &mut RedisServer,
    servers: &mut [DelayerProcess],
    conf: &str,
    server_one_in: u64,
    mut kill_worker: impl FnMut(&mut Rng) -> Result<(), String>,
) -> Result<Kills, String> {
    let mut kills = Kills { workers: 0, servers: 0, redis: 0 };
    let started = Instant::now();
    let redis_crash_at = [chaos_for / 3, chaos_for * 2 / 3];
    while started.elapsed() < chaos_for {
        std::thread::sleep(Duration::from_millis(50 + rng.below(250)));
        let crashes = kills.redis as usize;
        if crashes < redis_crash_at.len() && started.elapsed() >= redis_crash_at[crashes] {
            redis.crash_and_restart();
            kills.redis += 1;
        } else if rng.below(server_one_in) == 0 {
            let i = rng.below(servers.len() as u64) as usize;
            servers[i].signal("KILL");
            servers[i] = DelayerProcess::start(env!("CARGO_BIN_EXE_delayer"), conf);
            kills.servers += 1;
        } else {
            kill_worker(rng)?;
            kills.workers += 1;
        }
    }
    Ok(kills)
}
