//! Kill -9 at random points while topics are paused and resumed at random,
//! then check what a pause promises (PROTOCOL.md, "Flow control (pause)").
//!
//! The approach of tests/chaos.rs, with flow control added. Jobs of three
//! topics, due after small random delays, go through real processes: two
//! `delayer` servers, six workers (this binary, run again as `chaos_flow
//! worker`: per topic one on breserve, the one-job reserve script with its
//! gate wait, and one polling reserve_many, the batch script) and a
//! redis-server with `appendfsync always`. While they work, the orchestrator
//! kills workers and servers with SIGKILL at random moments and crashes Redis
//! twice, and a controller thread pauses and resumes the topics at random
//! through the SDK. It records each pause interval in Redis's clock:
//!
//! - start: `flow(topic).paused_since` read right after `pause` (the time
//!   flow.lua wrote; a pause retried after a Redis crash keeps the first);
//! - end: the flow hash's `resumed`, read right after `resume` (the time
//!   the resume's flow.lua wrote), whose `last_paused` must be that start.
//!
//! Every hand-out is recorded by its worker right after the reservation:
//! topic, id, receipt and the hand-out time `deadline - ttr`, which is the
//! TIME reserve.lua read (in milliseconds, floored, as flow.lua's). At the
//! end, with every topic resumed and the queue drained, it checks:
//!
//! - nothing handed out while paused: no hand-out with `start < t < end`
//!   for an interval of its topic. Both times are TIME read inside atomic
//!   scripts, which Redis runs one after another, so no tolerance is needed
//!   beyond the millisecond the two floor to (`t == start` or `t == end`
//!   cannot be ordered and is allowed);
//! - every pause held: each resume found its own pause (`last_paused`);
//! - nothing lost: every job was worked (done set) and acked, or is a dead
//!   letter; no job data left anywhere (pool, flow pool, ready, reserved);
//! - nothing held twice: each reservation takes a lease that expires at its
//!   deadline (`SET NX PXAT`); a reservation finding another's live lease is
//!   a violation (a job reserved when a pause lands may still be acked or
//!   released: only new hand-outs count);
//! - nothing doubled: no id twice in a dead-letter list;
//! - the rate limit held: `flow-c` is limited (R jobs/s, burst B) from
//!   before its first push, so each of its hand-outs needed a job made
//!   ready after that, and the n-th hand-out (in Redis's time, retries and
//!   re-deliveries included) comes no earlier than the bucket allows:
//!   `n <= B + R * (t - t0)`, t0 read before the limit was set.
//!
//! Hand-outs whose worker was killed (or whose reply a Redis crash lost)
//! between the reservation and its record cannot be checked: the count of
//! receipts issued minus those recorded is reported.
//!
//! `harness = false`: this file is its own main. Size it with CHAOS_JOBS
//! (default 2000 per layout) and CHAOS_SECONDS (default 12 per layout). It
//! runs both layouts, one after the other, unless CHAOS_LAYOUT names one
//! ("topic", or "classic").

mod chaos_kit;

use chaos_kit::Rng;
use delayer::{Backoff, Delayer, Job, Layout, Reserved};
use redis::Commands;
use std::collections::{HashMap, HashSet};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use testkit::{server_conf, wait_until, DelayerProcess, LayoutNames, RedisServer};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");
const NAME: &str = "chaos_flow_pause_holds_through_kill_9";
const TOPICS: [&str; 3] = ["flow-a", "flow-b", "flow-c"];
const TTR: Duration = Duration::from_millis(700);
const MAX_ATTEMPTS: u32 = 4;
/// Per topic: one breserve worker, one reserve_many worker.
const KINDS: [&str; 2] = ["breserve", "reserve_many"];
const SERVERS: usize = 2;
/// The topic under a rate limit for the whole run, and its burst.
const LIMITED: &str = "flow-c";
const BURST: u64 = 10;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("worker") {
        let seed = args.get(3).and_then(|s| s.parse().ok());
        let (Some(url), Some(seed), Some(topic), Some(layout), Some(kind)) =
            (args.get(2), seed, args.get(4), args.get(5), args.get(6))
        else {
            eprintln!("usage: chaos_flow worker <redis url> <seed> <topic> <layout> <kind>");
            return ExitCode::from(2);
        };
        worker(url, seed, topic, LayoutNames::named(layout), kind);
    }
    if let Some(exit) = chaos_kit::harness_says(&args, NAME) {
        return exit;
    }
    let layouts: Vec<&str> = match std::env::var("CHAOS_LAYOUT").unwrap_or_default().as_str() {
        "topic" => vec!["topic"],
        "" => vec!["classic", "topic"],
        _ => vec!["classic"],
    };
    for layout in layouts {
        let started = Instant::now();
        match orchestrate(LayoutNames::named(layout)) {
            Ok(summary) => {
                println!("{NAME} [{layout}] ... ok in {:.1} s\n  {summary}", started.elapsed().as_secs_f64())
            }
            Err(why) => {
                eprintln!("test {NAME} [{layout}] ... FAILED\n{why}");
                return ExitCode::FAILURE;
            }
        }
    }
    println!("test {NAME} ... ok");
    ExitCode::SUCCESS
}

