//! A hostile, damaged or struggling Redis under the real `delayer` binary:
//! what the server reads there is input. Grouped by class: numbers read from
//! Redis (out of range, infinite, not numbers), panics, the eviction policy,
//! and a stalled Redis (SIGSTOP).

use delayer::{Delayer, Job};
use redis::Commands;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;
use testkit::{metric, scrape_metrics, server_conf, temp_dir, wait_until, DelayerProcess, RedisServer, DEADLINE};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");

/// The numbers every number read from Redis is tried with: infinite, not a
/// number, out of range, negative, huge integers (2^63, 2^64), a fraction.
const HOSTILE: [&str; 13] = [
    "inf",
    "-inf",
    "+inf",
    "nan",
    "1e20",
    "1e300",
    "-1",
    "abc",
    "",
    "9223372036854775808",
    "18446744073709551616",
    "1.5",
    "-9223372036854775808.-9223372036854775808",
];

fn start(redis: &RedisServer, timer_ms: u64, extra: &str) -> DelayerProcess {
    DelayerProcess::start(BIN, &server_conf(redis.port(), timer_ms, extra))
}

/// A job bucket of `topic`, as a push writes it.
fn bucket(conn: &mut redis::Connection, key: &str, topic: &str) {
    let _: () = conn.hset_multiple(key, &[("topic", topic), ("body", "x")]).expect("HSET");
}

/// How many lines of `output` contain `text`.
fn lines_with(output: &str, text: &str) -> usize {
    output.lines().filter(|l| l.contains(text)).count()
}

/// Ticks the server has run so far (its metrics).
fn ticks(port: u16) -> f64 {
    scrape_metrics(port).and_then(|m| metric(&m, "delayer_tick_duration_seconds_count")).unwrap_or(0.0)
}

/// The server is not ticking without pause: over half a second, with
/// `timer_interval` 200 ms and nothing due, a handful of ticks at most.
fn assert_not_spinning(port: u16, output: impl Fn() -> String) {
    let before = ticks(port);
    std::thread::sleep(Duration::from_millis(500));
    let during = ticks(port) - before;
    assert!(during <= 10.0, "{during} ticks in 0.5 s: the server spins\n{}", output());
}

// ---- numbers read from Redis ---------------------------------------------

/// `PUBLISH delayer:wake inf` used to panic every subscribed server, and any
/// payload that was no number made it tick: junk is ignored, said once a
/// minute at most.
#[test]
fn junk_wake_ups_neither_kill_nor_spin_the_server() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let port = testkit::free_port();
    // A long timer_interval: only a wake-up makes the job below on time.
    let mut server = start(&redis, 60_000, &format!("metrics_addr = 127.0.0.1:{port}"));
    assert!(server.wait_for_output(|o| o.contains("listening for wake-ups")), "{}", server.output());
    assert!(wait_until(DEADLINE, || ticks(port) >= 1.0), "no metrics\n{}", server.output());
    let before = ticks(port);
    for payload in HOSTILE.iter().chain(["abc"; 500].iter()) {
        let _: () = conn.publish("delayer:wake", *payload).expect("PUBLISH");
    }
    let d = Delayer::open(&redis.url()).expect("client");
    d.push("t", "after-junk", Duration::from_millis(300)).expect("push");
    let job = d.bpop("t", Duration::from_secs(20)).expect("bpop");
    assert_eq!(job.map(|j| j.id), Some("after-junk".to_string()), "{}", server.output());
    assert!(server.is_running(), "{}", server.output());
    // The valid wake-up and the tick it asked for, not one per message.
    assert!(ticks(port) - before <= 5.0, "{} ticks for junk\n{}", ticks(port) - before, server.output());
    assert_eq!(lines_with(&server.output(), "delayer:wake: ignored"), 1, "{}", server.output());
}

