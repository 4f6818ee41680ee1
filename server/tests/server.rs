//! The real `delayer` binary against a real redis-server: delivery exactly
//! once, never early, across several servers, Redis restarts and signals.

use delayer::{Delayer, Job};
use redis::Commands;
use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use testkit::{server_conf, wait_until, DelayerProcess, RedisServer, DEADLINE};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");

fn start_server(redis: &RedisServer, timer_ms: u64, extra: &str) -> DelayerProcess {
    DelayerProcess::start(BIN, &server_conf(redis.port(), timer_ms, extra))
}

/// Every id in the ready queues of `topics`, in queue order.
fn ready_ids(conn: &mut redis::Connection, topics: &[String]) -> Vec<String> {
    topics
        .iter()
        .flat_map(|t| conn.lrange::<_, Vec<String>>(format!("delayer:ready_queue:{t}"), 0, -1).expect("lrange"))
        .collect()
}

fn pool_size(conn: &mut redis::Connection) -> u64 {
    conn.zcard("delayer:job_pool").expect("zcard")
}

/// Asserts that `ids` holds each of `expected` exactly once.
fn assert_exactly_once(ids: &[String], expected: usize) {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for id in ids {
        *seen.entry(id).or_default() += 1;
    }
    let dups: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).take(5).collect();
    assert!(dups.is_empty(), "duplicates delivered: {dups:?}");
    assert_eq!(ids.len(), expected, "delivered {} of {expected}", ids.len());
}

fn topics(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("topic{i}")).collect()
}

#[test]
fn round_trip_through_the_server() {
    let redis = RedisServer::start();
    let _server = start_server(&redis, 50, "");
    let d = Delayer::open(&redis.url()).expect("client");
    d.push_job(&Job::new("order", "o1", Duration::from_millis(100)).body("close me")).expect("push");
    let got = d.bpop("order", DEADLINE).expect("bpop").expect("delivered");
    assert_eq!((got.id.as_str(), got.topic.as_str(), got.body_str()), ("o1", "order", Some("close me")));
}

#[test]
fn a_large_due_backlog_drains_exactly_once() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = Delayer::open(&redis.url()).expect("client");
    let topics = topics(10);
    let n = 100_000;
    let jobs: Vec<Job> = (0..n).map(|i| Job::new(&topics[i % 10], format!("job{i}"), Duration::ZERO)).collect();
    let due = d.push_many(&jobs).expect("push backlog");
    assert_eq!(pool_size(&mut conn), n as u64);

    let mut server = start_server(&redis, 1000, "");
    assert!(wait_until(Duration::from_secs(120), || pool_size(&mut conn) == 0), "backlog not drained");
    assert_exactly_once(&ready_ids(&mut conn, &topics), n);
    // Each topic's queue pops in due order (ties, same millisecond, in any order).
    let due_of: HashMap<String, SystemTime> = jobs.iter().map(|j| j.id.clone()).zip(due).collect();
    for topic in &topics {
        let mut queue: Vec<String> = conn.lrange(format!("delayer:ready_queue:{topic}"), 0, -1).expect("lrange");
        queue.reverse(); // RPOP order
        assert!(queue.windows(2).all(|w| due_of[&w[0]] <= due_of[&w[1]]), "{topic} is not in due order");
    }
    assert!(server.is_running());
}

#[test]
fn several_servers_never_deliver_an_id_twice() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = Delayer::open(&redis.url()).expect("client");
    let topics = topics(4);
    let n = 30_000;
    // Small batches and a short timer make the servers contend batch by batch.
    // At debug, each batch has a line: which server moved what.
    let servers: Vec<_> = (0..3).map(|_| start_server(&redis, 5, "batch_size = 50\nlog_level = debug")).collect();
    // Due over the next ~1.5 s, while all three servers are ticking.
    let jobs: Vec<Job> =
        (0..n).map(|i| Job::new(&topics[i % 4], format!("j{i}"), Duration::from_millis((i % 1500) as u64))).collect();
    d.push_many(&jobs).expect("push");
    assert!(wait_until(Duration::from_secs(60), || pool_size(&mut conn) == 0), "pool not drained");
    assert_exactly_once(&ready_ids(&mut conn, &topics), n);
    // Each server logs its batches after moving them: wait for the lines.
    let mut moved_by = Vec::new();
    let shared = wait_until(DEADLINE, || {
        moved_by = servers.iter().map(|s| s.output().contains("moved ")).collect();
        moved_by.iter().filter(|m| **m).count() >= 2
    });
    assert!(shared, "servers did not share the work: {moved_by:?}");
}