fn client(url: &str, names: LayoutNames) -> delayer::Result<Delayer> {
    Delayer::open(url)?.with_layout(if names.per_topic { Layout::Topic } else { Layout::Classic })
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// Redis's clock in Unix ms.
fn redis_ms(conn: &mut redis::Connection) -> redis::RedisResult<u64> {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(conn)?;
    Ok(s * 1000 + us / 1000)
}

/// The scripts' `"s.mmm"` in Unix ms.
fn parse_ms(s: &str) -> Option<u64> {
    let (secs, frac) = s.split_once('.').unwrap_or((s, "0"));
    let frac = format!("{frac:0<3}");
    Some(secs.parse::<u64>().ok()? * 1000 + frac.get(..3)?.parse::<u64>().ok()?)
}

fn flow_key(names: LayoutNames, topic: &str) -> String {
    if names.per_topic {
        format!("delayer:{{{topic}}}:flow")
    } else {
        format!("delayer:flow:{topic}")
    }
}

fn receipt_seq_key(names: LayoutNames, topic: &str) -> String {
    if names.per_topic {
        format!("delayer:{{{topic}}}:receipt_seq")
    } else {
        "delayer:receipt_seq".into()
    }
}

// ------------------------------------------------------------------ worker

/// A worker on one topic: reserve (breserve, or reserve_many of up to 3),
/// record the hand-out, take the lease, work, then ack (mostly), release or
/// bury. Redis errors are waited out. It never returns: it is killed.
fn worker(url: &str, seed: u64, topic: &str, names: LayoutNames, kind: &str) -> ! {
    let mut rng = Rng::new(seed);
    let d = match client(url, names) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("worker: {e}");
            std::process::exit(1)
        }
    };
    let drop_lease = redis::Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
    );
    let mut side: Option<redis::Connection> = None;
    loop {
        let jobs: Vec<Reserved> = if kind == "reserve_many" {
            match d.reserve_many(topic, TTR, 3, &[]) {
                Ok((_, jobs)) if !jobs.is_empty() => jobs,
                Ok(_) => {
                    std::thread::sleep(Duration::from_millis(5 + rng.below(20)));
                    continue;
                }
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            }
        } else {
            match d.breserve(topic, TTR, Duration::from_secs(1)) {
                Ok(Some(job)) => vec![job],
                Ok(None) => continue,
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            }
        };
        let conn = match side.take().map(Ok).unwrap_or_else(|| redis::Client::open(url)?.get_connection()) {
            Ok(c) => side.insert(c),
            Err(_) => continue, // the reservations run out and the jobs come back
        };
        // The hand-outs first (topic, id, receipt, Redis's time of the
        // reservation), then each lease.
        let mut record = redis::pipe();
        for job in &jobs {
            let at = millis(job.deadline) - TTR.as_millis() as u64;
            record.rpush("chaos:handouts", format!("{} {} {} {at}", job.topic, job.id, job.receipt)).ignore();
            record
                .cmd("SET")
                .arg(format!("chaos:lease:{}:{}", job.topic, job.id))
                .arg(&job.receipt)
                .arg("NX")
                .arg("PXAT")
                .arg(millis(job.deadline));
        }
        let taken: redis::RedisResult<Vec<Option<String>>> = record.query(conn);
        let step = match taken {
            Ok(taken) => {
                let twice: Vec<String> = jobs
                    .iter()
                    .zip(&taken)
                    .filter(|(_, t)| t.is_none())
                    .map(|(job, _)| format!("{} {} {}", job.topic, job.id, job.receipt))
                    .collect();
                if twice.is_empty() {
                    Ok(())
                } else {
                    conn.rpush::<_, _, ()>("chaos:violations", twice)
                }
            }
            Err(e) => Err(e),
        };
        if step.is_err() {
            side = None;
            continue;
        }
        for job in &jobs {
            let lease = format!("chaos:lease:{}:{}", job.topic, job.id);
            // Usually quick; sometimes past the ttr, so the job is handed
            // out again while this worker still thinks it holds it.
            let work = if rng.below(100) == 0 {
                TTR + Duration::from_millis(300)
            } else {
                Duration::from_millis(rng.below(20))
            };
            std::thread::sleep(work);
            let roll = rng.below(100);
            let outcome = if roll < 2 {
                drop_lease.key(&lease).arg(&job.receipt).invoke::<i64>(conn).map(|_| d.bury(job))
            } else if roll < 8 {
                drop_lease.key(&lease).arg(&job.receipt).invoke::<i64>(conn).map(|_| d.release(job, None))
            } else {
                // Recorded before the ack, as chaos.rs.
                conn.sadd::<_, _, ()>("chaos:done", format!("{}:{}", job.topic, job.id))
                    .and_then(|_| drop_lease.key(&lease).arg(&job.receipt).invoke::<i64>(conn))
                    .map(|_| d.ack(job))
            };
            if outcome.is_err() {
                side = None;
                break;
            }
        }
    }
}