/// Pool scores out of range: `-inf` and negative are due now (moved once),
/// `inf`, `1e20` and 2^64 wait (the server sleeps timer_interval, does not
/// spin), and jobs pushed meanwhile are moved as ever. Per-job lateness is
/// on (metrics), which `-inf` used to break into a failed tick.
#[test]
fn odd_pool_scores_are_moved_or_wait_and_never_stop_the_others() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let scores = [("far", "1e20"), ("inf", "+inf"), ("big", "18446744073709551616"), ("ninf", "-inf"), ("neg", "-1")];
    for (id, score) in scores {
        bucket(&mut conn, &format!("delayer:job_bucket:{id}"), "t");
        redis::cmd("ZADD").arg("delayer:job_pool").arg(score).arg(id).query::<()>(&mut conn).expect("ZADD");
    }
    let port = testkit::free_port();
    let mut server = start(&redis, 200, &format!("metrics_addr = 127.0.0.1:{port}"));
    let ready = |conn: &mut redis::Connection| -> Vec<String> { conn.lrange("delayer:ready_queue:t", 0, -1).unwrap() };
    assert!(wait_until(DEADLINE, || ready(&mut conn).len() == 2), "{}", server.output());
    let d = Delayer::open(&redis.url()).expect("client");
    d.push("t", "normal", Duration::from_millis(100)).expect("push");
    assert!(wait_until(DEADLINE, || ready(&mut conn).len() == 3), "{:?}\n{}", ready(&mut conn), server.output());
    let mut moved = ready(&mut conn);
    moved.sort();
    assert_eq!(moved, ["neg", "ninf", "normal"], "{}", server.output());
    let waiting: Vec<String> = conn.zrange("delayer:job_pool", 0, -1).expect("ZRANGE");
    assert_eq!(waiting, ["big", "far", "inf"]);
    assert!(server.is_running(), "{}", server.output());
    assert_not_spinning(port, || server.output());
    let out = server.output();
    assert!(!out.contains("tick failed"), "{out}");
    assert_eq!(lines_with(&out, "delayer:job_pool:"), 1, "said once for the key\n{out}");
}

/// A reservation deadline of `inf` or `1e300` (release.lua formats it as no
/// number at all) used to fail every tick: nothing was moved any more.
#[test]
fn odd_reservation_deadlines_never_stop_moving() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    for (id, score) in [("r1", "inf"), ("r2", "1e300")] {
        let _: () =
            conn.hset_multiple(format!("delayer:job_bucket:{id}"), &[("topic", "t"), ("receipt", "1")]).unwrap();
        redis::cmd("ZADD").arg("delayer:reserved").arg(score).arg(id).query::<()>(&mut conn).expect("ZADD");
    }
    let port = testkit::free_port();
    let mut server = start(&redis, 200, &format!("metrics_addr = 127.0.0.1:{port}"));
    let d = Delayer::open(&redis.url()).expect("client");
    d.push("t", "normal", Duration::from_millis(50)).expect("push");
    let job = d.bpop("t", DEADLINE).expect("bpop");
    assert_eq!(job.map(|j| j.id), Some("normal".to_string()), "{}", server.output());
    assert!(server.is_running(), "{}", server.output());
    assert_not_spinning(port, || server.output());
    assert!(!server.output().contains("tick failed"), "{}", server.output());
}

/// The per-topic layout: index entries of `1e300` and `-inf` (the server
/// used to panic at start), a pool score of `inf`, a reserved deadline of
/// `inf`; the due topic is drained, the others wait, and a topic pushed
/// afterwards is moved as ever.
#[test]
fn odd_index_and_pool_scores_in_the_per_topic_layout() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let k = delayer_protocol::keys::TopicKeys::new("delayer:");
    let zadd = |conn: &mut redis::Connection, key: String, score: &str, member: &str| {
        redis::cmd("ZADD").arg(key).arg(score).arg(member).query::<()>(conn).expect("ZADD");
    };
    // "now": due, but its index entry says -inf; "far": 1e300 everywhere.
    bucket(&mut conn, &format!("{}a", k.bucket_prefix("now")), "now");
    zadd(&mut conn, k.pool("now"), "1", "a");
    zadd(&mut conn, k.due(), "-inf", "now");
    bucket(&mut conn, &format!("{}b", k.bucket_prefix("far")), "far");
    zadd(&mut conn, k.pool("far"), "inf", "b");
    zadd(&mut conn, k.due(), "1e300", "far");
    zadd(&mut conn, k.reserved("far"), "inf", "c");
    let _: () = conn.sadd(k.topics(), &["now", "far"]).expect("SADD");
    let port = testkit::free_port();
    let mut server = start(&redis, 200, &format!("layout = topic\nmetrics_addr = 127.0.0.1:{port}"));
    let ready =
        |conn: &mut redis::Connection, topic: &str| -> Vec<String> { conn.lrange(k.ready(topic), 0, -1).unwrap() };
    assert!(wait_until(DEADLINE, || ready(&mut conn, "now") == ["a"]), "{}", server.output());
    let d = Delayer::open(&redis.url()).expect("client").with_layout(delayer::Layout::Topic).expect("layout");
    d.push("later", "n", Duration::from_millis(100)).expect("push");
    let job = d.bpop("later", DEADLINE).expect("bpop");
    assert_eq!(job.map(|j| j.id), Some("n".to_string()), "{}", server.output());
    assert!(ready(&mut conn, "far").is_empty());
    assert!(server.is_running(), "{}", server.output());
    assert_not_spinning(port, || server.output());
    assert!(!server.output().contains("tick failed"), "{}", server.output());
}