#[test]
fn nothing_is_delivered_before_its_due_time() {
    let redis = RedisServer::start();
    let _server = start_server(&redis, 1000, "");
    let d = Delayer::open(&redis.url()).expect("client");
    let n = 40;
    let mut due = HashMap::new();
    for i in 0..n {
        let id = format!("e{i}");
        let at = d.push("t", &id, Duration::from_millis(200 + 40 * i)).expect("push");
        due.insert(id, at);
    }
    for _ in 0..n {
        let job = d.bpop("t", DEADLINE).expect("bpop").expect("delivered");
        let now = SystemTime::now();
        let due_at = due[&job.id];
        // Redis and this test read the same machine clock.
        assert!(now >= due_at, "{} delivered {:?} early", job.id, due_at.duration_since(now).unwrap_or_default());
        let late = now.duration_since(due_at).unwrap_or_default();
        assert!(late < Duration::from_millis(1500), "{} delivered {late:?} late", job.id);
    }
}

#[test]
fn a_due_job_is_ready_within_milliseconds_when_the_server_knew_of_it() {
    let redis = RedisServer::start();
    let d = Delayer::open(&redis.url()).expect("client");
    let due = d.push("t", "soon", Duration::from_millis(1500)).expect("push");
    // timer_interval of 10 s: only the wake-up at the due time can deliver it in time.
    let _server = start_server(&redis, 10_000, "");
    let job = d.bpop("t", DEADLINE).expect("bpop").expect("delivered");
    let late = SystemTime::now().duration_since(due).expect("not early");
    assert_eq!(job.id, "soon");
    assert!(late < Duration::from_millis(300), "ready {late:?} after its due time");
}

#[test]
fn a_command_redis_refuses_is_logged_as_such_and_recovered_from() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let _: () = conn.set("delayer:job_pool", "not a zset").expect("set");
    let server = start_server(&redis, 50, "");
    let logged = server.wait_for_output(|o| o.contains("a tick failed") && o.contains("WRONGTYPE"));
    assert!(logged, "{}", server.output());
    assert!(!server.output().contains("redis unavailable"), "Redis was up: {}", server.output());

    let _: () = conn.del("delayer:job_pool").expect("del");
    let d = Delayer::open(&redis.url()).expect("client");
    d.push("t", "after-fix", Duration::ZERO).expect("push");
    assert_eq!(d.bpop("t", DEADLINE).expect("bpop").map(|m| m.id), Some("after-fix".into()));
    assert!(server.wait_for_output(|o| o.contains("ticks succeed again")), "{}", server.output());
}

#[test]
fn orphans_are_dropped_and_malformed_jobs_parked() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = Delayer::open(&redis.url()).expect("client");
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs();
    // Orphans: ids in the pool whose bucket expired long ago.
    for i in 0..5 {
        let _: () = conn.zadd("delayer:job_pool", format!("orphan{i}"), now - 10).expect("zadd");
    }
    // Malformed: a bucket with no topic, and a bucket that is not a hash.
    let _: () = conn.hset("delayer:job_bucket:notopic", "body", "x").expect("hset");
    let _: () = conn.zadd("delayer:job_pool", "notopic", now - 10).expect("zadd");
    let _: () = conn.set("delayer:job_bucket:string", "x").expect("set");
    let _: () = conn.zadd("delayer:job_pool", "string", now - 10).expect("zadd");
    d.push("t", "fine", Duration::ZERO).expect("push");

    // The summary's period made 200 ms (debug builds): it reports the orphans.
    let conf = server_conf(redis.port(), 50, "");
    let server = DelayerProcess::start_with_env(BIN, &conf, &[("DELAYER_TEST_SUMMARY_MS", "200")]);
    assert!(wait_until(DEADLINE, || pool_size(&mut conn) == 0), "pool not cleaned");
    let ready: Vec<String> = conn.lrange("delayer:ready_queue:t", 0, -1).expect("lrange");
    assert_eq!(ready, ["fine"]);
    let mut parked: Vec<String> = conn.lrange("delayer:malformed", 0, -1).expect("lrange");
    parked.sort();
    assert_eq!(parked, ["notopic", "string"]);
    let kept: bool = conn.exists("delayer:job_bucket:notopic").expect("exists");
    assert!(kept, "a malformed job's data is kept for inspection");
    assert!(wait_until(DEADLINE, || server.output().contains("orphans=5")), "{}", server.output());
    assert!(server.output().contains("malformed"), "malformed jobs are reported: {}", server.output());
}