// -------------------------------------------------------------- controller

/// What the controller did: every pause interval `(topic, start, end)` in
/// Redis's clock (Unix ms), and counts.
#[derive(Default)]
struct FlowLog {
    intervals: Vec<(String, u64, u64)>,
    pauses: u64,
    /// Jobs in the topic's ready list right after a pause (all pauses): they
    /// must stay there until the resume.
    ready_at_pause: u64,
    /// Due jobs the pause held back, read right before each resume (flow's
    /// `held`).
    held_at_resume: u64,
    /// Resumes whose `last_paused` was not the pause's start.
    lost_pauses: Vec<String>,
}

/// Tries `f` until it works, waiting out a Redis crash: at most a minute.
fn retry<T, E: std::fmt::Display>(what: &str, mut f: impl FnMut() -> Result<T, E>) -> Result<T, String> {
    let started = Instant::now();
    loop {
        match f() {
            Ok(v) => return Ok(v),
            Err(e) if started.elapsed() > Duration::from_secs(60) => return Err(format!("{what}: {e}")),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Pauses and resumes the topics at random until `stop`, then resumes every
/// topic still paused.
fn control(url: &str, names: LayoutNames, seed: u64, stop: &AtomicBool) -> Result<FlowLog, String> {
    let mut rng = Rng::new(seed);
    let d = retry("client", || client(url, names))?;
    let redis_client = redis::Client::open(url).map_err(|e| e.to_string())?;
    let mut log = FlowLog::default();
    let mut paused: [Option<u64>; TOPICS.len()] = [None; TOPICS.len()];
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        let k = if stopping {
            match paused.iter().position(Option::is_some) {
                Some(k) => k,
                None => return Ok(log),
            }
        } else {
            // Mostly 50-450 ms apart; sometimes a resume is followed at once
            // by a pause, while the held jobs are being made ready.
            if rng.below(8) != 0 {
                std::thread::sleep(Duration::from_millis(50 + rng.below(400)));
            }
            rng.below(TOPICS.len() as u64) as usize
        };
        let topic = TOPICS[k];
        match paused[k] {
            None => {
                retry("pause", || d.pause(topic))?;
                let state = retry("flow", || d.flow(topic))?;
                let Some(since) = state.paused_since else {
                    return Err(format!("{topic}: not paused right after pause returned"));
                };
                paused[k] = Some(millis(since));
                log.pauses += 1;
                log.ready_at_pause += retry("llen", || {
                    redis_client.get_connection().and_then(|mut c| c.llen::<_, u64>(names.ready(topic)))
                })?;
            }
            Some(start) => {
                log.held_at_resume += retry("flow", || d.flow(topic))?.held;
                retry("resume", || d.resume(topic))?;
                let (resumed, last): (Option<String>, Option<String>) = retry("hmget", || {
                    redis_client.get_connection().and_then(|mut c| {
                        redis::cmd("HMGET").arg(flow_key(names, topic)).arg("resumed").arg("last_paused").query(&mut c)
                    })
                })?;
                let end = resumed.as_deref().and_then(parse_ms);
                let last = last.as_deref().and_then(parse_ms);
                let Some(end) = end.filter(|_| last == Some(start)) else {
                    log.lost_pauses
                        .push(format!("{topic}: paused at {start}, resumed {resumed:?} last_paused {last:?}"));
                    paused[k] = None;
                    continue;
                };
                log.intervals.push((topic.to_string(), start, end));
                paused[k] = None;
            }
        }
    }
}

// ------------------------------------------------------------ orchestrator

struct Workers {
    url: String,
    layout: &'static str,
    /// (topic, kind, process) per worker.
    children: Vec<(&'static str, &'static str, Child)>,
    started: u64,
}

impl Workers {
    fn spawn(&mut self, topic: &str, kind: &str) -> Result<Child, String> {
        self.started += 1;
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let seed = (self.started * 7919 + u64::from(std::process::id())).to_string();
        Command::new(exe)
            .args(["worker", &self.url, &seed, topic, self.layout, kind])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("spawn worker: {e}"))
    }

    fn kill(&mut self, i: usize) -> Result<(), String> {
        let (topic, kind, child) = &mut self.children[i];
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        let (topic, kind) = (*topic, *kind);
        self.children[i].2 = self.spawn(topic, kind)?;
        Ok(())
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for (_, _, c) in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn orchestrate(names: LayoutNames) -> Result<String, String> {
    let jobs = env_num("CHAOS_JOBS", 2000);
    let chaos_for = Duration::from_secs(env_num("CHAOS_SECONDS", 12));
    let mut rng = Rng::new(u64::from(std::process::id()) ^ millis(SystemTime::now()));
    let mut redis = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always", "--save", ""]);
    let conf = server_conf(redis.port(), 100, names.conf_line());
    let d = client(&redis.url(), names).map_err(|e| e.to_string())?;
    // Half the rate its jobs fall due at, so the limit holds them back
    // through the chaos; t0 read before the limit is set.
    let rate = (jobs as f64 / TOPICS.len() as f64 / chaos_for.as_secs_f64().max(1.0) / 2.0).max(5.0).round();
    let t0 = redis_ms(&mut redis.connection()).map_err(|e| e.to_string())?;
    d.set_rate_limit(LIMITED, rate, Some(BURST)).map_err(|e| format!("limit: {e}"))?;

    // Ids unique across topics (the classic layout's ids are global); due
    // times spread over most of the chaos.
    let spread = (chaos_for.as_millis() as u64 * 4 / 5).max(1);
    let ids: Vec<(&str, String)> = (0..jobs).map(|i| (TOPICS[i as usize % TOPICS.len()], format!("job-{i}"))).collect();
    let batch: Vec<Job> = ids
        .iter()
        .map(|(topic, id)| {
            Job::new(*topic, id.clone(), Duration::from_millis(rng.below(spread)))
                .body(format!("body-{id}"))
                .max_attempts(MAX_ATTEMPTS)
                .backoff(Backoff::fixed(Duration::from_millis(100)))
        })
        .collect();
    for chunk in batch.chunks(1000) {
        d.push_many(chunk).map_err(|e| format!("push: {e}"))?;
    }

    let mut servers: Vec<DelayerProcess> = (0..SERVERS).map(|_| DelayerProcess::start(BIN, &conf)).collect();
    let layout = if names.per_topic { "topic" } else { "classic" };
    let mut workers = Workers { url: redis.url(), layout, children: Vec::new(), started: 0 };
    for topic in TOPICS {
        for kind in KINDS {
            let child = workers.spawn(topic, kind)?;
            workers.children.push((topic, kind, child));
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let controller = {
        let (url, stop, seed) = (redis.url(), stop.clone(), rng.next());
        std::thread::spawn(move || control(&url, names, seed, &stop))
    };

    // Chaos: a kill every 50-300 ms; mostly workers, sometimes a server,
    // twice Redis itself.
    let kills = chaos_kit::kill_at_random(&mut rng, chaos_for, &mut redis, &mut servers, &conf, 5, |r| {
        workers.kill(r.below(workers.children.len() as u64) as usize)
    })?;
    let (worker_kills, server_kills, redis_crashes) = (kills.workers, kills.servers, kills.redis);
    // Every topic resumed, then calm.
    stop.store(true, Ordering::Relaxed);
    let log = controller.join().map_err(|_| "the controller panicked".to_string())??;

    // Let everything finish; the wait is for progress, as chaos.rs.
    let mut conn = redis.connection();
    let left_now = |conn: &mut redis::Connection| -> redis::RedisResult<u64> {
        let mut p = redis::pipe();
        for topic in TOPICS {
            p.zcard(names.pool(topic)).llen(names.ready(topic)).zcard(names.reserved(topic));
            if !names.per_topic {
                p.zcard(format!("delayer:flow_pool:{topic}"));
            }
        }
        Ok(p.query::<Vec<u64>>(conn)?.iter().sum())
    };
    let mut before = u64::MAX;
    let settled = loop {
        let settled = wait_until(Duration::from_secs(60), || left_now(&mut conn).is_ok_and(|l| l == 0));
        let now = left_now(&mut conn).unwrap_or(u64::MAX);
        if settled || now >= before {
            break settled;
        }
        before = now;
    };
    drop(workers);
    if !settled {
        return Err(format!(
            "the queue stopped draining for a minute: {} job(s) left",
            left_now(&mut conn).unwrap_or(0)
        ));
    }

    let q = |e: redis::RedisError| e.to_string();
    if !log.lost_pauses.is_empty() {
        return Err(format!("pauses lost (a resume did not find its pause): {:?}", log.lost_pauses));
    }
    for topic in TOPICS {
        let paused: Option<String> = conn.hget(flow_key(names, topic), "paused").map_err(q)?;
        if paused.is_some() {
            return Err(format!("{topic} still paused at the end"));
        }
    }

    // No hand-out inside a pause of its topic.
    let records: Vec<String> = conn.lrange("chaos:handouts", 0, -1).map_err(q)?;
    let mut intervals: HashMap<&str, Vec<(u64, u64)>> = HashMap::new();
    for (topic, start, end) in &log.intervals {
        intervals.entry(topic.as_str()).or_default().push((*start, *end));
    }
    let (mut inside, mut at_start, mut at_end, mut near) = (Vec::new(), 0u64, 0u64, 0u64);
    let mut receipts: HashSet<(String, String)> = HashSet::new();
    let mut limited_at: Vec<u64> = Vec::new();
    for r in &records {
        let f: Vec<&str> = r.split(' ').collect();
        let [topic, _id, receipt, at] = f.as_slice() else { return Err(format!("bad hand-out record {r:?}")) };
        let at: u64 = at.parse().map_err(|_| format!("bad hand-out record {r:?}"))?;
        receipts.insert((topic.to_string(), receipt.to_string()));
        if *topic == LIMITED {
            limited_at.push(at);
        }
        for &(start, end) in intervals.get(topic).map(Vec::as_slice).unwrap_or(&[]) {
            if start < at && at < end {
                inside.push(format!("{r} in pause {start}..{end}"));
            } else if at == start {
                at_start += 1;
            } else if at == end {
                at_end += 1;
            } else if at + 20 > start && at < end + 20 {
                near += 1;
            }
        }
    }
    if !inside.is_empty() {
        return Err(format!(
            "{} hand-out(s) while their topic was paused, e.g. {:?}",
            inside.len(),
            &inside[..inside.len().min(10)]
        ));
    }
    // The limit: the n-th hand-out of the limited topic no sooner than its
    // n-th token (1 ms for the times' flooring).
    limited_at.sort_unstable();
    let over: Vec<String> = limited_at
        .iter()
        .enumerate()
        .filter(|(i, at)| {
            (*i as f64 + 1.0) > BURST as f64 + rate * ((**at + 1).saturating_sub(t0)) as f64 / 1000.0 + 1e-6
        })
        .map(|(i, at)| format!("hand-out {} at +{} ms", i + 1, at.saturating_sub(t0)))
        .collect();
    if !over.is_empty() {
        return Err(format!(
            "{LIMITED} (limit {rate}/s, burst {BURST}): {} hand-out(s) faster than the limit, e.g. {:?}",
            over.len(),
            &over[..over.len().min(10)]
        ));
    }
    let mut issued = 0u64;
    if names.per_topic {
        for topic in TOPICS {
            issued += conn.get::<_, Option<u64>>(receipt_seq_key(names, topic)).map_err(q)?.unwrap_or(0);
        }
    } else {
        issued = conn.get::<_, Option<u64>>(receipt_seq_key(names, "")).map_err(q)?.unwrap_or(0);
    }

    // Account for every id, as chaos.rs.
    let done: HashSet<String> = conn.smembers("chaos:done").map_err(q)?;
    let violations: Vec<String> = conn.lrange("chaos:violations", 0, -1).map_err(q)?;
    if !violations.is_empty() {
        return Err(format!("held by two workers at once: {:?}", &violations[..violations.len().min(10)]));
    }
    let mut dead: HashSet<String> = HashSet::new();
    for topic in TOPICS {
        let list: Vec<String> = conn.lrange(names.dead(topic), 0, -1).map_err(q)?;
        let n = list.len();
        let ids: HashSet<String> = list.into_iter().map(|id| format!("{topic}:{id}")).collect();
        if ids.len() != n {
            return Err(format!("an id is twice in {topic}'s dead letters ({n} entries, {} ids)", ids.len()));
        }
        dead.extend(ids);
    }
    let mut lost = Vec::new();
    for (topic, id) in &ids {
        let key = format!("{topic}:{id}");
        let bucket = names.bucket(topic, id);
        let exists: bool = conn.exists(&bucket).map_err(q)?;
        if dead.contains(&key) {
            let reason: Option<String> = conn.hget(&bucket, "dead_reason").map_err(q)?;
            if reason.is_none() {
                return Err(format!("{key} is on the dead-letter list without its job data"));
            }
        } else if exists {
            return Err(format!("{key} still has job data but is nowhere: lost in the middle"));
        } else if !done.contains(&key) {
            lost.push(key);
        }
    }
    if !lost.is_empty() {
        return Err(format!("{} job(s) gone without being worked, e.g. {:?}", lost.len(), &lost[..lost.len().min(10)]));
    }
    for topic in TOPICS {
        let malformed: u64 = conn.llen(names.malformed(topic)).map_err(q)?;
        if malformed != 0 {
            return Err(format!("{malformed} id(s) parked as malformed"));
        }
    }
    let paused_ms: u64 = log.intervals.iter().map(|(_, s, e)| e - s).sum();
    Ok(format!(
        "{jobs} jobs on {} topics: {} done, {} dead, 0 lost, 0 doubled, 0 held twice; \
         {worker_kills} workers, {server_kills} servers killed, redis crashed {redis_crashes}x; \
         {} pauses ({:.1} s paused in all, {} jobs ready at a pause, {} held at a resume, summed); \
         {} hand-outs recorded ({issued} issued, {} unrecorded: worker killed or reply lost in between), \
         0 inside a pause, {at_start} in a pause's first millisecond, {at_end} in its resume's, \
         {near} within 20 ms outside one; {LIMITED} limited to {rate}/s (burst {BURST}): {} hand-outs, \
         none faster",
        TOPICS.len(),
        jobs as usize - dead.len(),
        dead.len(),
        log.pauses,
        paused_ms as f64 / 1000.0,
        log.ready_at_pause,
        log.held_at_resume,
        records.len(),
        issued.saturating_sub(receipts.len() as u64),
        limited_at.len(),
    ))
}