/// The operator commands read odd numbers (scores, a job's fields, a dead
/// letter's) without failing or panicking.
#[test]
fn the_commands_read_odd_numbers() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    for (id, score) in [("far", "1e20"), ("inf", "inf"), ("ninf", "-inf")] {
        bucket(&mut conn, &format!("delayer:job_bucket:{id}"), "t");
        redis::cmd("ZADD").arg("delayer:job_pool").arg(score).arg(id).query::<()>(&mut conn).expect("ZADD");
    }
    let fields = [("attempts", "99999999999999999999"), ("max_attempts", "abc"), ("dead_at", "nan")];
    let _: () = conn.hset_multiple("delayer:job_bucket:far", &fields).expect("HSET");
    let dead = [("topic", "t"), ("body", "x"), ("attempts", "1e300"), ("dead_reason", "buried"), ("dead_at", "abc")];
    let _: () = conn.hset_multiple("delayer:job_bucket:d", &dead).expect("HSET");
    let _: () = conn.lpush("delayer:dead:t", "d").expect("LPUSH");
    let url = redis.url();
    for args in [
        &["stats"][..],
        &["stats", "--json"],
        &["job", "t", "far"],
        &["job", "t", "far", "--json"],
        &["list", "t", "--state", "scheduled"],
        &["list", "t", "--state", "scheduled", "--json"],
        &["dead", "list", "t"],
        &["dead", "list", "t", "--json"],
    ] {
        let out = run(&url, args);
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{args:?}: {:?}\n{stdout}\n{stderr}", out.status);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    let job = String::from_utf8_lossy(&run(&url, &["job", "t", "far", "--json"]).stdout).to_string();
    let job: serde_json::Value = serde_json::from_str(&job).expect("JSON");
    assert_eq!(job["due"], serde_json::json!(253_402_300_799.999), "{job}");
    assert_eq!((job["max_attempts"].is_null(), job["attempts"].as_u64()), (true, Some(u64::MAX)), "{job}");
}

fn run(url: &str, args: &[&str]) -> Output {
    Command::new(BIN).arg("--url").arg(url).args(args).env_remove("DELAYER_URL").output().expect("run delayer")
}

// ---- panics --------------------------------------------------------------

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// A panic on a thread of its own (the wake-up listener's) used to leave a
/// half-alive server: now it is written to the error log and the process
/// exits with 101. (Nothing reachable panics: the test's trigger is a
/// debug-only `DELAYER_TEST_PANIC`.)
#[test]
fn a_panic_on_any_thread_is_logged_and_ends_the_server() {
    for place in ["wake", "tick"] {
        let redis = RedisServer::start();
        let dir = temp_dir("panic");
        let log = dir.join("error.log");
        let conf = server_conf(redis.port(), 200, &format!("error_log = {}", log.display()));
        let mut server = DelayerProcess::start_with_env(BIN, &conf, &[("DELAYER_TEST_PANIC", place)]);
        let status = server.wait_exit(DEADLINE);
        assert_eq!(status.and_then(|s| s.code()), Some(101), "{place}: {status:?}\n{}", server.output());
        let logged = read(&log);
        assert!(logged.contains("panicked on thread"), "{place}: {logged}");
        assert!(logged.contains(&format!("DELAYER_TEST_PANIC={place}")), "{place}: {logged}");
        assert!(logged.contains("server/src/"), "{place}: the location\n{logged}");
    }
}

