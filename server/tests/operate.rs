//! Operating the server: `delayer stats` and `delayer peek` against a known
//! state, read-only.

use delayer::{Delayer, Job};
use redis::Commands;
use std::process::{Command, Output};
use std::time::Duration;
use testkit::{metric as sample, scrape_metrics as scrape, server_conf, RedisServer};

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
    // Moved by hand: the known topics are the server's to record (move.lua).
    let _: () = conn.sadd("delayer:topics", &["mail", "sms"]).expect("sadd");
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

    let bad = run(&dir, &["peek", ""]);
    assert_eq!(bad.status.code(), Some(2), "a usage error: {}", String::from_utf8_lossy(&bad.stderr));
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
    // At debug, each batch has a line ("moved 1 [t=1]"): one to look for after the rotation.
    let conf =
        server_conf(redis.port(), 20, "access_log = logs/access.log\nerror_log = logs/error.log\nlog_level = debug");
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

/// Runs `delayer args...` in `cwd` (no `-c`), with `env` set and
/// `DELAYER_URL` unset unless given.
fn run_in(cwd: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args).current_dir(cwd).env_remove("DELAYER_URL");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run delayer")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A dead letter of `topic` with `id` and `body`, written as bury leaves
/// one (docs/PROTOCOL.md): a bucket marked dead, its id on the topic's list.
fn dead_letter(conn: &mut redis::Connection, topic: &str, id: &str, body: &[u8]) {
    let bucket = format!("delayer:job_bucket:{id}");
    let _: () = redis::cmd("HSET")
        .arg(&bucket)
        .arg(&[("topic", topic.as_bytes()), ("body", body), ("attempts", b"1"), ("dead_reason", b"buried")])
        .arg("dead_at")
        .arg("1700000000.000")
        .query(conn)
        .expect("hset");
    let _: () = conn.lpush(format!("delayer:dead:{topic}"), id).expect("lpush");
}

#[test]
fn dead_requeue_and_purge_name_the_ids_they_did_not_find() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    for id in ["d1", "d2"] {
        dead_letter(&mut conn, "t", id, b"x");
    }
    let dir = testkit::temp_dir("operate-dead");
    std::fs::write(dir.join("delayer.conf"), server_conf(redis.port(), 1000, "")).expect("conf");

    let none = run(&dir, &["dead", "requeue", "t", "nosuch"]);
    assert_eq!(none.status.code(), Some(1), "{}{}", stdout(&none), stderr(&none));
    assert!(stderr(&none).contains("nosuch"), "{}", stderr(&none));

    let some = run(&dir, &["dead", "requeue", "t", "d1", "nosuch", "other"]);
    assert_eq!(some.status.code(), Some(1), "{}", stderr(&some));
    assert!(stdout(&some).contains("re-queued 1"), "{}", stdout(&some));
    let err = stderr(&some);
    assert!(err.contains("nosuch") && err.contains("other") && !err.contains("d1"), "{err}");
    assert_eq!(conn.llen::<_, u64>("delayer:dead:t").expect("llen"), 1, "d1 was re-queued");

    let purge = run(&dir, &["dead", "purge", "t", "d2", "d1"]);
    assert_eq!(purge.status.code(), Some(1), "{}", stderr(&purge));
    assert!(stdout(&purge).contains("purged 1") && stderr(&purge).contains("d1"), "{}", stderr(&purge));
    let all = run(&dir, &["dead", "purge", "t", "--all"]);
    assert!(all.status.success() && stdout(&all).contains("purged 0"), "{}", stderr(&all));
}