#[test]
fn remove_before_due_prevents_delivery() {
    let redis = RedisServer::start();
    let _server = start_server(&redis, 20, "");
    let d = Delayer::open(&redis.url()).expect("client");
    d.push("t", "cancelled", Duration::from_millis(300)).expect("push");
    d.push("t", "kept", Duration::from_millis(400)).expect("push");
    assert!(d.remove("cancelled").expect("remove"));
    let got = d.bpop("t", DEADLINE).expect("bpop").expect("delivered");
    assert_eq!(got.id, "kept");
    assert_eq!(d.bpop("t", Duration::from_millis(300)).expect("bpop"), None);
}

#[test]
fn a_redis_restart_mid_run_loses_nothing() {
    let mut redis = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always", "--save", ""]);
    let mut conn = redis.connection();
    let d = Delayer::open(&redis.url()).expect("client");
    let topics = topics(3);
    let n = 6_000;
    let jobs: Vec<Job> =
        (0..n).map(|i| Job::new(&topics[i % 3], format!("r{i}"), Duration::from_millis((i % 3000) as u64))).collect();
    d.push_many(&jobs).expect("push");
    let mut server = start_server(&redis, 20, "batch_size = 100");
    // Let it move part of the work, then take Redis away and bring it back.
    assert!(wait_until(DEADLINE, || pool_size(&mut conn) < n as u64), "nothing moved");
    redis.stop();
    std::thread::sleep(Duration::from_millis(700)); // Redis stays down across several ticks.
    redis.restart();
    let mut conn = redis.connection();
    assert!(wait_until(Duration::from_secs(60), || pool_size(&mut conn) == 0), "pool not drained after restart");
    assert_exactly_once(&ready_ids(&mut conn, &topics), n);
    assert!(server.is_running());
    let logged = server.wait_for_output(|log| log.contains("redis unavailable") && log.contains("reachable again"));
    assert!(logged, "{}", server.output());
}

#[test]
fn sigterm_and_sigint_stop_cleanly_with_exit_0() {
    let redis = RedisServer::start();
    for signal in ["TERM", "INT"] {
        let mut server = start_server(&redis, 1000, "");
        assert!(wait_until(DEADLINE, || server.output().contains("starting")), "{}", server.output());
        server.signal(signal);
        let status = server.wait_exit(DEADLINE).expect("exited");
        assert!(status.success(), "SIG{signal}: {status:?}\n{}", server.output());
        assert!(server.output().contains("stopped"));
    }
}

#[test]
fn bad_configurations_exit_2_naming_the_key_and_line() {
    let cases = [
        ("[delayer]\ntimer_interval = soon\n", "timer_interval", ":2:"),
        ("[delayer]\ntimer_interval = 1000\nbatch = 5\n", "batch", ":3:"),
        ("[redis]\nport = 99999\n", "port", ":2:"),
        ("[redis]\n\nmax_active = -1\n", "max_active", ":3:"),
        ("[delayer]\nbatch_size = 0\n", "batch_size", ":2:"),
        ("[elsewhere]\nx = 1\n", "[elsewhere]", ":1:"),
        ("[delayer\n", "not valid INI", ":2:"),
    ];
    for (text, key, line) in cases {
        let dir = testkit::temp_dir("badconf");
        let path = dir.join("delayer.conf");
        std::fs::write(&path, text).expect("write");
        let out = Command::new(BIN).arg("-c").arg(&path).output().expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text:?}: {stderr}");
        assert!(stderr.contains(key) && stderr.contains(line), "{text:?}: {stderr}");
        assert!(stderr.contains(&path.display().to_string()), "names the file: {stderr}");
        let _ = std::fs::remove_dir_all(dir);
    }
    let missing = Command::new(BIN).args(["-c", "/nonexistent/delayer.conf"]).output().expect("run");
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/delayer.conf"));
}

