//! Redis-side helpers: filling the pool, the bare move script, counting what
//! is where, INFO commandstats, and a thread that pings.

use delayer::{Delayer, Job};
use delayer_protocol::keys::Keys;
use redis::{Script, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// The server's script, byte for byte: the "limit" runs exactly this.
pub static MOVE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/move.lua")));

pub const PREFIX: &str = "delayer:";
pub const POOL: &str = "delayer:job_pool";
pub const BATCH: u32 = 1000;
/// Every benchmark job carries this body (32 bytes, a typical small payload).
pub const BODY: &[u8] = b"{\"order\":1234567,\"act\":\"close\"}";

pub fn ready_queue(topic: &str) -> String {
    format!("{PREFIX}ready_queue:{topic}")
}

/// FLUSHALL (synchronous, so the next measurement does not share Redis with
/// a background free) and CONFIG RESETSTAT.
pub fn reset(conn: &mut redis::Connection) {
    redis::cmd("FLUSHALL").arg("SYNC").query::<()>(conn).expect("FLUSHALL");
    resetstat(conn);
}

pub fn resetstat(conn: &mut redis::Connection) {
    redis::cmd("CONFIG").arg("RESETSTAT").query::<()>(conn).expect("CONFIG RESETSTAT");
}

/// Calls and total microseconds of one command in INFO commandstats.
#[derive(Debug, Clone, Copy, Default)]
pub struct CmdStat {
    pub calls: u64,
    pub usec: u64,
}

/// INFO commandstats, by lower-case command name.
pub fn commandstats(conn: &mut redis::Connection) -> HashMap<String, CmdStat> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).expect("INFO commandstats");
    let mut out = HashMap::new();
    for line in info.lines() {
        let Some(rest) = line.strip_prefix("cmdstat_") else { continue };
        let Some((name, fields)) = rest.split_once(':') else { continue };
        let mut stat = CmdStat::default();
        for kv in fields.split(',') {
            match kv.split_once('=') {
                Some(("calls", v)) => stat.calls = v.trim().parse().unwrap_or(0),
                Some(("usec", v)) => stat.usec = v.trim().parse().unwrap_or(0),
                _ => {}
            }
        }
        out.insert(name.to_string(), stat);
    }
    out
}

/// Pushes `n` jobs due now (delay 0) over `topics` topics with push_many, in
/// chunks of 100,000 (only the push_many calls are timed). Returns the time
/// spent in push_many.
pub fn fill(d: &Delayer, tag: &str, n: usize, topics: &[String]) -> Duration {
    let mut spent = Duration::ZERO;
    let mut i = 0;
    while i < n {
        let end = (i + 100_000).min(n);
        let jobs: Vec<Job> = (i..end)
            .map(|k| Job::new(topics[k % topics.len()].as_str(), format!("{tag}-{k}"), Duration::ZERO).body(BODY))
            .collect();
        let t = Instant::now();
        d.push_many(&jobs).expect("push_many");
        spent += t.elapsed();
        i = end;
    }
    spent
}

/// Runs move.lua in a tight loop on one connection (EVALSHA, batch 1000)
/// until a batch comes back short. Returns (ids taken, batches, time).
pub fn bare_move_all(conn: &mut redis::Connection) -> (u64, u64, Duration) {
    // Load first, so the timed loop is EVALSHA only.
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(include_str!("../../lua/move.lua"))
        .query::<String>(conn)
        .expect("SCRIPT LOAD");
    // Names from the SDK's keys module, as the server builds them.
    let keys = Keys::new(PREFIX);
    let (mut taken, mut batches) = (0u64, 0u64);
    let t = Instant::now();
    loop {
        let reply: Value = MOVE
            .key(keys.job_pool())
            .key(keys.malformed())
            .key(keys.scheduled_count())
            .key(keys.topics())
            .key(keys.reserved())
            .key(keys.flow_topics())
            .arg(keys.bucket_prefix())
            .arg(keys.ready_queue_prefix())
            .arg(BATCH)
            .arg("0")
            .arg(0)
            .arg(keys.flow_pool_prefix())
            .invoke(conn)
            .expect("move.lua");
        let n = match reply {
            Value::Array(items) => match items.first() {
                Some(Value::Int(n)) => *n as u64,
                other => panic!("move.lua: unexpected first element {other:?}"),
            },
            other => panic!("move.lua: unexpected reply {other:?}"),
        };
        taken += n;
        batches += 1;
        if n < u64::from(BATCH) {
            return (taken, batches, t.elapsed());
        }
    }
}

