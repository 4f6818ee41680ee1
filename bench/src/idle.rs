//! Idle cost: the real server on an empty pool, its CPU and the Redis
//! commands it sends.

use crate::{redisx, sys};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use testkit::{DelayerProcess, RedisServer};

pub struct Idle {
    pub secs: f64,
    pub cpu_pct: f64,
    /// Commands the server sent (MONITOR, not counting those its scripts ran).
    pub sent_per_sec: f64,
    pub sent: Vec<(String, u64)>,
    /// Commands Redis executed for it, scripts' included (INFO commandstats).
    pub executed_per_sec: f64,
    pub rss_kb: u64,
}

pub fn run(redis: &RedisServer, bin: &str, secs: u64) -> Idle {
    let mut conn = redis.connection();
    redisx::reset(&mut conn);
    let conf = testkit::server_conf(redis.port(), 1000, "batch_size = 1000");
    let process = DelayerProcess::start(bin, &conf);
    let pid = process.pid();
    // Past start-up (connect, script load, first tick).
    std::thread::sleep(Duration::from_secs(2));
    let before: HashMap<_, _> = redisx::commandstats(&mut conn);
    let cpu0 = sys::cpu_ticks(pid).unwrap_or(0);
    let t = Instant::now();
    let sent = redisx::monitor(&redis.url(), Duration::from_secs(secs));
    let cpu1 = sys::cpu_ticks(pid).unwrap_or(0);
    let took = t.elapsed().as_secs_f64();
    let after = redisx::commandstats(&mut conn);
    let rss_kb = sys::status_kb(pid, "VmRSS").unwrap_or(0);
    drop(process);
    // Our own probes are INFO and MONITOR; everything else is the server's.
    let executed: u64 = after
        .iter()
        .filter(|(name, _)| !matches!(name.as_str(), "info" | "monitor"))
        .map(|(name, s)| s.calls - before.get(name).map(|b| b.calls).unwrap_or(0))
        .sum();
    let sent_total: u64 = sent.iter().map(|(_, n)| n).sum();
    Idle {
        secs: took,
        cpu_pct: (cpu1 - cpu0) as f64 / sys::clk_tck() / took * 100.0,
        sent_per_sec: sent_total as f64 / took,
        sent,
        executed_per_sec: executed as f64 / took,
        rss_kb,
    }
}
