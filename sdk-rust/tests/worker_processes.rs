//! The Worker as it runs in production, as real processes: 1,000 jobs over
//! three worker processes (two tokio Workers, one thread Worker) and the
//! real `delayer` server, some handlers failing, one worker killed with
//! kill -9, one Redis restart. Every job ends acked or dead, none is lost,
//! and none runs again after its ack.
//!
//! The worker processes are this test binary run again, its ignored
//! `worker_process` test doing the work when the environment says so. Each
//! logs "run <id> <attempt> <µs>" as a handler starts and "acked <id> <µs>"
//! when its ack lands, to a file of its own.

use delayer::worker::{self, Event, Stopper};
use delayer::{Backoff, Delayer, Job};
use std::collections::{HashMap, HashSet};
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use testkit::{server_conf, temp_dir, wait_until, DelayerProcess, RedisServer};

const JOBS: usize = 1000;
const TOPIC: &str = "orders";
/// Long enough for anything a loaded machine does, short enough that the
/// killed worker's jobs come back soon.
const TTR: Duration = Duration::from_secs(3);
const PATIENCE: Duration = Duration::from_secs(180);

/// Fails on its first attempt only.
fn flaky(i: usize) -> bool {
    i % 10 == 3
}

/// Fails every time: ends as a dead letter.
fn doomed(i: usize) -> bool {
    i % 97 == 5
}

fn micros() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_micros()
}

/// One worker process's work (see the module doc); runs until killed or
/// told to stop.
#[test]
#[ignore = "a worker process of all_jobs_end_acked_or_dead_through_a_kill_and_a_redis_restart"]
fn worker_process() {
    let (Ok(url), Ok(log), Ok(kind)) =
        (std::env::var("WORKER_URL"), std::env::var("WORKER_LOG"), std::env::var("WORKER_KIND"))
    else {
        return;
    };
    let file = OpenOptions::new().create(true).append(true).open(log).expect("log file");
    let file = Arc::new(Mutex::new(file));
    let line = move |text: String| {
        let mut f = file.lock().expect("log");
        f.write_all(format!("{text}\n").as_bytes()).expect("write log");
    };
    let (on_run, on_event) = (line.clone(), line);
    let work = move |id: &str, attempts: u32| -> Result<(), String> {
        on_run(format!("run {id} {attempts} {}", micros()));
        let i: usize = id.trim_start_matches("job-").parse().map_err(|_| format!("bad id {id}"))?;
        std::thread::sleep(Duration::from_millis(3));
        if doomed(i) || (flaky(i) && attempts == 1) {
            return Err(format!("cannot process {id}"));
        }
        Ok(())
    };
    let hooks = move |e: &Event<'_>| {
        if let Event::Acked { delivery } = e {
            on_event(format!("acked {} {}", delivery.id, micros()));
        }
    };
    let stopper = Stopper::new();
    stopper.stop_on_signals().expect("signals");
    let ended = if kind == "sync" {
        worker::Worker::new(Delayer::open(&url).expect("client"))
            .concurrency(8)
            .ttr(TTR)
            .handle(TOPIC, move |task: &worker::Task| work(&task.id, task.attempts))
            .hooks(hooks)
            .with_stopper(stopper)
            .run()
    } else {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
        let work = Arc::new(work);
        rt.block_on(async move {
            worker::aio::Worker::new(delayer::aio::Delayer::open(&url)?)
                .concurrency(8)
                .ttr(TTR)
                .handle(TOPIC, move |task: worker::aio::Task| {
                    let work = work.clone();
                    async move { tokio::task::spawn_blocking(move || work(&task.id, task.attempts)).await.expect("join") }
                })
                .hooks(hooks)
                .with_stopper(stopper)
                .run()
                .await
        })
    };
    ended.expect("the worker ended cleanly");
}

struct Worker {
    child: Child,
    log: PathBuf,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_worker(redis: &RedisServer, dir: &Path, n: usize, kind: &str) -> Worker {
    let log = dir.join(format!("worker-{n}.log"));
    let child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "worker_process", "--ignored", "--nocapture", "--test-threads", "1"])
        .env("WORKER_URL", redis.url())
        .env("WORKER_LOG", &log)
        .env("WORKER_KIND", kind)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start a worker process");
    Worker { child, log }
}