/// A daemon has no terminal: the panic reaches its error log, and the
/// daemon is gone (the pid file's lock with it).
#[test]
fn a_daemons_panic_reaches_its_error_log() {
    let redis = RedisServer::start();
    let dir = temp_dir("panic-daemon");
    let conf = format!(
        "{}\n",
        server_conf(redis.port(), 200, "error_log = error.log\naccess_log = access.log\npid = delayer.pid")
    );
    std::fs::write(dir.join("delayer.conf"), conf).expect("write conf");
    let out = Command::new(BIN)
        .args(["-d", "-c", "delayer.conf"])
        .current_dir(&dir)
        .env("DELAYER_TEST_PANIC", "tick")
        .output()
        .expect("delayer -d");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let logged = wait_until(DEADLINE, || read(&dir.join("error.log")).contains("DELAYER_TEST_PANIC=tick"));
    assert!(logged, "error.log: {}", read(&dir.join("error.log")));
    let pid: u32 = read(&dir.join("delayer.pid")).trim().parse().unwrap_or(0);
    let gone = wait_until(DEADLINE, || !Path::new(&format!("/proc/{pid}/status")).exists() || zombie(pid));
    assert!(gone, "daemon {pid} still runs");
    let _ = std::fs::remove_dir_all(&dir);
}

fn zombie(pid: u32) -> bool {
    read(Path::new(&format!("/proc/{pid}/stat"))).rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z'))
}

/// `delayer webhook` too: a panic in a delivery (a tokio task) ends the
/// process with the panic in its error log, rather than leaving a worker
/// that delivers nothing.
#[test]
fn a_webhook_panic_is_logged_and_ends_the_process() {
    let redis = RedisServer::start();
    let dir = temp_dir("panic-webhook");
    let log = dir.join("error.log");
    let mut child = webhook(&redis, &dir, &[("DELAYER_TEST_PANIC", "webhook")]);
    let _server = start(&redis, 50, "");
    Delayer::open(&redis.url()).expect("client").push_job(&Job::new("hooked", "1", Duration::ZERO)).expect("push");
    let status = testkit::wait_child(&mut child, DEADLINE);
    assert_eq!(status.and_then(|s| s.code()), Some(101), "{status:?}\n{}", read(&log));
    assert!(read(&log).contains("DELAYER_TEST_PANIC=webhook"), "{}", read(&log));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `delayer webhook` for topic `hooked` (to a port nobody listens on), its
/// logs in `dir` (`error.log`, and `output.log` for everything).
fn webhook(redis: &RedisServer, dir: &Path, env: &[(&str, &str)]) -> std::process::Child {
    let conf = format!(
        "{}\n[webhook.hooked]\nurl = http://127.0.0.1:1/\nsecret = whsec-test-secret\n",
        server_conf(redis.port(), 200, &format!("error_log = {}", dir.join("error.log").display()))
    );
    std::fs::write(dir.join("delayer.conf"), conf).expect("write conf");
    let output = std::fs::File::create(dir.join("output.log")).expect("output.log");
    Command::new(BIN)
        .args(["webhook", "-c"])
        .arg(dir.join("delayer.conf"))
        .envs(env.iter().copied())
        .stdout(output.try_clone().expect("output.log"))
        .stderr(output)
        .spawn()
        .expect("delayer webhook")
}

// ---- the eviction policy ------------------------------------------------

const TOKEN: &str = "test-token-0123456789abcdef";

/// GET `path` of the HTTP API with the token: the body.
fn api_get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n");
    s.write_all(request.as_bytes()).ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    text.split_once("\r\n\r\n").map(|(_, body)| body.to_string())
}

