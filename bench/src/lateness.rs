//! Lateness: jobs pushed at a steady rate, with delays drawn uniformly from
//! a scenario's range, popped with bpop by consumer threads while the real
//! server runs; each job's lateness is (pop time - due time), the due time
//! being what push returned (Redis's clock, the same machine's clock).
//! The same scenarios run on BullMQ in bullmq.rs.

use crate::redisx;
use crate::stats::Summary;
use delayer::{Delayer, Job};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use testkit::{DelayerProcess, RedisServer};

pub const TOPICS: usize = 4;

/// One lateness run: a push rate, for how long, and the delay range.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    /// Short name in the report ("delay < 1 s").
    pub label: &'static str,
    pub rate: u64,
    pub secs: u64,
    /// Delays are uniform in [min_ms, max_ms], whole milliseconds.
    pub min_ms: u64,
    pub max_ms: u64,
    /// Whether the report splits the jobs due < 1 s and >= 1 s ahead
    /// (the mixed scenario spans both).
    pub split: bool,
}

impl Scenario {
    /// "1,000/s, delays 50-800 ms" for the report.
    pub fn describe(&self) -> String {
        let ms =
            |v: u64| if v >= 1000 && v.is_multiple_of(1000) { format!("{} s", v / 1000) } else { format!("{v} ms") };
        let delays = if self.max_ms == 0 {
            "delay 0".to_string()
        } else {
            format!("delays {}-{}", ms(self.min_ms), ms(self.max_ms))
        };
        format!("{}/s for {} s, {delays}", crate::report::thousands(self.rate as f64), self.secs)
    }
}

/// The scenarios of a run: the mixed one at `rate` (default 5,000/s), then
/// short delays, long-ish delays and "run now" at 1,000/s.
pub fn scenarios(rate: u64, secs: u64) -> Vec<Scenario> {
    let s = |label, rate, min_ms, max_ms, split| Scenario { label, rate, secs, min_ms, max_ms, split };
    vec![
        s("mixed 50 ms-3 s", rate, 50, 3000, true),
        s("delay < 1 s", 1000, 50, 800, false),
        s("delay 1-3 s", 1000, 1000, 3000, false),
        s("run now", 1000, 0, 0, false),
    ]
}

/// Summaries of one run's samples (lateness ms, delay ms).
#[derive(Debug, Clone, Copy, Default)]
pub struct Groups {
    pub all: Summary,
    pub under_1s: Summary,
    pub ahead_1s: Summary,
    /// Jobs handed out before their due time (should be none).
    pub early: u64,
}

impl Groups {
    pub fn of(samples: &[(f64, u64)]) -> Groups {
        let pick = |keep: &dyn Fn(u64) -> bool| -> Summary {
            Summary::of(samples.iter().filter(|(_, d)| keep(*d)).map(|(l, _)| *l).collect())
        };
        Groups {
            all: pick(&|_| true),
            under_1s: pick(&|d| d < 1000),
            ahead_1s: pick(&|d| d >= 1000),
            early: samples.iter().filter(|(l, _)| *l < 0.0).count() as u64,
        }
    }
}

pub struct Lateness {
    pub scenario: Scenario,
    pub pushed: u64,
    pub achieved_rate: f64,
    pub consumed: u64,
    pub late: Groups,
    /// How late the server moved the oldest id of each batch (its log's
    /// oldest_late_ms), ms.
    pub move_ms: Summary,
    /// Oversleep of 1 ms sleeps in this process meanwhile: machine noise.
    pub jitter_ms: Summary,
    /// The server's CPU over the test, % of one core.
    pub server_cpu_pct: f64,
}

/// xorshift64*: a uniform delay without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

fn unix_ms(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64() * 1e3).unwrap_or(0.0)
}

