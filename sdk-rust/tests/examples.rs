//! The READMEs' Rust examples are the files in sdk-rust/examples, verbatim,
//! and those files work: each is built and run as a process of its own
//! against a real redis-server, the workers through a Redis restart.

use delayer::{Delayer, Job};
use redis::Commands;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};
use testkit::{wait_until, RedisServer, DEADLINE};

/// Shown in the repository's README.md.
const EXAMPLES: [&str; 3] = ["producer", "worker", "reliable_worker"];
/// Shown in sdk-rust/README.md.
const SDK_README_EXAMPLES: [&str; 1] = ["task_worker"];

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The path of example `name`, built (once per test run) from the current
/// sources, so a test never runs a stale binary.
fn example(name: &str) -> PathBuf {
    static BUILT: OnceLock<HashMap<String, PathBuf>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let out = Command::new(env!("CARGO"))
            .args(["build", "-q", "-p", "delayer", "--examples", "--message-format=json"])
            .current_dir(manifest_dir())
            .stderr(Stdio::inherit())
            .output()
            .expect("run cargo build --examples");
        assert!(out.status.success(), "cargo build --examples failed");
        // One JSON object per line; the built binaries carry "executable".
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| line.split("\"executable\":\"").nth(1)?.split('"').next().map(PathBuf::from))
            .filter_map(|exe| Some((exe.file_name()?.to_str()?.to_string(), exe.clone())))
            .collect()
    });
    built.get(name).unwrap_or_else(|| panic!("example {name} was not built: {built:?}")).clone()
}

/// A running example, killed on drop, its output lines on channels.
struct Running {
    child: Child,
    stdout: Receiver<String>,
    stderr: Receiver<String>,
}

impl Running {
    fn start(name: &str, redis: &RedisServer) -> Running {
        let mut child = Command::new(example(name))
            .env("DELAYER_URL", redis.url())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the example");
        let stdout = lines(child.stdout.take().expect("stdout"));
        let stderr = lines(child.stderr.take().expect("stderr"));
        Running { child, stdout, stderr }
    }

    /// The next stdout line, within the deadline.
    fn said(&self) -> String {
        self.stdout.recv_timeout(DEADLINE).unwrap_or_else(|_| panic!("no output; stderr: {:?}", self.errors()))
    }

    /// Waits for a stderr line containing `text`.
    fn complained(&self, text: &str) -> String {
        let end = Instant::now() + DEADLINE;
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            match self.stderr.recv_timeout(left) {
                Ok(line) if line.contains(text) => return line,
                Ok(_) => {}
                Err(_) => break,
            }
        }
        panic!("no complaint containing {text:?}")
    }

    fn errors(&self) -> Vec<String> {
        self.stderr.try_iter().collect()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn lines(from: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(from).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// Makes job `id` ready as the server would: out of the pool, onto its queue.
fn make_ready(conn: &mut redis::Connection, topic: &str, id: &str) {
    let _: () = conn.zrem("delayer:job_pool", id).expect("zrem");
    let _: () = conn.lpush(format!("delayer:ready_queue:{topic}"), id).expect("lpush");
}

fn push_ready(redis: &RedisServer, job: Job) {
    let (topic, id) = (job.topic.clone(), job.id.clone());
    Delayer::open(&redis.url()).expect("client").push_job(&job).expect("push");
    make_ready(&mut redis.connection(), &topic, &id);
}

/// Whether a client is blocked in Redis on `cmd`.
fn blocked_on(redis: &RedisServer, cmd: &str) -> bool {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut redis.connection()).expect("CLIENT LIST");
    list.lines().any(|l| l.contains(" flags=b ") && l.contains(&format!(" cmd={cmd} ")))
}

/// The ```rust block after `<!-- sdk-rust/examples/NAME.rs -->` in README.md.
fn readme_block(readme: &str, name: &str) -> Option<String> {
    let marker = format!("<!-- sdk-rust/examples/{name}.rs -->");
    let after = readme.split(&marker).nth(1)?;
    let body = after.trim_start().strip_prefix("```rust\n")?;
    Some(body[..body.find("\n```\n")? + 1].to_string())
}

#[test]
fn the_readme_shows_each_example_verbatim() {
    for (readme, names) in [("../README.md", &EXAMPLES[..]), ("README.md", &SDK_README_EXAMPLES[..])] {
        let text = std::fs::read_to_string(manifest_dir().join(readme)).expect("README");
        for name in names {
            let file = std::fs::read_to_string(manifest_dir().join(format!("examples/{name}.rs"))).expect("example");
            let block = readme_block(&text, name).unwrap_or_else(|| panic!("{readme} does not show {name}.rs"));
            assert!(block == file, "{readme}'s {name}.rs differs from sdk-rust/examples/{name}.rs: copy the file over");
        }
    }
}

#[test]
fn the_producer_schedules_cancels_and_is_told_of_a_taken_id() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let run = Command::new(example("producer")).env("DELAYER_URL", redis.url()).output().expect("run producer");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "producer failed: {}", String::from_utf8_lossy(&run.stderr));
    assert!(stdout.contains("kept the first job: id \"sms:7\" (topic \"sms\", due at "), "{stdout}");
    let in_pool: Vec<String> = conn.zrange("delayer:job_pool", 0, -1).expect("zrange");
    assert_eq!(in_pool, ["sms:8", "sms:7"], "order:42 cancelled, the others waiting");
    let body: String = conn.hget("delayer:job_bucket:sms:7", "body").expect("hget");
    assert!(body.contains("trial"), "the first sms:7 kept: {body}");
    let max_attempts: String = conn.hget("delayer:job_bucket:sms:8", "max_attempts").expect("hget");
    assert_eq!(max_attempts, "5");
}

