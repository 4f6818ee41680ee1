//! Kill -9 at random points, then account for every job.
//!
//! Thousands of at-least-once jobs go through real processes: two `delayer`
//! servers, several workers (this binary, run again as `chaos worker`) and a
//! redis-server with `appendfsync always`. While they work, the test kills
//! workers and servers with SIGKILL at random moments (between reserve and
//! ack, mid-batch, while waiting) and crashes Redis itself. Then it lets the
//! queue drain and checks:
//!
//! - nothing lost: every job was worked (its id is in the done set) and
//!   acked, or is a dead letter; no other job data is left anywhere;
//! - nothing held twice: each reservation takes a lease that expires exactly
//!   at its deadline (`SET NX PXAT`); a reservation finding another's live
//!   lease is a violation;
//! - nothing doubled: no id twice in a dead-letter list, pool, ready queue
//!   or reserved set at the end.
//!
//! `harness = false`: this file is its own main, so the same binary can be
//! both the orchestrator and its workers. Size it with CHAOS_JOBS (default
//! 3000) and CHAOS_SECONDS (default 20); CHAOS_LAYOUT=topic runs it on the
//! per-topic layout (the workers inherit it).

mod chaos_kit;

use chaos_kit::Rng;
use delayer::{Backoff, Delayer, Job, Layout};
use redis::Commands;
use std::collections::HashSet;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use testkit::{server_conf, wait_until, DelayerProcess, LayoutNames, RedisServer};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");
const TOPIC: &str = "chaos";
const TTR: Duration = Duration::from_millis(700);
const MAX_ATTEMPTS: u32 = 4;
const WORKERS: usize = 4;
const SERVERS: usize = 2;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("worker") {
        let (Some(url), Some(seed)) = (args.get(2), args.get(3).and_then(|s| s.parse().ok())) else {
            eprintln!("usage: chaos worker <redis url> <seed>");
            return ExitCode::from(2);
        };
        worker(url, seed);
    }
    if let Some(exit) = chaos_kit::harness_says(&args, "chaos_kill_9_accounts_for_every_job") {
        return exit;
    }
    match orchestrate() {
        Ok(summary) => {
            println!("test chaos_kill_9_accounts_for_every_job ... ok ({summary})");
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("test chaos_kill_9_accounts_for_every_job ... FAILED\n{why}");
            ExitCode::FAILURE
        }
    }
}

/// The layout under test, from CHAOS_LAYOUT ("topic", or the classic one).
fn names() -> LayoutNames {
    LayoutNames::named(&std::env::var("CHAOS_LAYOUT").unwrap_or_default())
}