pub fn run(redis: &RedisServer, bin: &str, sc: Scenario) -> Lateness {
    let (rate, secs) = (sc.rate, sc.secs);
    let mut conn = redis.connection();
    redisx::reset(&mut conn);
    let d = Delayer::open(&redis.url()).expect("client");
    // log_level = debug: each batch's line, with its oldest_late_ms (at info, a summary a minute).
    let conf = testkit::server_conf(redis.port(), 1000, "batch_size = 1000\nlog_level = debug");
    let process = DelayerProcess::start(bin, &conf);
    let pid = process.pid();
    thread::sleep(Duration::from_millis(300));
    let cpu0 = crate::sys::cpu_ticks(pid).unwrap_or(0);
    let cpu_from = Instant::now();

    let total = (rate * secs) as usize;
    // due_ms[i] is job i's due time in Unix ms (0 until push returned);
    // delay_ms[i] its delay.
    let due_ms: Arc<Vec<AtomicU64>> = Arc::new((0..total).map(|_| AtomicU64::new(0)).collect());
    let delay_ms: Arc<Vec<AtomicU64>> = Arc::new((0..total).map(|_| AtomicU64::new(0)).collect());
    let consumed = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let results: Arc<Mutex<Vec<(f64, u64)>>> = Arc::new(Mutex::new(Vec::with_capacity(total)));

    let consumers: Vec<_> = (0..TOPICS)
        .map(|c| {
            let (d, due_ms, delay_ms, consumed, stop, results) =
                (d.clone(), due_ms.clone(), delay_ms.clone(), consumed.clone(), stop.clone(), results.clone());
            thread::spawn(move || {
                let topic = format!("late{c}");
                let mut mine = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let Some(job) = d.bpop(&topic, Duration::from_millis(200)).expect("bpop") else { continue };
                    let popped = unix_ms(SystemTime::now());
                    let i: usize = job.id.strip_prefix("late-").and_then(|s| s.parse().ok()).expect("job id");
                    // The push reply may still be on its way back (with delay 0, often).
                    let mut due = due_ms[i].load(Ordering::Acquire);
                    while due == 0 {
                        thread::yield_now();
                        due = due_ms[i].load(Ordering::Acquire);
                    }
                    mine.push((popped - due as f64, delay_ms[i].load(Ordering::Relaxed)));
                    consumed.fetch_add(1, Ordering::Relaxed);
                }
                results.lock().expect("results").extend(mine);
            })
        })
        .collect();

    let jitter = redisx::Jitter::start();
    // The producer: job i is pushed at start + i / rate, one push per job.
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let start = Instant::now();
    for i in 0..total {
        let at = start + Duration::from_secs_f64(i as f64 / rate as f64);
        let now = Instant::now();
        if at > now {
            thread::sleep(at - now);
        }
        let delay = sc.min_ms + rng.next() % (sc.max_ms - sc.min_ms + 1);
        let job = Job::new(format!("late{}", i % TOPICS), format!("late-{i}"), Duration::from_millis(delay))
            .body(redisx::BODY);
        let due = d.push_job(&job).expect("push");
        delay_ms[i].store(delay, Ordering::Relaxed);
        due_ms[i].store(unix_ms(due) as u64, Ordering::Release);
    }
    let push_secs = start.elapsed().as_secs_f64();
    // Wait for the last jobs to fall due and be popped.
    let deadline = Instant::now() + Duration::from_millis(sc.max_ms + 10_000);
    while consumed.load(Ordering::Relaxed) < total as u64 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    for c in consumers {
        c.join().expect("consumer");
    }
    let server_cpu_secs = (crate::sys::cpu_ticks(pid).unwrap_or(0) - cpu0) as f64 / crate::sys::clk_tck();
    let server_cpu_pct = server_cpu_secs / cpu_from.elapsed().as_secs_f64() * 100.0;
    let jitter_ms = Summary::of(jitter.finish());
    let move_ms = Summary::of(
        process
            .output()
            .lines()
            .filter_map(|l| l.split("oldest_late_ms=").nth(1))
            .filter_map(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .collect(),
    );
    drop(process);

    let results = std::mem::take(&mut *results.lock().expect("results"));
    Lateness {
        scenario: sc,
        pushed: total as u64,
        achieved_rate: total as f64 / push_secs,
        consumed: results.len() as u64,
        late: Groups::of(&results),
        move_ms,
        jitter_ms,
        server_cpu_pct,
    }
}
