//! Worker throughput: a backlog of no-op jobs, all due at once, completed by
//! a worker at concurrency 100, at least once: the Rust SDK's Worker (tokio
//! tasks, and threads), the Python SDK's (threads, and asyncio tasks:
//! `bench/worker_bench.py`) and BullMQ's Worker (`bench/bullmq/throughput.js`),
//! one after the other on the same Redis, each after a FLUSHALL, with
//! another client sending PING after PING meanwhile.
//!
//! Delayer's backlog is pushed with push_many (delay 0) and moved to the
//! ready queue with move.lua before the clock starts; BullMQ's is added with
//! addBulk before its Worker starts. The clock runs from the worker's start
//! to its last ack (Delayer: the Acked event, the job deleted; BullMQ: the
//! last 'completed' event, removeOnComplete).

use crate::redisx::{self, Pinger};
use crate::stats::Summary;
use delayer::worker::{self, Event, Stopper};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use testkit::RedisServer;

pub const CONCURRENCY: usize = 100;
const TOPIC: &str = "tp";

/// One worker's run, or why it did not run.
pub struct Run {
    pub name: &'static str,
    pub result: Result<Done, String>,
}

pub struct Done {
    pub jobs: u64,
    pub secs: f64,
    /// Another client's PING round trips while the worker ran, ms.
    pub ping_ms: Summary,
    /// Script calls (EVALSHA / EVAL / FCALL) and Redis's time in them.
    pub scripts: redisx::CmdStat,
}

impl Done {
    pub fn rate(&self) -> f64 {
        self.jobs as f64 / self.secs.max(1e-9)
    }
}

pub struct Throughput {
    pub jobs: u64,
    pub runs: Vec<Run>,
}

impl Throughput {
    /// jobs/s of the named run, if it ran.
    pub fn rate(&self, name: &str) -> Option<f64> {
        self.runs.iter().find(|r| r.name == name)?.result.as_ref().ok().map(Done::rate)
    }
}

pub const ASYNC: &str = "Rust Worker (tokio tasks)";
pub const THREADS: &str = "Rust Worker (threads)";
pub const PY_THREADS: &str = "Python Worker (threads)";
pub const PY_ASYNC: &str = "Python Worker (asyncio)";
pub const BULLMQ: &str = "BullMQ Worker";
/// Ours, each held to the same ratio against BullMQ.
pub const OURS: [&str; 4] = [ASYNC, THREADS, PY_THREADS, PY_ASYNC];

pub fn run(redis: &RedisServer, root: &Path, jobs: u64, bullmq: bool) -> Throughput {
    let mut runs = vec![
        Run { name: ASYNC, result: Ok(delayer_run(redis, jobs, Kind::Async)) },
        Run { name: THREADS, result: Ok(delayer_run(redis, jobs, Kind::Threads)) },
        Run { name: PY_THREADS, result: python_run(redis, root, jobs, false) },
        Run { name: PY_ASYNC, result: python_run(redis, root, jobs, true) },
    ];
    if bullmq {
        runs.push(Run { name: BULLMQ, result: bullmq_run(redis, root, jobs) });
    }
    Throughput { jobs, runs }
}

#[derive(Clone, Copy)]
enum Kind {
    Async,
    Threads,
}

/// The backlog, ready: push_many, then move.lua until the pool is empty.
fn fill(redis: &RedisServer, jobs: u64) {
    let mut conn = redis.connection();
    redisx::reset(&mut conn);
    let d = delayer::Delayer::open(&redis.url()).expect("client");
    redisx::fill(&d, "tp", jobs as usize, &[TOPIC.to_string()]);
    let (moved, _, _) = redisx::bare_move_all(&mut conn);
    assert_eq!(moved, jobs, "the whole backlog is ready");
    redisx::resetstat(&mut conn);
}

fn delayer_run(redis: &RedisServer, jobs: u64, kind: Kind) -> Done {
    fill(redis, jobs);
    let stopper = Stopper::new();
    let acked = Arc::new(AtomicU64::new(0));
    let last = Arc::new(Mutex::new(None::<Instant>));
    let (count, at, stop) = (acked.clone(), last.clone(), stopper.clone());
    let hooks = move |e: &Event<'_>| match e {
        Event::Acked { .. } if count.fetch_add(1, Ordering::Relaxed) + 1 == jobs => {
            *at.lock().expect("last") = Some(Instant::now());
            stop.stop();
        }
        Event::Failed { error, .. } => eprintln!("throughput: a no-op job failed: {error}"),
        Event::ConnectionLost { error, .. } | Event::Error { error } => eprintln!("throughput: {error}"),
        _ => {}
    };
    let pinger = Pinger::start(&redis.url());
    let start = Instant::now();
    let url = redis.url();
    let ended = match kind {
        Kind::Async => {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
            rt.block_on(async {
                let d = delayer::aio::Delayer::open(&url)?;
                worker::aio::Worker::new(d)
                    .concurrency(CONCURRENCY)
                    .ttr(Duration::from_secs(300))
                    .handle(TOPIC, |_task: worker::aio::Task| async { Ok::<(), String>(()) })
                    .hooks(hooks)
                    .with_stopper(stopper)
                    .run()
                    .await
            })
        }
        Kind::Threads => {
            let d = delayer::Delayer::open(&url).expect("client");
            worker::Worker::new(d)
                .concurrency(CONCURRENCY)
                .ttr(Duration::from_secs(300))
                .handle(TOPIC, |_task: &worker::Task| Ok::<(), String>(()))
                .hooks(hooks)
                .with_stopper(stopper)
                .run()
        }
    };
    ended.expect("the worker ran");
    let end = last.lock().expect("last").unwrap_or_else(Instant::now);
    let ping_ms = Summary::of(pinger.finish(start, end));
    let scripts = script_stats(&mut redis.connection());
    assert_eq!(acked.load(Ordering::Relaxed), jobs, "every job acked");
    Done { jobs, secs: (end - start).as_secs_f64(), ping_ms, scripts }
}

