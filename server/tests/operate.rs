//! Operating the server: `delayer stats` and `delayer peek` against a known
//! state, read-only.

use delayer::{Delayer, Job};
use redis::Commands;
use std::process::{Command, Output};
use std::time::Duration;
use testkit::{server_conf, RedisServer};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");

fn run(conf_dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(BIN).arg("-c").arg(conf_dir.join("delayer.conf")).args(args).output().expect("run delayer")
}

/// A Redis holding: 3 waiting jobs (one overdue by ~5 s), 2 ready on "mail",
/// 1 ready on "sms" whose bucket is gone, 1 malformed id.
fn known_state() -> (RedisServer, std::path::PathBuf) {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = Delayer::open(&redis.url()).expect("client");
    d.push("later", "w1", Duration::from_secs(100)).expect("push");
    d.push("later", "w2", Duration::from_secs(200)).expect("push");
    d.push("later", "w3", Duration::ZERO).expect("push");
    let (now, _): (u64, u64) = redis::cmd("TIME").query(&mut conn).expect("time");
    let _: () = conn.zadd("delayer:job_pool", "w3", now - 5).expect("zadd");
    for (id, body) in [("m1", "first mail"), ("m2", "second mail")] {
        d.push_job(&Job::new("mail", id, Duration::ZERO).body(body)).expect("push");
        let _: () = conn.zrem("delayer:job_pool", id).expect("zrem");
        let _: () = conn.lpush("delayer:ready_queue:mail", id).expect("lpush");
    }
    let _: () = conn.lpush("delayer:ready_queue:sms", "ghost").expect("lpush");
    let _: () = conn.lpush("delayer:malformed", "bad").expect("lpush");
    let dir = testkit::temp_dir("operate");
    std::fs::write(dir.join("delayer.conf"), server_conf(redis.port(), 1000, "")).expect("conf");
    (redis, dir)
}

fn dump(conn: &mut redis::Connection) -> Vec<(String, String)> {
    let mut keys: Vec<String> = conn.keys("*").expect("keys");
    keys.sort();
    keys.into_iter()
        .map(|k| {
            let dumped: Vec<u8> = redis::cmd("DUMP").arg(&k).query(conn).expect("dump");
            (k, format!("{dumped:?}"))
        })
        .collect()
}

