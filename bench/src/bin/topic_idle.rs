//! `topic-idle`: the per-topic layout's server among many idle topics.
//!
//! Issue 12's targets for the layout's server: with 10,000 idle topics it
//! uses under 1 % CPU, and a job due in any of them is moved within 10 ms of
//! its due time, short delays included. This starts a redis-server and the
//! release `delayer` binary with `layout = topic` (default timer_interval,
//! 1000 ms), registers `--topics` known topics with nothing waiting, lets
//! the start-up scans finish, and measures the server's CPU over `--secs`.
//! Then it pushes `--jobs` jobs one at a time, each to a different topic,
//! due in 20..500 ms, written as PROTOCOL.md tells a client to (job, pool
//! entry, `ZADD <prefix>due LT`, `SADD <prefix>topics`, wake-up), and times
//! each from its due time to its arrival in the ready list (a BRPOP waiting
//! on it, Redis's clock on both ends).
//!
//! usage: topic-idle [--topics N] [--secs N] [--jobs N] [--delayer-bin FILE]

use delayer_protocol::keys::TopicKeys;
use redis::Commands;
use std::time::{Duration, Instant};
use testkit::{server_conf, DelayerProcess, RedisServer};

struct Options {
    topics: usize,
    secs: u64,
    jobs: usize,
    bin: String,
}

fn options() -> Result<Options, String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().ok_or("no workspace root")?.to_path_buf();
    let bin = root.join("target/release/delayer").display().to_string();
    let mut o = Options { topics: 10_000, secs: 10, jobs: 50, bin };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> Result<u64, String> {
            args.next()
                .and_then(|v| v.replace('_', "").parse().ok())
                .filter(|n| *n > 0)
                .ok_or(format!("{name} needs a positive number"))
        };
        match a.as_str() {
            "--topics" => o.topics = num("--topics")? as usize,
            "--secs" => o.secs = num("--secs")?,
            "--jobs" => o.jobs = num("--jobs")? as usize,
            "--delayer-bin" => o.bin = args.next().ok_or("--delayer-bin needs a file")?,
            "-h" | "--help" => {
                println!("usage: topic-idle [--topics N] [--secs N] [--jobs N] [--delayer-bin FILE]");
                std::process::exit(0);
            }
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    Ok(o)
}

/// utime + stime of a process, in clock ticks (/proc/<pid>/stat).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc/<pid>/stat");
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime")
}

fn clk_tck() -> f64 {
    // The kernel's USER_HZ, 100 on Linux, as getconf CLK_TCK reports it.
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

fn redis_now(conn: &mut redis::Connection) -> f64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(conn).expect("TIME");
    s as f64 + us as f64 / 1e6
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let o = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("topic-idle: {e}");
            std::process::exit(2);
        }
    };
    let keys = TopicKeys::new("delayer:");
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let topics: Vec<String> = (0..o.topics).map(|i| format!("idle{i}")).collect();
    for chunk in topics.chunks(1000) {
        let _: () = conn.sadd(keys.topics(), chunk).expect("SADD");
    }
    let server = DelayerProcess::start(&o.bin, &server_conf(redis.port(), 1000, "layout = topic"));
    // Past the start-up scan and a first sweep of every known topic.
    std::thread::sleep(Duration::from_secs(12));
    let (ticks, start) = (cpu_ticks(server.pid()), Instant::now());
    std::thread::sleep(Duration::from_secs(o.secs));
    let cpu = (cpu_ticks(server.pid()) - ticks) as f64 / clk_tck() / start.elapsed().as_secs_f64();
    println!(
        "topic-idle: {} idle topics, server CPU over {} s: {:.2} % of one core (target < 1 %)",
        o.topics,
        o.secs,
        cpu * 100.0
    );

    let mut late_ms = Vec::with_capacity(o.jobs);
    let mut waiter = redis.connection();
    for n in 0..o.jobs {
        let topic = &topics[(n * 7919) % topics.len()];
        let delay = 0.02 + (n % 25) as f64 * 0.02;
        let due = redis_now(&mut conn) + delay;
        let id = format!("job{n}");
        let _: () = conn
            .hset_multiple(format!("{}{id}", keys.bucket_prefix(topic)), &[("topic", topic.as_str()), ("body", "x")])
            .expect("HSET");
        let _: () = conn.zadd(keys.pool(topic), &id, due).expect("ZADD pool");
        let lowered: u64 = redis::cmd("ZADD")
            .arg(keys.due())
            .arg("LT")
            .arg("CH")
            .arg(due)
            .arg(topic)
            .query(&mut conn)
            .expect("ZADD due");
        let _: () = conn.sadd(keys.topics(), topic).expect("SADD");
        if lowered > 0 {
            let _: () = conn.publish(keys.wake(), format!("{due:.3}")).expect("PUBLISH");
        }
        let got: Option<(String, String)> = waiter.brpop(keys.ready(topic), 10.0).expect("BRPOP");
        assert!(got.is_some(), "job {n} not moved within 10 s:\n{}", server.output());
        late_ms.push((redis_now(&mut waiter) - due) * 1000.0);
    }
    late_ms.sort_by(f64::total_cmp);
    println!(
        "topic-idle: {} jobs due in 20..500 ms, each in another topic: from due time to ready p50 {:.1} ms, p90 {:.1} \
         ms, max {:.1} ms, min {:.1} ms (target: within 10 ms)",
        o.jobs,
        percentile(&late_ms, 0.5),
        percentile(&late_ms, 0.9),
        late_ms[late_ms.len() - 1],
        late_ms[0]
    );
}
