//! `delayer job`, `delayer list`, `remove`, `reschedule`, the per-topic
//! part of `delayer stats`, and the per-topic Prometheus gauges (issue 13;
//! the gauges in both key layouts), with the real binary against a real
//! redis-server.

use delayer::{Delayer, Job, Layout};
use redis::Commands;
use std::process::{Command, Output};
use std::time::Duration;
use testkit::{scrape_metrics as scrape, server_conf, RedisServer};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");

fn run(redis: &RedisServer, args: &[&str]) -> Output {
    Command::new(BIN).args(args).arg("--url").arg(redis.url()).env_remove("DELAYER_URL").output().expect("run delayer")
}

fn json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("json")
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn run_move(conn: &mut redis::Connection) {
    testkit::move_due_classic(conn);
}

#[test]
fn job_shows_each_state_as_text_and_json() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = Delayer::open(&redis.url()).expect("client");
    let v = json(&run(&redis, &["job", "orders", "42", "--json"]));
    assert_eq!(v["state"], "unknown");

    d.push_job(&Job::new("orders", "42", Duration::from_secs(1800)).body("close")).expect("push");
    let v = json(&run(&redis, &["job", "orders", "42", "--json"]));
    let due: f64 = conn.zscore("delayer:job_pool", "42").expect("zscore");
    assert_eq!(
        (v["state"].as_str(), v["topic"].as_str(), v["body_size"].as_u64()),
        (Some("scheduled"), Some("orders"), Some(5))
    );
    assert!((v["due"].as_f64().expect("due") - due).abs() < 0.0005, "{v}");
    assert!(v["deadline"].is_null() && v["dead_reason"].is_null(), "{v}");
    let t = text(&run(&redis, &["job", "orders", "42"]));
    assert!(t.contains("scheduled") && t.contains("(in 29 min"), "{t}");
    assert_eq!(json(&run(&redis, &["job", "sms", "42", "--json"]))["state"], "unknown", "another topic's job");

    d.reschedule("42", Duration::ZERO).expect("reschedule");
    run_move(&mut conn);
    assert_eq!(json(&run(&redis, &["job", "orders", "42", "--json"]))["state"], "ready");
    let job = d.reserve("orders", Duration::from_secs(60)).expect("reserve").expect("job");
    let v = json(&run(&redis, &["job", "orders", "42", "--json"]));
    assert_eq!((v["state"].as_str(), v["attempts"].as_u64()), (Some("reserved"), Some(1)));
    assert!(v["deadline"].as_f64().is_some(), "{v}");
    d.bury(&job).expect("bury");
    let v = json(&run(&redis, &["job", "orders", "42", "--json"]));
    assert_eq!((v["state"].as_str(), v["dead_reason"].as_str()), (Some("dead"), Some("buried")));
    let t = text(&run(&redis, &["job", "orders", "42"]));
    assert!(t.contains("dead reason") && t.contains("buried"), "{t}");
}

#[test]
fn dead_list_says_why_each_job_died() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = Delayer::open(&redis.url()).expect("client");
    for id in ["bad", "quiet"] {
        d.push_job(&Job::new("sms", id, Duration::ZERO).body("{}")).expect("push");
    }
    run_move(&mut conn);
    for _ in 0..2 {
        let job = d.reserve("sms", Duration::from_secs(60)).expect("reserve").expect("a job");
        match job.id.as_str() {
            "bad" => assert!(d.bury_with_error(&job, "gateway said 400:\n\"invalid number\"").expect("bury")),
            _ => assert!(d.bury(&job).expect("bury")),
        }
    }
    let dead = json(&run(&redis, &["dead", "list", "sms", "--json"]));
    let errors: std::collections::BTreeMap<&str, &serde_json::Value> =
        dead.as_array().expect("a list").iter().map(|l| (l["id"].as_str().unwrap_or(""), &l["last_error"])).collect();
    assert_eq!(errors["bad"], "gateway said 400:\n\"invalid number\"", "{dead}");
    assert!(errors["quiet"].is_null(), "{dead}");
    // As text, on a line of its own, escaped: a worker's newline cannot
    // forge the next entry.
    let t = text(&run(&redis, &["dead", "list", "sms"]));
    assert!(t.contains("    last error: gateway said 400:\\n\\\"invalid number\\\"\n"), "{t}");
    assert_eq!(t.matches("last error").count(), 1, "{t}");
}