/// The `delayer` server binary, built from the current sources.
fn server_bin() -> String {
    let out = Command::new(env!("CARGO"))
        .args(["build", "-q", "-p", "delayer-server", "--bin", "delayer", "--message-format=json"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stderr(Stdio::inherit())
        .output()
        .expect("run cargo build");
    assert!(out.status.success(), "cargo build -p delayer-server failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split("\"executable\":\"").nth(1)?.split('"').next().map(str::to_string))
        .find(|exe| exe.ends_with("/delayer"))
        .expect("the delayer binary")
}

/// (id, µs) of every handler run and of every ack, from
/// all logs. A line cut short by kill -9 is skipped.
/// (job id, µs) entries of the logs.
type Lines = Vec<(String, u128)>;

fn read_logs(workers: &[&Path]) -> (Lines, Lines) {
    let (mut runs, mut acks) = (Vec::new(), Vec::new());
    for log in workers {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        for line in text.lines() {
            let parts: Vec<&str> = line.split(' ').collect();
            match parts[..] {
                ["run", id, _, at] => runs.extend(at.parse().ok().map(|at| (id.to_string(), at))),
                ["acked", id, at] => acks.extend(at.parse().ok().map(|at| (id.to_string(), at))),
                _ => {}
            }
        }
    }
    (runs, acks)
}

#[test]
fn all_jobs_end_acked_or_dead_through_a_kill_and_a_redis_restart() {
    let mut redis = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always", "--save", ""]);
    let server = DelayerProcess::start(&server_bin(), &server_conf(redis.port(), 100, ""));
    let d = Delayer::open(&redis.url()).expect("client");
    let backoff = Backoff::fixed(Duration::from_millis(300));
    let jobs: Vec<Job> = (0..JOBS)
        .map(|i| {
            let job = Job::new(TOPIC, format!("job-{i}"), Duration::ZERO).backoff(backoff);
            if doomed(i) {
                job.max_attempts(3)
            } else {
                job.max_attempts(10)
            }
        })
        .collect();
    d.push_many(&jobs).expect("push_many");

    let dir = temp_dir("worker-processes");
    let mut workers = [
        start_worker(&redis, &dir, 0, "async"),
        start_worker(&redis, &dir, 1, "async"),
        start_worker(&redis, &dir, 2, "sync"),
    ];
    let logs: Vec<PathBuf> = workers.iter().map(|w| w.log.clone()).collect();
    let log_refs = || logs.iter().map(PathBuf::as_path).collect::<Vec<_>>();
    let acked = || read_logs(&log_refs()).1.len();

    let began = std::time::Instant::now();
    let phase = |what: &str| eprintln!("worker_processes: {what} after {:.1} s", began.elapsed().as_secs_f64());
    assert!(wait_until(PATIENCE, || acked() >= 250), "no progress: {} acked", acked());
    phase("250 acked; kill -9");
    let victim = &mut workers[1].child;
    victim.kill().expect("kill -9"); // SIGKILL: holding reservations, acks unsent
    victim.wait().expect("reaped");
    assert!(wait_until(PATIENCE, || acked() >= 550), "no progress after the kill: {} acked", acked());
    phase("550 acked; Redis restart");
    redis.restart(); // with the AOF: every job is still there
    let dead = |d: &Delayer| d.dead_letters(TOPIC, 0, 1000).map(|l| l.len()).unwrap_or(0);
    let settled = |d: &Delayer| {
        let mut conn = redis.connection();
        let buckets: usize = redis::cmd("KEYS")
            .arg("delayer:job_bucket:*")
            .query::<Vec<String>>(&mut conn)
            .map_or(usize::MAX, |k| k.len());
        buckets == dead(d)
    };
    assert!(
        wait_until(PATIENCE, || settled(&d)),
        "not settled: {} acked lines, {} dead; server: {}",
        acked(),
        dead(&d),
        server.output().lines().rev().take(5).collect::<Vec<_>>().join(" | ")
    );

    phase("settled");
    // Every job is acked (deleted) or dead: none lost, none left anywhere.
    let letters = d.dead_letters(TOPIC, 0, 1000).expect("dead letters");
    let dead_ids: HashSet<String> = letters.iter().map(|l| l.id.clone()).collect();
    let want_dead: HashSet<String> = (0..JOBS).filter(|&i| doomed(i)).map(|i| format!("job-{i}")).collect();
    assert_eq!(dead_ids, want_dead, "exactly the jobs that always fail are dead");
    for l in &letters {
        let error: Option<String> = redis::cmd("HGET")
            .arg(format!("delayer:job_bucket:{}", l.id))
            .arg("last_error")
            .query(&mut redis.connection())
            .expect("hget");
        assert_eq!(error, Some(format!("cannot process {}", l.id)), "a dead letter says why");
    }
    let mut conn = redis.connection();
    let mut left = Vec::new();
    for key in ["delayer:job_pool", "delayer:reserved"] {
        left.push((key.to_string(), redis::cmd("ZCARD").arg(key).query::<i64>(&mut conn).expect("zcard")));
    }
    let ready = format!("delayer:ready_queue:{TOPIC}");
    left.push((ready.clone(), redis::cmd("LLEN").arg(&ready).query::<i64>(&mut conn).expect("llen")));
    assert!(left.iter().all(|(_, n)| *n == 0), "nothing left waiting, reserved or ready: {left:?}");

    // None runs again after its ack; no job is acked twice.
    let (runs, acks) = read_logs(&log_refs());
    let mut acked_at: HashMap<&str, u128> = HashMap::new();
    for (id, at) in &acks {
        assert!(acked_at.insert(id.as_str(), *at).is_none(), "{id} acked twice");
    }
    for (id, at) in &runs {
        if let Some(ack) = acked_at.get(id.as_str()) {
            assert!(at < ack, "{id} ran at {at} µs, after its ack at {ack} µs");
        }
    }
    let ran: HashSet<&str> = runs.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ran.len(), JOBS, "every job ran");
    // Most acks are logged (a few may have landed just as the worker died).
    assert!(acks.len() >= JOBS - want_dead.len() - 40, "{} acks logged", acks.len());
    let _ = std::fs::remove_dir_all(&dir);
}