#[test]
fn flags_behave_as_delayer_1x() {
    let version = Command::new(BIN).arg("-v").output().expect("run");
    assert!(version.status.success());
    assert!(String::from_utf8_lossy(&version.stdout).contains(env!("CARGO_PKG_VERSION")));
    let help = Command::new(BIN).arg("-h").output().expect("run");
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(help.status.success() && text.contains("--configuration") && text.contains("--daemon"), "{text}");
    // Without -c it finds ./delayer.conf.
    let redis = RedisServer::start();
    let dir = testkit::temp_dir("cwd");
    std::fs::write(dir.join("delayer.conf"), server_conf(redis.port(), 1000, "log_level = warning")).expect("write");
    let mut child = Command::new(BIN).current_dir(&dir).spawn().expect("run");
    std::thread::sleep(Duration::from_millis(300)); // a bad or missing file exits at once
    assert!(child.try_wait().expect("wait").is_none(), "did not start with ./delayer.conf");
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_pid_file_refuses_a_second_instance_and_daemon_mode_works() {
    let redis = RedisServer::start();
    let dir = testkit::temp_dir("daemon");
    let pid_path = dir.join("run/delayer.pid");
    let conf = server_conf(
        redis.port(),
        1000,
        // log_level = debug: each batch has a line ("moved 1 [t=1]").
        &format!(
            "pid = {}\naccess_log = logs/access.log\nerror_log = logs/error.log\nlog_level = debug",
            pid_path.display()
        ),
    );
    let conf_path = dir.join("delayer.conf");
    std::fs::write(&conf_path, conf).expect("write");

    let parent = Command::new(BIN).arg("-d").arg("-c").arg(&conf_path).status().expect("run");
    assert!(parent.success(), "the launching process exits 0");
    assert!(wait_until(DEADLINE, || std::fs::read_to_string(&pid_path).is_ok_and(|s| s.ends_with('\n'))));
    let pid = std::fs::read_to_string(&pid_path).expect("pid").trim().to_string();
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists(), "daemon {pid} runs");

    let second = Command::new(BIN).arg("-c").arg(&conf_path).output().expect("run");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("another delayer") && stderr.contains(&pid), "{stderr}");

    // The daemon works: it moves a job, and logs to its files (relative to the conf).
    let d = Delayer::open(&redis.url()).expect("client");
    d.push("t", "by-daemon", Duration::ZERO).expect("push");
    assert_eq!(d.bpop("t", DEADLINE).expect("bpop").map(|m| m.id), Some("by-daemon".into()));
    let access = dir.join("logs/access.log");
    assert!(wait_until(DEADLINE, || std::fs::read_to_string(&access).is_ok_and(|s| s.contains("moved 1"))));

    let _ = Command::new("kill").arg(&pid).status();
    assert!(wait_until(DEADLINE, || !pid_path.exists()), "pid file removed on exit");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_wrong_password_is_a_clear_error_not_a_hang() {
    let redis = RedisServer::start_with(&["--save", "", "--requirepass", "right-one"]);
    let conf = format!("[redis]\nport = {}\npassword = wrong-one\n", redis.port());
    let mut server = DelayerProcess::start(BIN, &conf);
    let status = server.wait_exit(DEADLINE).expect("exits instead of hanging");
    let log = server.output();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(log.contains("refused our credentials"), "{log}");
    assert!(!log.contains("wrong-one") && !log.contains("right-one"), "password in the log: {log}");
}

#[test]
fn redis_down_at_start_is_waited_for() {
    let port = testkit::free_port();
    // At debug, each batch has a line ("moved 1 [t=1]").
    let mut server = DelayerProcess::start(BIN, &server_conf(port, 50, "log_level = debug"));
    assert!(wait_until(DEADLINE, || server.output().contains("not reachable yet")), "{}", server.output());
    assert!(server.is_running());
    let redis = RedisServer::start_on(port, &["--save", ""]);
    let d = Delayer::open(&redis.url()).expect("client");
    d.push("t", "after-start", Duration::ZERO).expect("push");
    assert_eq!(d.bpop("t", DEADLINE).expect("bpop").map(|m| m.id), Some("after-start".into()));
    assert!(server.wait_for_output(|o| o.contains("moved 1")), "{}", server.output());
}

#[test]
fn interop_delayer_1x_push_is_delivered_and_popped_by_us() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let _server = start_server(&redis, 50, "");
    let due = testkit::delayer_1x_push(&mut conn, "legacy-1", "legacy", "hello from 1.x", 1);
    let d = Delayer::open(&redis.url()).expect("client");
    let got = d.bpop("legacy", DEADLINE).expect("bpop").expect("delivered");
    assert_eq!((got.id.as_str(), got.body_str()), ("legacy-1", Some("hello from 1.x")));
    assert!(SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs() >= due, "not early");

    // Ours, through the server, consumed as a 1.x client does.
    d.push_job(&Job::new("legacy", "ours-1", Duration::from_millis(50)).body("hello from 2.x")).expect("push");
    let (_, id): (String, String) = conn.brpop("delayer:ready_queue:legacy", 30.0).expect("brpop");
    let bucket: HashMap<String, String> = conn.hgetall(format!("delayer:job_bucket:{id}")).expect("hgetall");
    let _: () = conn.del(format!("delayer:job_bucket:{id}")).expect("del");
    assert_eq!(id, "ours-1");
    assert_eq!(bucket.get("body").map(String::as_str), Some("hello from 2.x"));
}