#[test]
fn list_pages_each_state() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = Delayer::open(&redis.url()).expect("client");
    for i in 0..5 {
        d.push("t", &format!("s{i}"), Duration::from_secs(100 + i)).expect("push");
        d.push("other", &format!("o{i}"), Duration::from_secs(100 + i)).expect("push");
    }
    let first = json(&run(&redis, &["list", "t", "--state", "scheduled", "--count", "3", "--json"]));
    let ids: Vec<&str> = first["items"].as_array().expect("items").iter().filter_map(|i| i["id"].as_str()).collect();
    assert_eq!(ids, ["s0", "s1", "s2"]);
    let cursor = first["next"].as_u64().expect("a next page").to_string();
    let second =
        json(&run(&redis, &["list", "t", "--state", "scheduled", "--count", "3", "--cursor", &cursor, "--json"]));
    let ids: Vec<&str> = second["items"].as_array().expect("items").iter().filter_map(|i| i["id"].as_str()).collect();
    assert_eq!(ids, ["s3", "s4"]);
    assert!(second["next"].is_null());
    let t = text(&run(&redis, &["list", "t", "--state", "scheduled", "--count", "3"]));
    assert!(t.contains("s0  due ") && t.contains(&format!("--cursor {cursor}")), "{t}");

    for i in 0..3 {
        let _: () = conn.lpush("delayer:ready_queue:r", format!("r{i}")).expect("lpush");
    }
    let ready = json(&run(&redis, &["list", "r", "--state", "ready", "--json"]));
    assert_eq!(ready["items"], serde_json::json!([{"id": "r0"}, {"id": "r1"}, {"id": "r2"}]));
    assert_eq!(text(&run(&redis, &["list", "none", "--state", "reserved"])), "(none)\n");
    let dead = json(&run(&redis, &["list", "t", "--state", "dead", "--json"]));
    assert_eq!(dead["items"], serde_json::json!([]));
    let bad = run(&redis, &["list", "t", "--state", "waiting"]);
    assert_eq!(bad.status.code(), Some(2), "a usage error");
}