/// ZCARD of the pool and the sum of LLEN of the topics' ready queues.
pub fn where_are(conn: &mut redis::Connection, topics: &[String]) -> (u64, u64) {
    let mut pipe = redis::pipe();
    pipe.cmd("ZCARD").arg(POOL);
    for t in topics {
        pipe.cmd("LLEN").arg(ready_queue(t));
    }
    let counts: Vec<u64> = pipe.query(conn).expect("ZCARD/LLEN");
    (counts[0], counts[1..].iter().sum())
}

/// A thread that sends PING after PING on its own connection and records
/// each round trip with the instant it was sent.
pub struct Pinger {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Vec<(Instant, Duration)>>,
}

impl Pinger {
    pub fn start(url: &str) -> Pinger {
        let mut conn = redis::Client::open(url).and_then(|c| c.get_connection()).expect("pinger connection");
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = thread::spawn(move || {
            let mut samples = Vec::with_capacity(1 << 20);
            while !flag.load(Ordering::Relaxed) {
                let t = Instant::now();
                // Redis may be stopped before the pinger (a bench that ends
                // early): the samples so far are the answer, not a panic.
                if let Err(e) = redis::cmd("PING").query::<String>(&mut conn) {
                    eprintln!("pinger: PING failed ({e}); keeping the {} round trips so far", samples.len());
                    break;
                }
                samples.push((t, t.elapsed()));
            }
            samples
        });
        Pinger { stop, handle }
    }

    /// Stops, and returns the round trips (ms) of the pings sent in [from, to].
    pub fn finish(self, from: Instant, to: Instant) -> Vec<f64> {
        self.stop.store(true, Ordering::Relaxed);
        let samples = self.handle.join().expect("pinger thread");
        samples.into_iter().filter(|(t, _)| *t >= from && *t <= to).map(|(_, d)| d.as_secs_f64() * 1e3).collect()
    }
}

/// A thread that sleeps 1 ms at a time and records how much longer each
/// sleep took: the machine's scheduling noise (other processes on the CPUs).
pub struct Jitter {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Vec<f64>>,
}

impl Jitter {
    pub fn start() -> Jitter {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = thread::spawn(move || {
            let mut over = Vec::with_capacity(1 << 16);
            while !flag.load(Ordering::Relaxed) {
                let t = Instant::now();
                thread::sleep(Duration::from_millis(1));
                over.push((t.elapsed().as_secs_f64() * 1e3 - 1.0).max(0.0));
            }
            over
        });
        Jitter { stop, handle }
    }

    /// Oversleep of each 1 ms sleep, in ms.
    pub fn finish(self) -> Vec<f64> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().expect("jitter thread")
    }
}

/// Counts the commands clients send (not those scripts run) with MONITOR,
/// for `window`; returns (command name, count) sorted by name.
pub fn monitor(url: &str, window: Duration) -> Vec<(String, u64)> {
    use std::io::{BufRead, BufReader, Write};
    let addr = url.trim_start_matches("redis://").trim_end_matches('/');
    let mut stream = std::net::TcpStream::connect(addr).expect("MONITOR connection");
    stream.write_all(b"MONITOR\r\n").expect("MONITOR");
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut line = String::new();
    reader.read_line(&mut line).expect("+OK"); // +OK
    let end = Instant::now() + window;
    let mut counts: HashMap<String, u64> = HashMap::new();
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        stream.set_read_timeout(Some(left)).expect("timeout");
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        // +1763750000.123456 [0 127.0.0.1:54321] "evalsha" "..."; [0 lua] inside scripts
        let Some(close) = line.find("] ") else { continue };
        if line[..close].contains("lua") {
            continue;
        }
        let name = line[close + 2..].split('"').nth(1).unwrap_or("?").to_lowercase();
        *counts.entry(name).or_default() += 1;
    }
    let mut out: Vec<(String, u64)> = counts.into_iter().collect();
    out.sort();
    out
}