/// A Redis that evicts (allkeys-lru): the server warns at start naming the
/// policy and the fix, the gauge says 1, `/v1/stats` and `delayer stats`
/// (text and JSON) say it is unsafe; jobs still move.
#[test]
fn an_evicting_redis_is_warned_about_and_shown() {
    let redis = RedisServer::start_with(&["--save", "", "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"]);
    let (metrics, http) = (testkit::free_port(), testkit::free_port());
    let extra = format!("metrics_addr = 127.0.0.1:{metrics}\nhttp_addr = 127.0.0.1:{http}\nhttp_token = {TOKEN}");
    let server = start(&redis, 200, &extra);
    let warned =
        |o: &str| o.contains("maxmemory-policy is allkeys-lru") && o.contains("CONFIG SET maxmemory-policy noeviction");
    assert!(server.wait_for_output(warned), "{}", server.output());
    let gauge = || scrape_metrics(metrics).and_then(|m| metric(&m, "delayer_redis_eviction_unsafe"));
    assert!(wait_until(DEADLINE, || gauge() == Some(1.0)), "gauge {:?}", gauge());
    let stats: serde_json::Value = serde_json::from_str(&api_get(http, "/v1/stats").unwrap_or_default()).expect("JSON");
    assert_eq!(stats["redis"], serde_json::json!({"maxmemory_policy": "allkeys-lru", "eviction_safe": false}));
    let text = String::from_utf8_lossy(&run(&redis.url(), &["stats"]).stdout).to_string();
    assert!(text.contains("eviction        UNSAFE") && text.contains("allkeys-lru"), "{text}");
    let json: serde_json::Value =
        serde_json::from_slice(&run(&redis.url(), &["stats", "--json"]).stdout).expect("stats --json");
    assert_eq!(json["redis"]["eviction_safe"], serde_json::json!(false), "{json}");
    let d = Delayer::open(&redis.url()).expect("client");
    d.push("t", "1", Duration::ZERO).expect("push");
    assert!(d.bpop("t", DEADLINE).expect("bpop").is_some(), "{}", server.output());
}