#[test]
fn names_a_1x_client_could_write_work_in_every_command() {
    // 1.x refused only empty names: topics like "close order", ids with
    // spaces or braces exist in the field.
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let topic = "close order";
    for id in ["order 42", "{x}"] {
        testkit::delayer_1x_push(&mut conn, id, topic, "ready", 0);
        let _: () = conn.zrem("delayer:job_pool", id).expect("zrem");
        let _: () = conn.lpush(format!("delayer:ready_queue:{topic}"), id).expect("lpush");
    }
    for id in ["dead 1", "{dead}", "dead 2"] {
        dead_letter(&mut conn, topic, id, b"x");
    }
    let dir = testkit::temp_dir("operate-odd");
    std::fs::write(dir.join("delayer.conf"), server_conf(redis.port(), 1000, "")).expect("conf");

    let out = run(&dir, &["peek", topic, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(v[0]["id"] == "order 42" && v[1]["id"] == "{x}", "{v}");
    let out = run(&dir, &["dead", "list", topic, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v.as_array().map(Vec::len), Some(3), "{v}");

    let out = run(&dir, &["dead", "requeue", topic, "dead 1", "{dead}"]);
    assert!(out.status.success() && stdout(&out).contains("re-queued 2"), "{}{}", stdout(&out), stderr(&out));
    assert!(conn.zscore::<_, _, Option<f64>>("delayer:job_pool", "dead 1").expect("zscore").is_some());
    // Ids not found are quoted, so one with a space reads as one id.
    let out = run(&dir, &["dead", "purge", topic, "dead 2", "no such"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stdout(&out).contains("purged 1"), "{}", stdout(&out));
    assert!(stderr(&out).contains("\"no such\"") && !stderr(&out).contains("dead 2"), "{}", stderr(&out));
    assert_eq!(conn.llen::<_, u64>(format!("delayer:dead:{topic}")).expect("llen"), 0);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn argument_errors_are_usage_errors_not_redis_errors() {
    // Nothing listens on this port: an argument error must be found first.
    let dir = testkit::temp_dir("operate-usage");
    std::fs::write(dir.join("delayer.conf"), server_conf(testkit::free_port(), 1000, "")).expect("conf");
    let cases: [&[&str]; 9] = [
        &["peek", ""],
        &["peek", "t", "lots"],
        &["dead", "list", "t", "0"],
        &["dead", "list", "t", "5000"],
        &["dead", "list", ""],
        &["dead", "requeue", "t", "ok", ""],
        &["dead", "purge", "t", ""],
        &["dead", "frobnicate", "t"],
        &["frobnicate"],
    ];
    for args in cases {
        let out = run(&dir, args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(!err.to_lowercase().contains("redis"), "{args:?} blamed on Redis: {err}");
        assert!(err.contains("--help"), "points to the help: {args:?}: {err}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn durations_are_shown_in_human_units() {
    let (redis, dir) = known_state();
    let mut conn = redis.connection();
    let _: () = conn.del("delayer:job_pool").expect("del");
    let d = Delayer::open(&redis.url()).expect("client");
    d.push("later", "hour", Duration::from_secs(3600)).expect("push");
    let text = stdout(&run(&dir, &["stats"]));
    assert!(text.contains("(in 59 min "), "{text}");
    assert!(text.lines().any(|l| l.starts_with("behind") && l.ends_with(" 0 ms")), "{text}");

    let (now, _): (u64, u64) = redis::cmd("TIME").query(&mut conn).expect("time");
    let _: () = conn.zadd("delayer:job_pool", "hour", now - (3 * 86_400 + 4 * 3600 + 60)).expect("zadd");
    let text = stdout(&run(&dir, &["stats"]));
    assert!(text.lines().any(|l| l.starts_with("behind") && l.ends_with(" 3 d 4 h")), "{text}");

    // The bucket of a ready job expires after ready_max_lifetime (7 days).
    let peeked = stdout(&run(&dir, &["peek", "mail"]));
    assert!(peeked.contains("expires in 6 d 23 h"), "{peeked}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn url_flag_and_environment_need_no_configuration_file() {
    let redis = RedisServer::start();
    let d = Delayer::open(&redis.url()).expect("client");
    d.push("t", "waiting", Duration::from_secs(60)).expect("push");
    let client = redis::Client::open(redis.url()).expect("client");
    let prefixed = Delayer::with_options(client, "app:", &delayer::PoolOptions::default());
    prefixed.push("t", "a1", Duration::from_secs(60)).expect("push");
    prefixed.push("t", "a2", Duration::from_secs(60)).expect("push");
    let empty = testkit::temp_dir("operate-url"); // no delayer.conf here
    let url = redis.url();

    let out = run_in(&empty, &["stats", "--json", "--url", &url], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["pool_size"], 1);

    let out = run_in(&empty, &["--url", &url, "--prefix", "app:", "stats", "--json"], &[]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["pool_size"], 2, "{}", stderr(&out));

    let out = run_in(&empty, &["stats", "--json"], &[("DELAYER_URL", &url)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["pool_size"], 1);
    let listed = run_in(&empty, &["dead", "list", "t"], &[("DELAYER_URL", &url)]);
    assert!(listed.status.success() && stdout(&listed).contains("no dead letters"), "{}", stderr(&listed));

    // A bad URL is a usage error, and a password in it is never echoed.
    let bad = run_in(&empty, &["stats", "--url", "http://user:hunter2@127.0.0.1/"], &[]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(!stderr(&bad).contains("hunter2"), "{}", stderr(&bad));
    let down = format!("redis://:hunter2@127.0.0.1:{}/", testkit::free_port());
    let down = run_in(&empty, &["stats", "--url", &down], &[]);
    assert_eq!(down.status.code(), Some(1), "{}", stderr(&down));
    assert!(stderr(&down).contains("cannot reach redis") && !stderr(&down).contains("hunter2"), "{}", stderr(&down));
    // --url is for the commands: the server reads its configuration file.
    let server = run_in(&empty, &["--url", &url], &[]);
    assert_eq!(server.status.code(), Some(2), "{}", stderr(&server));
    let _ = std::fs::remove_dir_all(empty);
}

#[test]
fn peek_and_dead_list_json_keep_bodies_byte_for_byte() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = Delayer::open(&redis.url()).expect("client");
    let binary: &[u8] = &[0xff, 0x00, b'a', 0xc3];
    for (id, body) in [("bin", binary), ("text", "héllo".as_bytes())] {
        d.push_job(&Job::new("mail", id, Duration::ZERO).body(body)).expect("push");
        let _: () = conn.zrem("delayer:job_pool", id).expect("zrem");
        let _: () = conn.lpush("delayer:ready_queue:mail", id).expect("lpush");
    }
    let dir = testkit::temp_dir("operate-bytes");
    std::fs::write(dir.join("delayer.conf"), server_conf(redis.port(), 1000, "")).expect("conf");

    let out = run(&dir, &["peek", "mail", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!((v[0]["id"].as_str(), v[0]["body_base64"].as_str()), (Some("bin"), Some("/wBhww==")), "{v}");
    assert!(v[0].get("body").is_none(), "{v}");
    assert_eq!((v[1]["id"].as_str(), v[1]["body"].as_str()), (Some("text"), Some("héllo")), "{v}");
    assert!(v[1].get("body_base64").is_none(), "{v}");

    // Same for dead letters.
    dead_letter(&mut conn, "dead", "bin", binary);
    let out = run(&dir, &["dead", "list", "dead", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!((v[0]["id"].as_str(), v[0]["body_base64"].as_str()), (Some("bin"), Some("/wBhww==")), "{v}");
    assert!(v[0].get("body").is_none(), "{v}");
    let _ = std::fs::remove_dir_all(dir);
}