#[test]
fn stats_reports_a_known_state_as_json_and_text() {
    let (redis, dir) = known_state();
    let mut conn = redis.connection();
    let before = dump(&mut conn);

    let out = run(&dir, &["stats", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["pool_size"], 3);
    assert_eq!(v["ready"]["mail"], 2);
    assert_eq!(v["ready"]["sms"], 1);
    assert_eq!(v["malformed"], 1);
    let behind = v["behind_seconds"].as_f64().expect("behind");
    assert!((4.0..30.0).contains(&behind), "behind {behind}");

    let text = run(&dir, &["stats"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("3 job(s) waiting") && text.contains("mail") && text.contains("due now"), "{text}");
    assert_eq!(dump(&mut conn), before, "stats changed data");
}

#[test]
fn peek_shows_the_next_jobs_in_pop_order_without_popping() {
    let (redis, dir) = known_state();
    let mut conn = redis.connection();
    let before = dump(&mut conn);

    let out = run(&dir, &["peek", "mail", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v[0]["id"], "m1");
    assert_eq!(v[0]["body"], "first mail");
    assert_eq!(v[1]["id"], "m2");
    assert_eq!(v.as_array().map(Vec::len), Some(2));

    let one = run(&dir, &["peek", "mail", "1"]);
    let text = String::from_utf8_lossy(&one.stdout);
    assert!(text.contains("m1") && !text.contains("m2"), "{text}");
    let ghost = String::from_utf8_lossy(&run(&dir, &["peek", "sms"]).stdout).to_string();
    assert!(ghost.contains("ghost") && ghost.contains("bucket gone"), "{ghost}");
    let empty = String::from_utf8_lossy(&run(&dir, &["peek", "nothing"]).stdout).to_string();
    assert!(empty.contains("empty"), "{empty}");
    assert_eq!(dump(&mut conn), before, "peek changed data");

    let bad = run(&dir, &["peek", "bad topic"]);
    assert_eq!(bad.status.code(), Some(1));
}

#[test]
fn inspection_reports_an_unreachable_redis_clearly() {
    let dir = testkit::temp_dir("operate-down");
    std::fs::write(dir.join("delayer.conf"), server_conf(testkit::free_port(), 1000, "")).expect("conf");
    let out = run(&dir, &["stats"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot reach redis"));
}

#[test]
fn sighup_reopens_the_log_files_for_logrotate() {
    let redis = RedisServer::start();
    let conf = server_conf(redis.port(), 20, "access_log = logs/access.log\nerror_log = logs/error.log");
    let server = testkit::DelayerProcess::start(BIN, &conf);
    let access = server.dir.join("logs/access.log");
    let rotated = server.dir.join("logs/access.log.1");
    assert!(testkit::wait_until(testkit::DEADLINE, || std::fs::read_to_string(&access)
        .is_ok_and(|s| s.contains("starting"))));

    std::fs::rename(&access, &rotated).expect("rotate");
    server.signal("HUP");
    assert!(testkit::wait_until(testkit::DEADLINE, || std::fs::read_to_string(&access)
        .is_ok_and(|s| s.contains("log files reopened"))));
    let d = Delayer::open(&redis.url()).expect("client");
    d.push("t", "after-rotate", Duration::ZERO).expect("push");
    assert!(testkit::wait_until(testkit::DEADLINE, || std::fs::read_to_string(&access)
        .is_ok_and(|s| s.contains("moved 1"))));
    let old = std::fs::read_to_string(&rotated).expect("rotated file");
    assert!(!old.contains("moved 1"), "wrote to the rotated file after SIGHUP");
}

/// GET http://127.0.0.1:<port>/metrics, the body.
fn scrape(port: u16) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.").then(|| body.to_string())
}

/// The value of the sample whose name and labels are exactly `series`.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

#[test]
fn metrics_are_served_for_prometheus() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let port = testkit::free_port();
    let conf = server_conf(redis.port(), 20, &format!("metrics_addr = 127.0.0.1:{port}"));
    let server = testkit::DelayerProcess::start(BIN, &conf);
    let d = Delayer::open(&redis.url()).expect("client");
    let jobs: Vec<Job> = (0..7).map(|i| Job::new("mail", format!("m{i}"), Duration::ZERO)).collect();
    d.push_many(&jobs).expect("push");
    d.push("later", "w", Duration::from_secs(600)).expect("push");
    let (now, _): (u64, u64) = redis::cmd("TIME").query(&mut conn).expect("time");
    let _: () = conn.zadd("delayer:job_pool", "orphan", now - 1).expect("zadd");

    let mut body = String::new();
    let ready = testkit::wait_until(testkit::DEADLINE, || {
        body = scrape(port).unwrap_or_default();
        sample(&body, "delayer_jobs_moved_total{topic=\"mail\"}") == Some(7.0)
            && sample(&body, "delayer_orphans_removed_total") == Some(1.0)
    });
    assert!(ready, "metrics: {body}\nserver output:\n{}", server.output());
    assert_eq!(sample(&body, "delayer_pool_size"), Some(1.0), "{body}");
    assert_eq!(sample(&body, "delayer_lateness_seconds_count"), Some(7.0), "{body}");
    assert!(sample(&body, "delayer_batch_duration_seconds_count").is_some_and(|n| n >= 1.0), "{body}");
    assert!(sample(&body, "delayer_tick_duration_seconds_bucket{le=\"+Inf\"}").is_some_and(|n| n >= 1.0), "{body}");
    let build = format!("delayer_build_info{{version=\"{}\"}}", env!("CARGO_PKG_VERSION"));
    assert_eq!(sample(&body, &build), Some(1.0), "{body}");
    assert!(body.contains("# HELP delayer_lateness_seconds"), "{body}");
}
