//! Kill -9 of servers and a Redis crash while jobs are moved, in both key
//! layouts: every job reaches its topic's ready queue exactly once, with its
//! job data, and none is parked as malformed.
//!
//! The at-least-once chaos (`chaos.rs`) kills workers mid-job; this one is
//! the move itself at scale: jobs spread over topics and due times, two
//! servers killed and restarted at random, Redis killed (AOF, fsync always)
//! and restarted twice. Sized by CHAOS_MOVE_JOBS (default 20,000) and
//! CHAOS_MOVE_SECONDS (default 8); the 1,000,000-job run is recorded in
//! bench/RESULTS.md with its command.

use delayer::{Delayer, Job, Layout};
use std::collections::HashSet;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use testkit::{server_conf, wait_until, DelayerProcess, LayoutNames, RedisServer};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");
const TOPICS: usize = 10;
const SERVERS: usize = 2;

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// xorshift64*: kill times without a dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }
}

fn run(layout: Layout) -> String {
    let names = LayoutNames { per_topic: layout == Layout::Topic };
    let jobs = env_num("CHAOS_MOVE_JOBS", 20_000) as usize;
    let chaos_for = Duration::from_secs(env_num("CHAOS_MOVE_SECONDS", 8));
    let seed = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1) | 1;
    let mut rng = Rng(seed);
    let mut redis = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always", "--save", ""]);
    let conf = server_conf(redis.port(), 100, &format!("{}\nbatch_size = 1000", names.conf_line()));
    let d = Delayer::open(&redis.url()).expect("client").with_layout(layout).expect("layout");
    let topics: Vec<String> = (0..TOPICS).map(|t| format!("c{t}")).collect();

    // Due times over most of the chaos: kills land while jobs are moved.
    let spread = (chaos_for.as_millis() as u64 * 4 / 5).max(1);
    for chunk in (0..jobs).collect::<Vec<_>>().chunks(10_000) {
        let batch: Vec<Job> = chunk
            .iter()
            .map(|&i| Job::new(&topics[i % TOPICS], format!("m{i}"), Duration::from_millis(rng.below(spread))))
            .collect();
        d.push_many(&batch).expect("push_many");
    }
    let pushed = Instant::now();
    let mut servers: Vec<DelayerProcess> = (0..SERVERS).map(|_| DelayerProcess::start(BIN, &conf)).collect();
    let (mut server_kills, mut redis_crashes) = (0, 0);
    let redis_crash_at = [chaos_for / 3, chaos_for * 2 / 3];
    while pushed.elapsed() < chaos_for {
        std::thread::sleep(Duration::from_millis(100 + rng.below(400)));
        if redis_crashes < redis_crash_at.len() && pushed.elapsed() >= redis_crash_at[redis_crashes] {
            redis.crash_and_restart();
            redis_crashes += 1;
        } else {
            let i = rng.below(SERVERS as u64) as usize;
            servers[i].signal("KILL");
            servers[i] = DelayerProcess::start(BIN, &conf);
            server_kills += 1;
        }
    }

    let mut conn = redis.connection();
    let waiting = |conn: &mut redis::Connection| -> u64 {
        let mut pipe = redis::pipe();
        for t in &topics {
            pipe.zcard(names.pool(t));
        }
        pipe.query::<Vec<u64>>(conn).map(|n| n.iter().sum()).unwrap_or(u64::MAX)
    };
    let drained = wait_until(Duration::from_secs(300), || waiting(&mut conn) == 0);
    let outputs: Vec<String> = servers.iter().map(DelayerProcess::output).collect();
    assert!(drained, "{} job(s) never moved\n{}", waiting(&mut conn), outputs.join("\n---\n"));

    // Every id once across the ready queues, in its own topic's, job data kept.
    let mut seen = HashSet::with_capacity(jobs);
    for t in &topics {
        let ready: Vec<String> =
            redis::cmd("LRANGE").arg(names.ready(t)).arg(0).arg(-1).query(&mut conn).expect("LRANGE");
        for id in ready {
            let i: usize = id.trim_start_matches('m').parse().expect("an id pushed here");
            assert_eq!(&topics[i % TOPICS], t, "{id} in the wrong topic's ready queue");
            assert!(seen.insert(id.clone()), "{id} moved twice");
        }
        let malformed: u64 = redis::cmd("LLEN").arg(names.malformed(t)).query(&mut conn).expect("LLEN");
        assert_eq!(malformed, 0, "ids parked as malformed in {t}");
    }
    assert_eq!(seen.len(), jobs, "jobs lost: {} of {jobs} moved", seen.len());
    for chunk in (0..jobs).collect::<Vec<_>>().chunks(10_000) {
        let mut pipe = redis::pipe();
        for &i in chunk {
            pipe.exists(names.bucket(&topics[i % TOPICS], &format!("m{i}")));
        }
        let kept: Vec<bool> = pipe.query(&mut conn).expect("EXISTS");
        assert!(kept.iter().all(|&k| k), "a moved job lost its data");
    }
    format!("{jobs} jobs moved once each; {server_kills} servers killed, redis crashed {redis_crashes}x")
}

#[test]
fn kill_9_and_a_redis_crash_move_every_job_once_in_the_classic_layout() {
    println!("classic: {}", run(Layout::Classic));
}

#[test]
fn kill_9_and_a_redis_crash_move_every_job_once_in_the_per_topic_layout() {
    println!("topic: {}", run(Layout::Topic));
}
