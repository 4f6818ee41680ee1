//! Drain: a backlog of due jobs moved by the real server, and the same move
//! done by the bare script (the limit), with PING round trips meanwhile.

use crate::redisx::{self, Pinger};
use crate::stats::Summary;
use crate::sys;
use delayer::Delayer;
use std::time::{Duration, Instant};
use testkit::{DelayerProcess, RedisServer};

pub const TOPICS: usize = 10;

pub fn topics() -> Vec<String> {
    (0..TOPICS).map(|i| format!("drain{i}")).collect()
}

/// The bare script's run over one backlog.
pub struct Bare {
    pub n: u64,
    pub secs: f64,
    pub batches: u64,
    pub evalsha_usec: u64,
    pub ping_ms: Summary,
}

impl Bare {
    pub fn rate(&self) -> f64 {
        self.n as f64 / self.secs
    }
}

/// The server's run over one backlog.
pub struct Drain {
    pub n: u64,
    /// From spawning the server to every id in its ready queue.
    pub secs: f64,
    /// From the first id leaving the pool to every id in its ready queue.
    pub secs_moving: f64,
    pub fill_secs: f64,
    pub rss_peak_kb: u64,
    pub cpu_secs: f64,
    pub threads: u64,
    pub evalsha_calls: u64,
    pub evalsha_usec: u64,
    pub ping_ms: Summary,
    /// Oversleep of 1 ms sleeps in this process meanwhile: machine noise.
    pub jitter_ms: Summary,
}

impl Drain {
    pub fn rate(&self) -> f64 {
        self.n as f64 / self.secs
    }
}

fn check_ready(conn: &mut redis::Connection, n: u64) {
    let (pool, ready) = redisx::where_are(conn, &topics());
    assert!(pool == 0 && ready == n, "after the move: pool {pool}, ready {ready}, expected 0 / {n}");
}

/// The bare limit: fill `n`, then move.lua in a tight loop from here.
pub fn bare(redis: &RedisServer, d: &Delayer, n: u64, ping: bool) -> Bare {
    let mut conn = redis.connection();
    redisx::reset(&mut conn);
    redisx::fill(d, "b", n as usize, &topics());
    redisx::resetstat(&mut conn);
    let mut mover = redis.connection();
    let pinger = ping.then(|| Pinger::start(&redis.url()));
    let from = Instant::now();
    let (taken, batches, took) = redisx::bare_move_all(&mut mover);
    let to = Instant::now();
    let ping_ms = pinger.map(|p| Summary::of(p.finish(from, to))).unwrap_or_default();
    assert_eq!(taken, n, "the bare script took {taken} ids, expected {n}");
    check_ready(&mut conn, n);
    let evalsha_usec = redisx::commandstats(&mut conn).get("evalsha").map(|s| s.usec).unwrap_or(0);
    Bare { n, secs: took.as_secs_f64(), batches, evalsha_usec, ping_ms }
}

/// The real server at default settings over a backlog of `n` due jobs.
pub fn server(redis: &RedisServer, d: &Delayer, bin: &str, n: u64, ping: bool) -> Drain {
    let mut conn = redis.connection();
    redisx::reset(&mut conn);
    let fill = redisx::fill(d, "s", n as usize, &topics());
    redisx::resetstat(&mut conn);
    let topics = topics();
    // Default settings, spelled out: timer_interval 1000 ms, batch_size 1000.
    let conf = testkit::server_conf(redis.port(), 1000, "batch_size = 1000");
    let pinger = ping.then(|| Pinger::start(&redis.url()));
    let jitter = ping.then(redisx::Jitter::start);
    let start = Instant::now();
    let mut process = DelayerProcess::start(bin, &conf);
    let pid = process.pid();
    let mut first_move = None;
    let deadline = Duration::from_secs(600);
    let end = loop {
        std::thread::sleep(Duration::from_millis(2));
        let (pool, ready) = redisx::where_are(&mut conn, &topics);
        let now = Instant::now();
        if first_move.is_none() && pool < n {
            first_move = Some(now);
        }
        if pool == 0 && ready == n {
            break now;
        }
        if !process.is_running() {
            panic!("the delayer server exited during the drain:\n{}", process.output());
        }
        assert!(now - start < deadline, "drain of {n} did not finish in {deadline:?}: pool {pool}, ready {ready}");
    };
    // Read before stopping: the numbers are the drain's.
    let rss_peak_kb = sys::status_kb(pid, "VmHWM").unwrap_or(0);
    let cpu_secs = sys::cpu_ticks(pid).unwrap_or(0) as f64 / sys::clk_tck();
    let threads = sys::threads(pid).unwrap_or(0);
    let ping_ms = pinger.map(|p| Summary::of(p.finish(start, end))).unwrap_or_default();
    let jitter_ms = jitter.map(|j| Summary::of(j.finish())).unwrap_or_default();
    let stats = redisx::commandstats(&mut conn);
    let evalsha = stats.get("evalsha").copied().unwrap_or_default();
    process.signal("TERM");
    let _ = process.wait_exit(Duration::from_secs(10));
    Drain {
        n,
        secs: (end - start).as_secs_f64(),
        secs_moving: (end - first_move.unwrap_or(start)).as_secs_f64(),
        fill_secs: fill.as_secs_f64(),
        rss_peak_kb,
        cpu_secs,
        threads,
        evalsha_calls: evalsha.calls,
        evalsha_usec: evalsha.usec,
        ping_ms,
        jitter_ms,
    }
}