/// `bench/worker_bench.py` on this Redis: it pushes and moves its backlog
/// itself, then times the Worker from run() to the last job; its JSON gives
/// the seconds.
fn python_run(redis: &RedisServer, root: &Path, jobs: u64, asyncio: bool) -> Result<Done, String> {
    let python = root.join(".venv/bin/python");
    if !python.exists() {
        return Err(format!("no {} (tools/install-deps.sh makes it)", python.display()));
    }
    let mut conn = redis.connection();
    redisx::reset(&mut conn);
    let pinger = Pinger::start(&redis.url());
    let script = root.join("bench/worker_bench.py");
    let mut cmd = Command::new(&python);
    cmd.arg(&script).args(["--url", &redis.url(), "--jobs", &jobs.to_string()]);
    cmd.args(["--concurrency", &CONCURRENCY.to_string()]);
    if asyncio {
        cmd.arg("--asyncio");
    }
    let started = Instant::now();
    let out = cmd.output().map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    let ended = Instant::now();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string();
        return Err(format!("{} failed: {last}", script.display()));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().rev().find(|l| l.trim_start().starts_with('{')).ok_or("no JSON in the output")?;
    let secs = json_number(line, "seconds")?;
    // The pings of the timed part: the last `secs` before the script ended
    // (its fill and exit come before and after, and are short beside it).
    let from = ended.checked_sub(Duration::from_secs_f64(secs)).unwrap_or(started).max(started);
    let ping_ms = Summary::of(pinger.finish(from, ended));
    // Redis's time in reserve.lua as the script measured it; the call count
    // also has the fill's push_many and move.lua calls.
    let usec = (json_number(line, "redis_script_usec_per_job")? * jobs as f64) as u64;
    let scripts = redisx::CmdStat { usec, ..script_stats(&mut conn) };
    Ok(Done { jobs, secs, ping_ms, scripts })
}

/// A number from a flat JSON line, as the bench scripts print them.
fn json_number(line: &str, key: &str) -> Result<f64, String> {
    let pat = format!("\"{key}\":");
    let rest = line.split(&pat).nth(1).ok_or(format!("no {key:?} in {line}"))?;
    let v = rest.split([',', '}']).next().unwrap_or("").trim();
    v.parse().map_err(|_| format!("{key}: bad number {v:?}"))
}

fn bullmq_run(redis: &RedisServer, root: &Path, jobs: u64) -> Result<Done, String> {
    if let Some(why) = crate::bullmq::unavailable(root) {
        return Err(why);
    }
    let mut conn = redis.connection();
    redisx::reset(&mut conn);
    let pinger = Pinger::start(&redis.url());
    // Node reports wall-clock ms; the pinger's samples carry Instants.
    let (base_instant, base_wall) = (Instant::now(), wall_ms());
    let script = root.join("bench/bullmq/throughput.js");
    let out = Command::new("node")
        .arg(&script)
        .arg(redis.url())
        .args([jobs, CONCURRENCY as u64].map(|n| n.to_string()))
        .current_dir(root.join("bench/bullmq"))
        .output();
    let at = |ms: f64| base_instant + Duration::from_secs_f64(((ms - base_wall) / 1e3).max(0.0));
    let out = match out {
        Err(e) => return Err(format!("cannot run node: {e}")),
        Ok(out) if !out.status.success() => {
            let err = String::from_utf8_lossy(&out.stderr);
            let last = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string();
            return Err(format!("{} failed: {last}", script.display()));
        }
        Ok(out) => String::from_utf8_lossy(&out.stdout).into_owned(),
    };
    let line = out.lines().rev().find(|l| l.trim_start().starts_with('{')).ok_or("no JSON in the output")?;
    let number = |key: &str| json_number(line, key);
    let (completed, start, end) = (number("completed")?, number("start_ms")?, number("end_ms")?);
    if completed as u64 != jobs {
        return Err(format!("BullMQ completed {completed} of {jobs} jobs"));
    }
    let ping_ms = Summary::of(pinger.finish(at(start), at(end)));
    // Includes addBulk's scripts: BullMQ adds with a script per job.
    let scripts = script_stats(&mut conn);
    Ok(Done { jobs, secs: (end - start) / 1e3, ping_ms, scripts })
}

/// Script calls and their Redis time since the last CONFIG RESETSTAT.
fn script_stats(conn: &mut redis::Connection) -> redisx::CmdStat {
    let stats = redisx::commandstats(conn);
    ["evalsha", "eval", "fcall", "evalsha_ro", "eval_ro"]
        .iter()
        .filter_map(|c| stats.get(*c))
        .fold(redisx::CmdStat::default(), |a, s| redisx::CmdStat { calls: a.calls + s.calls, usec: a.usec + s.usec })
}

fn wall_ms() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs_f64() * 1e3
}