#[test]
fn listing_positions_past_the_bound_are_usage_errors() {
    let redis = RedisServer::start();
    let max = delayer_protocol::validate::MAX_POSITION;
    let (past, huge) = ((max + 1).to_string(), "99999999999999999999".to_string());
    for state in ["scheduled", "ready", "reserved", "dead"] {
        for cursor in [past.as_str(), "9223372036854775808", huge.as_str()] {
            let out = run(&redis, &["list", "t", "--state", state, "--cursor", cursor]);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{state} --cursor {cursor}: {err}");
            assert!(err.contains("--cursor") && err.contains(&max.to_string()), "{err}");
        }
        let out = run(&redis, &["list", "t", "--state", state, "--count", &huge]);
        assert_eq!(out.status.code(), Some(2), "--count {huge}");
        let out = run(&redis, &["list", "t", "--state", state, "--cursor", &max.to_string(), "--json"]);
        assert!(json(&out)["items"].as_array().is_some_and(|items| items.is_empty()), "the bound itself is a cursor");
    }
    for args in [["dead", "list", "t", "--start", &past], ["dead", "list", "t", "--start", "9223372036854775808"]] {
        let out = run(&redis, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    for args in [&["dead", "list", "t", huge.as_str()][..], &["peek", "t", huge.as_str()], &["peek", "t", "0"]] {
        assert_eq!(run(&redis, args).status.code(), Some(2), "{args:?}");
    }
    assert!(run(&redis, &["dead", "list", "t", "--start", &max.to_string()]).status.success());
}

#[test]
fn remove_and_reschedule_touch_only_the_topic_named() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = Delayer::open(&redis.url()).expect("client");
    d.push("t", "a", Duration::from_secs(600)).expect("push");
    let wrong = run(&redis, &["remove", "other", "a"]);
    assert_eq!(wrong.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("no job \"a\" on topic \"other\""));
    assert_eq!(json(&run(&redis, &["job", "t", "a", "--json"]))["state"], "scheduled", "untouched");

    let before: f64 = conn.zscore("delayer:job_pool", "a").expect("zscore");
    let out = run(&redis, &["reschedule", "t", "a", "90s"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let after: f64 = conn.zscore("delayer:job_pool", "a").expect("zscore");
    assert!(after < before - 400.0, "{before} -> {after}");
    assert!(!run(&redis, &["reschedule", "other", "a", "10"]).status.success());

    assert!(run(&redis, &["remove", "t", "a"]).status.success());
    assert_eq!(json(&run(&redis, &["job", "t", "a", "--json"]))["state"], "unknown");
    let gone = run(&redis, &["remove", "t", "a"]);
    assert_eq!(gone.status.code(), Some(1), "nothing to remove");
}

#[test]
fn stats_shows_per_topic_numbers() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = Delayer::open(&redis.url()).expect("client");
    d.push_many(&(0..4).map(|i| Job::new("mail", format!("m{i}"), Duration::from_secs(60))).collect::<Vec<_>>())
        .expect("push");
    d.push("sms", "s", Duration::ZERO).expect("push");
    run_move(&mut conn);
    let v = json(&run(&redis, &["stats", "--json"]));
    assert_eq!(
        v["topics"],
        serde_json::json!([
            {"topic": "mail", "scheduled": 4, "ready": 0, "reserved": 0, "dead": 0, "paused": false,
             "paused_since": null, "held": 0, "rate_limit": null},
            {"topic": "sms", "scheduled": 0, "ready": 1, "reserved": 0, "dead": 0, "paused": false,
             "paused_since": null, "held": 0, "rate_limit": null},
        ])
    );
    let t = text(&run(&redis, &["stats"]));
    assert!(t.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["mail", "4", "0", "0", "0"]), "{t}");
}

#[test]
fn per_topic_gauges_are_served() {
    gauges_in(Layout::Classic);
}

#[test]
fn per_topic_gauges_are_served_in_the_per_topic_layout() {
    gauges_in(Layout::Topic);
}

fn gauges_in(layout: Layout) {
    let redis = RedisServer::start();
    let port = testkit::free_port();
    let layout_line = if layout == Layout::Topic { "layout = topic" } else { "" };
    let conf = server_conf(redis.port(), 20, &format!("metrics_addr = 127.0.0.1:{port}\n{layout_line}"));
    let server = testkit::DelayerProcess::start(BIN, &conf);
    let d = Delayer::open(&redis.url()).expect("client").with_layout(layout).expect("layout");
    d.push_many(&(0..3).map(|i| Job::new("mail", format!("m{i}"), Duration::from_secs(600))).collect::<Vec<_>>())
        .expect("push");
    d.push("sms", "s", Duration::ZERO).expect("push");
    d.set_rate_limit("mail", 0.5, Some(2)).expect("limit");
    let mut body = String::new();
    let seen = testkit::wait_until(Duration::from_secs(30), || {
        body = scrape(port).unwrap_or_default();
        body.contains("delayer_jobs{topic=\"mail\",state=\"scheduled\"} 3")
            && body.contains("delayer_jobs{topic=\"sms\",state=\"ready\"} 1")
            && body.contains("delayer_topic_rate_limit{topic=\"mail\"} 0.5")
    });
    assert!(seen, "metrics: {body}\nserver output:\n{}", server.output());
    assert!(body.contains("# HELP delayer_jobs"), "{body}");
    // The limit per topic; 0 without one.
    for line in [
        "delayer_topic_rate_burst{topic=\"mail\"} 2",
        "delayer_topic_rate_limit{topic=\"sms\"} 0",
        "delayer_topic_rate_burst{topic=\"sms\"} 0",
    ] {
        assert!(body.lines().any(|l| l == line), "{line}: {body}");
    }
}

/// Ids and topics that are not UTF-8 (a Delayer 1.x or PHP client writes any
/// bytes) come out byte for byte: `id_base64` / `topic_base64` in every JSON
/// output, and no command fails on them (issue 20, item 11).
#[test]
fn names_that_are_not_utf8_come_out_as_base64() {
    use base64::Engine;
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let (id, topic): (&[u8], &[u8]) = (b"order-\xe9", b"caf\xe9");
    // Ready, waiting and dead jobs of a topic whose name is not UTF-8.
    for (job, list) in [(id, "ready"), (b"dead-\xff".as_slice(), "dead")] {
        let bucket = [b"delayer:job_bucket:".as_slice(), job].concat();
        let _: () = conn.hset_multiple(&bucket, &[(b"topic".as_slice(), topic), (b"body", b"\xfe")]).expect("hset");
        let key =
            [format!("delayer:{}:", if list == "ready" { "ready_queue" } else { "dead" }).as_bytes(), topic].concat();
        let _: () = conn.lpush(key, job).expect("lpush");
    }
    let _: () = conn
        .hset_multiple(b"delayer:job_bucket:dead-\xff", &[("dead_reason", "buried"), ("dead_at", "1.5")])
        .expect("dead");
    let _: () = conn.sadd("delayer:topics", topic).expect("sadd");
    let _: () = conn.hset_multiple(b"delayer:job_bucket:wait-\xff", &[("topic", "t"), ("body", "b")]).expect("hset");
    let _: () = conn.zadd("delayer:job_pool", b"wait-\xff", 4_000_000_000u64).expect("zadd");
    let _: () = conn.hincr("delayer:scheduled_count", "t", 1).expect("count");

    let stats = json(&run(&redis, &["stats", "--json"]));
    let topics = stats["topics"].as_array().expect("topics");
    assert!(topics.iter().any(|t| t["topic_base64"] == b64(topic) && t["ready"] == 1), "{stats}");
    let scheduled = json(&run(&redis, &["list", "t", "--state", "scheduled", "--json"]));
    assert_eq!(scheduled["items"][0]["id_base64"], b64(b"wait-\xff"), "{scheduled}");
    assert!(scheduled["items"][0].get("id").is_none(), "{scheduled}");
    // A topic that is not UTF-8 cannot be named on the command line (clap
    // takes text), so the ready and dead listings are the SDK's here.
    let d = Delayer::open(&redis.url()).expect("client");
    let ready = d.list_ready_raw("t", 0, 10).expect("ready");
    assert!(ready.items.is_empty());
    let job = json(&run(&redis, &["job", "t", "x", "--json"]));
    assert_eq!(job["id"], "x");
    // peek and dead list on a UTF-8 topic with an id that is not.
    let _: () = conn.hset_multiple(b"delayer:job_bucket:peek-\xff", &[("topic", "p"), ("body", "b")]).expect("hset");
    let _: () = conn.lpush("delayer:ready_queue:p", b"peek-\xff").expect("lpush");
    let peek = json(&run(&redis, &["peek", "p", "--json"]));
    assert_eq!(peek[0]["id_base64"], b64(b"peek-\xff"), "{peek}");
    let ready = json(&run(&redis, &["list", "p", "--state", "ready", "--json"]));
    assert_eq!(ready["items"][0]["id_base64"], b64(b"peek-\xff"), "{ready}");
    let text_out = text(&run(&redis, &["list", "p", "--state", "ready"]));
    assert!(text_out.contains("peek-\u{fffd}"), "{text_out}");
    let reserved = d.reserve("p", Duration::from_secs(60)).expect("reserve").expect("a job");
    assert!(d.bury(&reserved).expect("bury"));
    let dead = json(&run(&redis, &["dead", "list", "p", "--json"]));
    assert_eq!(
        (dead[0]["id_base64"].as_str(), dead[0]["topic"].as_str()),
        (Some(b64(b"peek-\xff").as_str()), Some("p"))
    );
    let listed = json(&run(&redis, &["list", "p", "--state", "dead", "--json"]));
    assert_eq!(listed["items"][0]["id_base64"], b64(b"peek-\xff"), "{listed}");
    // Named on the command line as the bytes they are.
    let raw = |args: &[&[u8]]| {
        use std::os::unix::ffi::OsStrExt;
        let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| std::ffi::OsStr::from_bytes(a)).collect();
        Command::new(BIN).args(args).arg("--url").arg(redis.url()).env_remove("DELAYER_URL").output().expect("run")
    };
    let requeued = raw(&[b"dead", b"requeue", b"p", b"peek-\xff"]);
    assert!(requeued.status.success() && text(&requeued).contains("re-queued 1"), "{}", text(&requeued));
    let job = json(&raw(&[b"job", b"p", b"peek-\xff", b"--json"]));
    assert_eq!(
        (job["state"].as_str(), job["id_base64"].as_str()),
        (Some("scheduled"), Some(b64(b"peek-\xff").as_str()))
    );
    let moved = raw(&[b"reschedule", b"p", b"peek-\xff", b"1h"]);
    assert!(moved.status.success() && text(&moved).contains("is due"), "{}", String::from_utf8_lossy(&moved.stderr));
    let due = json(&raw(&[b"job", b"p", b"peek-\xff", b"--json"]))["due"].as_f64().expect("due");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("now").as_secs_f64();
    assert!((now + 3500.0..now + 3700.0).contains(&due), "due in an hour: {due}");
    assert!(raw(&[b"remove", b"p", b"peek-\xff"]).status.success());
    assert_eq!(json(&raw(&[b"job", b"p", b"peek-\xff", b"--json"]))["state"], "unknown");
}