fn client(url: &str) -> delayer::Result<Delayer> {
    let layout = if names().per_topic { Layout::Topic } else { Layout::Classic };
    Delayer::open(url)?.with_layout(layout)
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

// ------------------------------------------------------------------ worker

/// A worker: reserve, take the lease, work, then ack (mostly), release or
/// bury. Redis errors (it is crashed on purpose) are waited out. It never
/// returns: it is killed.
fn worker(url: &str, seed: u64) -> ! {
    let mut rng = Rng::new(seed);
    let d = match client(url) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("worker: {e}");
            std::process::exit(1)
        }
    };
    // Deletes the lease only while it is still this reservation's.
    let drop_lease = redis::Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
    );
    let mut side: Option<redis::Connection> = None;
    loop {
        let job = match d.breserve(TOPIC, TTR, Duration::from_secs(1)) {
            Ok(Some(job)) => job,
            Ok(None) => continue,
            Err(_) => {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let conn = match side.take().map(Ok).unwrap_or_else(|| redis::Client::open(url)?.get_connection()) {
            Ok(c) => side.insert(c),
            Err(_) => continue, // the reservation runs out and the job comes back
        };
        let lease = format!("chaos:lease:{}", job.id);
        let taken: redis::RedisResult<Option<String>> =
            redis::cmd("SET").arg(&lease).arg(&job.receipt).arg("NX").arg("PXAT").arg(millis(job.deadline)).query(conn);
        let step = match taken {
            Ok(None) => conn.rpush::<_, _, ()>("chaos:violations", format!("{} {}", job.id, job.receipt)),
            Ok(Some(_)) => Ok(()),
            Err(e) => Err(e),
        };
        if step.is_err() {
            side = None;
            continue;
        }
        // Work: usually quick; sometimes longer than the ttr, so the job is
        // handed out again while this worker still thinks it holds it.
        let work =
            if rng.below(100) == 0 { TTR + Duration::from_millis(300) } else { Duration::from_millis(rng.below(20)) };
        std::thread::sleep(work);
        let roll = rng.below(100);
        let outcome = if roll < 2 {
            drop_lease.key(&lease).arg(&job.receipt).invoke::<i64>(conn).map(|_| d.bury(&job))
        } else if roll < 8 {
            drop_lease.key(&lease).arg(&job.receipt).invoke::<i64>(conn).map(|_| d.release(&job, None))
        } else {
            // Recorded before the ack: a worker killed in between leaves a
            // job that is done and comes back (at least once), never one
            // acked and unrecorded.
            conn.sadd::<_, _, ()>("chaos:done", &job.id)
                .and_then(|_| drop_lease.key(&lease).arg(&job.receipt).invoke::<i64>(conn))
                .map(|_| d.ack(&job))
        };
        if outcome.is_err() {
            side = None;
        }
    }
}

// ------------------------------------------------------------ orchestrator

struct Workers {
    url: String,
    children: Vec<Child>,
    started: u64,
}

impl Workers {
    fn spawn(&mut self) -> Result<Child, String> {
        self.started += 1;
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        Command::new(exe)
            .args(["worker", &self.url, &(self.started * 7919 + u64::from(std::process::id())).to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("spawn worker: {e}"))
    }

    fn kill(&mut self, i: usize) -> Result<(), String> {
        let _ = self.children[i].kill(); // SIGKILL
        let _ = self.children[i].wait();
        self.children[i] = self.spawn()?;
        Ok(())
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn orchestrate() -> Result<String, String> {
    let jobs = env_num("CHAOS_JOBS", 3000);
    let chaos_for = Duration::from_secs(env_num("CHAOS_SECONDS", 20));
    let mut rng = Rng::new(u64::from(std::process::id()) ^ millis(SystemTime::now()));
    let mut redis = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always", "--save", ""]);
    let names = names();
    let conf = server_conf(redis.port(), 100, names.conf_line());
    let d = client(&redis.url()).map_err(|e| e.to_string())?;

    // Due times spread over most of the chaos, so kills land while jobs flow.
    let spread = (chaos_for.as_millis() as u64 * 4 / 5).max(1);
    let batch: Vec<Job> = (0..jobs)
        .map(|i| {
            Job::new(TOPIC, format!("job-{i}"), Duration::from_millis(rng.below(spread)))
                .body(format!("body-{i}"))
                .max_attempts(MAX_ATTEMPTS)
                .backoff(Backoff::fixed(Duration::from_millis(100)))
        })
        .collect();
    d.push_many(&batch).map_err(|e| format!("push: {e}"))?;

    let mut servers: Vec<DelayerProcess> = (0..SERVERS).map(|_| DelayerProcess::start(BIN, &conf)).collect();
    let mut workers = Workers { url: redis.url(), children: Vec::new(), started: 0 };
    for _ in 0..WORKERS {
        let child = workers.spawn()?;
        workers.children.push(child);
    }

    // Chaos: a kill every 50-300 ms; mostly workers, sometimes a server,
    // twice Redis itself.
    let kills = chaos_kit::kill_at_random(&mut rng, chaos_for, &mut redis, &mut servers, &conf, 6, |r| {
        workers.kill(r.below(WORKERS as u64) as usize)
    })?;
    let (worker_kills, server_kills, redis_crashes) = (kills.workers, kills.servers, kills.redis);

    // Calm: let everything finish (worst case a job waits out its ttr and
    // backoff a few times). The wait is for progress, not a fixed time: a big
    // run (CHAOS_JOBS) on a loaded machine drains slowly but steadily, while
    // a stall shows as a minute without a job leaving.
    let mut conn = redis.connection();
    let left_now = |conn: &mut redis::Connection| -> redis::RedisResult<(u64, u64, u64)> {
        redis::pipe().zcard(names.pool(TOPIC)).llen(names.ready(TOPIC)).zcard(names.reserved(TOPIC)).query(conn)
    };
    let mut before = u64::MAX;
    let settled = loop {
        let settled = wait_until(Duration::from_secs(60), || left_now(&mut conn).is_ok_and(|l| l == (0, 0, 0)));
        let now = left_now(&mut conn).map(|(p, r, h)| p + r + h).unwrap_or(u64::MAX);
        if settled || now >= before {
            break settled;
        }
        before = now;
    };
    drop(workers);
    let left = left_now(&mut conn).map_err(|e| e.to_string())?;
    if !settled {
        return Err(format!("the queue stopped draining for a minute: pool, ready, reserved = {left:?}"));
    }

    // Account for every id.
    let q = |e: redis::RedisError| e.to_string();
    let done: HashSet<String> = conn.smembers("chaos:done").map_err(q)?;
    let dead_list: Vec<String> = conn.lrange(names.dead(TOPIC), 0, -1).map_err(q)?;
    let dead: HashSet<String> = dead_list.iter().cloned().collect();
    if dead.len() != dead_list.len() {
        return Err(format!("an id is twice in the dead letters ({} entries, {} ids)", dead_list.len(), dead.len()));
    }
    let violations: Vec<String> = conn.lrange("chaos:violations", 0, -1).map_err(q)?;
    if !violations.is_empty() {
        return Err(format!("held by two workers at once: {:?}", &violations[..violations.len().min(10)]));
    }
    let mut lost = Vec::new();
    for i in 0..jobs {
        let id = format!("job-{i}");
        let bucket = names.bucket(TOPIC, &id);
        let exists: bool = conn.exists(&bucket).map_err(q)?;
        if dead.contains(&id) {
            let reason: Option<String> = conn.hget(&bucket, "dead_reason").map_err(q)?;
            if reason.is_none() {
                return Err(format!("{id} is on the dead-letter list without its job data"));
            }
        } else if exists {
            return Err(format!("{id} still has job data but is nowhere: lost in the middle"));
        } else if !done.contains(&id) {
            lost.push(id);
        }
    }
    if !lost.is_empty() {
        return Err(format!("{} job(s) gone without being worked, e.g. {:?}", lost.len(), &lost[..lost.len().min(10)]));
    }
    let malformed: u64 = conn.llen(names.malformed(TOPIC)).map_err(q)?;
    if malformed != 0 {
        return Err(format!("{malformed} id(s) parked as malformed"));
    }
    Ok(format!(
        "{jobs} jobs: {} done, {} dead; {worker_kills} workers, {server_kills} servers killed, redis crashed {redis_crashes}x",
        jobs as usize - dead.len(),
        dead.len()
    ))
}