/// `delayer webhook` (the SDK's workers) warns too, naming the policy.
#[test]
fn the_webhook_warns_about_an_evicting_redis() {
    let redis = RedisServer::start_with(&["--save", "", "--maxmemory-policy", "volatile-ttl"]);
    let dir = temp_dir("evict-webhook");
    let mut child = webhook(&redis, &dir, &[]);
    let warned = wait_until(DEADLINE, || {
        let log = read(&dir.join("error.log"));
        log.contains("webhook hooked: redis maxmemory-policy is volatile-ttl") && log.contains("noeviction")
    });
    let _ = child.kill();
    let _ = child.wait();
    assert!(warned, "{}", read(&dir.join("output.log")));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `noeviction`: no warning, gauge 0, `delayer stats` says so.
#[test]
fn a_redis_that_never_evicts_is_shown_as_safe() {
    let redis = RedisServer::start();
    let metrics = testkit::free_port();
    let server = start(&redis, 200, &format!("metrics_addr = 127.0.0.1:{metrics}"));
    let gauge = || scrape_metrics(metrics).and_then(|m| metric(&m, "delayer_redis_eviction_unsafe"));
    assert!(wait_until(DEADLINE, || gauge() == Some(0.0)), "gauge {:?}", gauge());
    assert!(!server.output().contains("maxmemory-policy"), "{}", server.output());
    let text = String::from_utf8_lossy(&run(&redis.url(), &["stats"]).stdout).to_string();
    assert!(text.contains("eviction        none (maxmemory-policy noeviction)"), "{text}");
}

/// An ACL user denied CONFIG (as on managed Redis): the policy is read from
/// INFO memory, by the server and by `delayer stats`.
#[test]
fn a_user_denied_config_reads_the_policy_from_info() {
    let redis = RedisServer::start_with(&["--save", "", "--maxmemory-policy", "volatile-lru"]);
    let mut admin = redis.connection();
    redis::cmd("ACL")
        .arg("SETUSER")
        .arg("worker")
        .arg("on")
        .arg(">worker-password")
        .arg("~*")
        .arg("&*")
        .arg("+@all")
        .arg("-config")
        .query::<()>(&mut admin)
        .expect("ACL SETUSER");
    let url = format!("redis://worker:worker-password@127.0.0.1:{}/", redis.port());
    let mut limited = redis::Client::open(url.as_str()).and_then(|c| c.get_connection()).expect("connect as worker");
    let denied = redis::cmd("CONFIG").arg("GET").arg("maxmemory-policy").query::<redis::Value>(&mut limited);
    assert!(denied.is_err(), "the user must be denied CONFIG: {denied:?}");
    let conf = format!(
        "[delayer]\ntimer_interval = 200\n\n[redis]\nhost = 127.0.0.1\nport = {}\nusername = worker\npassword = \
         worker-password\n",
        redis.port()
    );
    let server = DelayerProcess::start(BIN, &conf);
    assert!(server.wait_for_output(|o| o.contains("maxmemory-policy is volatile-lru")), "{}", server.output());
    let text = String::from_utf8_lossy(&run(&url, &["stats"]).stdout).to_string();
    assert!(text.contains("UNSAFE") && text.contains("volatile-lru"), "{text}");
}

/// `[redis] require_noeviction = yes` refuses to start on an evicting
/// Redis (exit 1, naming the policy and the key), and starts on one that
/// never evicts.
#[test]
fn require_noeviction_refuses_an_evicting_redis() {
    let evicting = RedisServer::start_with(&["--save", "", "--maxmemory-policy", "allkeys-lfu"]);
    let conf = |port: u16| format!("{}require_noeviction = yes\n", server_conf(port, 200, ""));
    let mut refused = DelayerProcess::start(BIN, &conf(evicting.port()));
    let status = refused.wait_exit(DEADLINE);
    let out = refused.output();
    assert_eq!(status.and_then(|s| s.code()), Some(1), "{status:?}\n{out}");
    assert!(out.contains("allkeys-lfu") && out.contains("require_noeviction"), "{out}");
    let safe = RedisServer::start();
    let mut started = DelayerProcess::start(BIN, &conf(safe.port()));
    assert!(started.wait_for_output(|o| o.contains("listening for wake-ups")), "{}", started.output());
    assert!(started.is_running(), "{}", started.output());
}

// ---- a stalled Redis ------------------------------------------------------

/// Redis stopped with SIGSTOP for 11 s under a running server: the server
/// says, within its reply timeout (5 s) and a margin, that Redis did not
/// answer and for how long; the wake-up listener's PING finds its
/// subscription dead and subscribes again once Redis answers; after
/// SIGCONT the server says Redis answers again, and a job that fell due
/// meanwhile is delivered.
#[test]
fn a_stalled_redis_is_logged_and_recovered_from() {
    let redis = RedisServer::start();
    let server = start(&redis, 200, "");
    assert!(server.wait_for_output(|o| o.contains("listening for wake-ups")), "{}", server.output());
    let d = Delayer::open(&redis.url()).expect("client");
    d.push("t", "due-meanwhile", Duration::from_secs(2)).expect("push");
    redis.pause();
    let paused = std::time::Instant::now();
    let stalled = server.wait_for_output(|o| o.contains("redis unavailable: it did not answer for"));
    let noticed = paused.elapsed();
    assert!(stalled && noticed < Duration::from_secs(12), "after {noticed:?}:\n{}", server.output());
    let lost = server.wait_for_output(|o| o.contains("wake-up listener: lost its subscription"));
    assert!(lost, "{}", server.output());
    std::thread::sleep(Duration::from_secs(11).saturating_sub(paused.elapsed()));
    redis.resume();
    let back = server.wait_for_output(|o| o.contains("redis is reachable again (it answers again after"));
    assert!(back, "{}", server.output());
    let job = d.bpop("t", DEADLINE).expect("bpop");
    assert_eq!(job.map(|j| j.id), Some("due-meanwhile".to_string()), "{}", server.output());
    let subscribed = server.wait_for_output(|o| lines_with(o, "listening for wake-ups") == 2);
    assert!(subscribed, "{}", server.output());
    assert_eq!(lines_with(&server.output(), "did not answer for"), 1, "said once\n{}", server.output());
}

/// The operator commands on a Redis that connects but answers no command
/// (CLIENT PAUSE: connecting alone is bounded already) fail (exit 1) after
/// the reply bound, rather than hang until Redis answers.
#[test]
fn the_commands_fail_on_a_stalled_redis_rather_than_hang() {
    let redis = RedisServer::start();
    let mut admin = redis.connection();
    // 15 s: the command must have given up well before Redis answers.
    redis::cmd("CLIENT").arg("PAUSE").arg(15_000).arg("ALL").query::<()>(&mut admin).expect("CLIENT PAUSE");
    let mut child = Command::new(BIN)
        .args(["--url", &redis.url(), "stats"])
        .env_remove("DELAYER_URL")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("delayer stats");
    let status = testkit::wait_child(&mut child, Duration::from_secs(12));
    let mut stderr = String::new();
    if let Some(mut err) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut err, &mut stderr);
    }
    assert_eq!(status.and_then(|s| s.code()), Some(1), "{status:?}: {stderr}");
    assert!(stderr.contains("timed out") || stderr.contains("temporarily unavailable"), "{stderr}");
}