#[test]
fn the_worker_carries_on_through_a_redis_restart() {
    let mut redis = RedisServer::start();
    let worker = Running::start("worker", &redis);
    push_ready(&redis, Job::new("sms", "a1", Duration::ZERO).body("hello"));
    assert_eq!(worker.said(), "sent a1: hello");

    assert!(wait_until(DEADLINE, || blocked_on(&redis, "brpop")), "the worker waits in BRPOP");
    redis.stop();
    assert!(worker.complained("trying again").contains("cannot use Redis"));
    redis.restart();
    push_ready(&redis, Job::new("sms", "a2", Duration::ZERO).body("after the restart"));
    assert_eq!(worker.said(), "sent a2: after the restart");
}

#[test]
fn the_reliable_worker_acks_releases_and_carries_on_through_a_redis_restart() {
    let mut redis = RedisServer::start();
    let mut conn = redis.connection();
    let worker = Running::start("reliable_worker", &redis);
    push_ready(&redis, Job::new("sms", "r1", Duration::ZERO).body("hello"));
    assert_eq!(worker.said(), "sent r1: hello");
    assert!(wait_until(DEADLINE, || !conn.exists::<_, bool>("delayer:job_bucket:r1").expect("exists")), "acked");

    // Failing work is released; after its last attempt it is a dead letter.
    push_ready(&redis, Job::new("sms", "r2", Duration::ZERO).max_attempts(1));
    assert!(worker.complained("r2 failed (no text), attempt 1 of 1").contains("r2"));
    let d = Delayer::open(&redis.url()).expect("client");
    assert!(wait_until(DEADLINE, || d.dead_letters("sms", 0, 10).expect("dead").iter().any(|l| l.id == "r2")));

    assert!(wait_until(DEADLINE, || blocked_on(&redis, "blmove")), "the worker waits in BLMOVE");
    redis.stop();
    assert!(worker.complained("trying again").contains("cannot use Redis"));
    redis.restart();
    push_ready(&redis, Job::new("sms", "r3", Duration::ZERO).body("after the restart"));
    assert_eq!(worker.said(), "sent r3: after the restart");
}

#[test]
fn the_task_worker_acks_records_failures_rides_out_a_restart_and_stops_on_sigterm() {
    let mut redis = RedisServer::start();
    let mut conn = redis.connection();
    let mut worker = Running::start("task_worker", &redis);
    push_ready(&redis, Job::new("sms", "w1", Duration::ZERO).body("hello"));
    assert_eq!(worker.said(), "sent w1: hello");
    assert!(wait_until(DEADLINE, || !conn.exists::<_, bool>("delayer:job_bucket:w1").expect("exists")), "acked");

    // A failing job is released with its error; after its last attempt it
    // is a dead letter that says why.
    push_ready(&redis, Job::new("sms", "w2", Duration::ZERO).max_attempts(1));
    assert!(worker.complained("w2 failed (no text), attempt 1 of 1").contains("w2"));
    let d = Delayer::open(&redis.url()).expect("client");
    assert!(wait_until(DEADLINE, || d.dead_letters("sms", 0, 10).expect("dead").iter().any(|l| l.id == "w2")));
    let why: Option<String> = conn.hget("delayer:job_bucket:w2", "last_error").expect("hget");
    assert_eq!(why.as_deref(), Some("no text"));

    assert!(wait_until(DEADLINE, || blocked_on(&redis, "blmove")), "the worker waits in breserve");
    redis.stop();
    assert!(worker.complained("trying again").contains("cannot use Redis"));
    redis.restart();
    push_ready(&redis, Job::new("sms", "w3", Duration::ZERO).body("after the restart"));
    assert_eq!(worker.said(), "sent w3: after the restart");

    let _ = Command::new("kill").arg("-TERM").arg(worker.child.id().to_string()).status();
    worker.complained("stopping");
    let mut status = None;
    assert!(wait_until(DEADLINE, || {
        status = worker.child.try_wait().expect("try_wait");
        status.is_some()
    }));
    assert!(status.is_some_and(|s| s.success()), "exits 0 on SIGTERM: {status:?}");
}
