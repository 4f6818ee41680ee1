//! Jobs waiting where no server looks (issue 22): under another key prefix,
//! or in the other layout. A running server says so when it starts and
//! whenever a new place fills, once (not at every look), and `delayer stats`
//! names them, in text and JSON. The real binary against a real
//! redis-server.

use std::process::Command;
use testkit::{server_conf, DelayerProcess, RedisServer};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");

/// A job under `prefix` (classic layout) due an hour ago: overdue, as a job
/// nobody moves is.
fn overdue_classic(redis: &RedisServer, prefix: &str, id: &str) {
    let mut conn = redis.connection();
    let due = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs() - 3600;
    let _: () = redis::pipe()
        .hset(format!("{prefix}job_bucket:{id}"), "topic", "mail")
        .hset(format!("{prefix}job_bucket:{id}"), "body", "x")
        .zadd(format!("{prefix}job_pool"), id, due)
        .query(&mut conn)
        .expect("push");
}

/// The same in the per-topic layout: its pool and the index entry.
fn overdue_topic(redis: &RedisServer, prefix: &str, id: &str) {
    let mut conn = redis.connection();
    let due = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs() - 3600;
    let _: () = redis::pipe()
        .hset(format!("{prefix}{{sms}}:job:{id}"), "topic", "sms")
        .zadd(format!("{prefix}{{sms}}:pool"), id, due)
        .zadd(format!("{prefix}due"), "sms", due)
        .query(&mut conn)
        .expect("push");
}

#[test]
fn a_running_server_says_once_when_jobs_wait_under_another_prefix() {
    let redis = RedisServer::start();
    let conf = server_conf(redis.port(), 100, "key_prefix = myapp:");
    let server = DelayerProcess::start_with_env(BIN, &conf, &[("DELAYER_TEST_LOOK_EVERY_MS", "100")]);
    assert!(server.wait_for_output(|o| o.contains("starting (pid")), "{}", server.output());

    // A client left on the default prefix, after the server started.
    overdue_classic(&redis, "delayer:", "1");
    let said = |o: &str, prefix: &str| o.matches(&format!("under key prefix \"{prefix}\"")).count();
    assert!(server.wait_for_output(|o| said(o, "delayer:") == 1), "{}", server.output());
    assert!(server.output().contains("key_prefix = \"delayer:\""), "{}", server.output());

    // Another place fills some looks later: said once too, the first not again.
    overdue_topic(&redis, "other:", "2");
    assert!(server.wait_for_output(|o| said(o, "other:") == 1), "{}", server.output());
    let out = server.output();
    assert!(out.contains("(topic layout)"), "{out}");
    assert_eq!(said(&out, "delayer:"), 1, "said once per change, not at each look: {out}");
    // Our own jobs are not strays.
    assert!(!out.contains("under key prefix \"myapp:\""), "{out}");
}

#[test]
fn stats_names_the_jobs_no_server_moves() {
    let redis = RedisServer::start();
    let stats = |args: &[&str]| {
        let out = Command::new(BIN)
            .args(["--url", &redis.url(), "--prefix", "myapp:", "stats"])
            .args(args)
            .env_remove("DELAYER_URL")
            .output()
            .expect("run");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(!stats(&[]).contains("WARNING"), "nothing waits elsewhere yet");

    // Not ours, though named like a pool: an application's sorted set of
    // timestamps, and another prefix's jobs not yet due (its own servers move them).
    let mut conn = redis.connection();
    let _: () = redis::cmd("ZADD").arg("cache:job_pool").arg(1000).arg("a").query(&mut conn).expect("zadd");
    let later = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs() + 60;
    let _: () = redis::cmd("ZADD").arg("shop:job_pool").arg(later).arg("b").query(&mut conn).expect("zadd");
    let _: () = redis::cmd("HSET").arg("shop:job_bucket:b").arg("topic").arg("t").query(&mut conn).expect("hset");
    assert!(!stats(&[]).contains("WARNING"), "{}", stats(&[]));

    overdue_classic(&redis, "delayer:", "1");
    overdue_topic(&redis, "other:", "2");
    overdue_topic(&redis, "myapp:", "3");
    let text = stats(&[]);
    assert!(text.contains("WARNING: 1 job(s) under key prefix \"delayer:\" (classic layout)"), "{text}");
    assert!(text.contains("WARNING: 1 job(s) under key prefix \"other:\" (topic layout)"), "{text}");
    assert!(text.contains("WARNING: 1 job(s) wait in the topic key layout under prefix \"myapp:\""), "{text}");
    assert_eq!(text.matches("WARNING").count(), 3, "{text}");
    let v: serde_json::Value = serde_json::from_str(&stats(&["--json"])).expect("json");
    let places: Vec<(String, String, u64)> = v["elsewhere"]
        .as_array()
        .expect("elsewhere")
        .iter()
        .map(|p| {
            (
                p["prefix"].as_str().expect("prefix").into(),
                p["layout"].as_str().expect("layout").into(),
                p["jobs"].as_u64().expect("jobs"),
            )
        })
        .collect();
    let want = [("myapp:", "topic", 1), ("delayer:", "classic", 1), ("other:", "topic", 1)];
    assert_eq!(places, want.map(|(p, l, n)| (p.to_string(), l.to_string(), n)), "{v}");
    assert_eq!(v["elsewhere_searched_all"], true);
}
