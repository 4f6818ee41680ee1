//! `delayer limit` (issue 23) with the real binary against a real
//! redis-server: a rate's spellings, what the script refuses (exit 2, its
//! message), text and --json, the ready backlog's warning, and the limit as
//! `delayer stats` and `delayer job` show it.

use redis::Commands;
use std::process::{Command, Output};
use testkit::{free_port, RedisServer};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");

fn run_at(url: &str, args: &[&str]) -> Output {
    Command::new(BIN).args(args).arg("--url").arg(url).env_remove("DELAYER_URL").output().expect("run delayer")
}

fn run(redis: &RedisServer, args: &[&str]) -> Output {
    run_at(&redis.url(), args)
}

fn json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("json")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_limit_is_set_shown_and_removed_in_text_and_json() {
    let redis = RedisServer::start();
    let set = run(&redis, &["limit", "sms", "50/s"]);
    assert!(set.status.success(), "{}", stderr(&set));
    assert_eq!(stdout(&set), "topic sms: limit 50/s, burst 50\n0 job(s) ready, 0 due job(s) held\n");

    let v = json(&run(&redis, &["limit", "sms", "30/min", "--burst", "2", "--json"]));
    let want = serde_json::json!({"topic": "sms", "rate_limit": {"per_second": 0.5, "burst": 2}, "changed": true,
                                  "ready_backlog": 0});
    assert_eq!(v, want);
    let again = json(&run(&redis, &["limit", "sms", "0.5/s", "--burst", "2", "--json"]));
    assert_eq!(again["changed"], false, "30/min is 0.5/s: {again}");
    let stored: String = redis.connection().hget("delayer:flow:sms", "per_second").expect("HGET");
    assert_eq!(stored, "0.5", "sent as the shortest text of 0.5");

    // 30/min is 0.5 a second in stats (the topic is listed while limited).
    let stats = json(&run(&redis, &["stats", "--json"]));
    let sms = stats["topics"].as_array().expect("topics").iter().find(|t| t["topic"] == "sms").expect("sms").clone();
    assert_eq!(sms["rate_limit"], serde_json::json!({"per_second": 0.5, "burst": 2}), "{sms}");
    let text = stdout(&run(&redis, &["stats"]));
    assert!(text.lines().any(|l| l.starts_with("sms ") && l.ends_with("limit 30/min burst 2 (0 held)")), "{text}");

    let _: () = redis.connection().hset_multiple("delayer:job_bucket:a", &[("topic", "sms")]).expect("HSET");
    let _: () = redis.connection().zadd("delayer:job_pool", "a", 4_000_000_000.0).expect("ZADD");
    assert_eq!(json(&run(&redis, &["job", "sms", "a", "--json"]))["flow"], "limited");
    assert!(stdout(&run(&redis, &["job", "sms", "a"])).contains("flow          limited"));

    let off = run(&redis, &["limit", "sms", "off"]);
    assert_eq!(stdout(&off), "topic sms: no limit\n0 job(s) ready, 0 due job(s) held\n");
    let v = json(&run(&redis, &["limit", "sms", "off", "--json"]));
    assert_eq!(v, serde_json::json!({"topic": "sms", "rate_limit": null, "changed": false, "ready_backlog": 0}));
    let stats = json(&run(&redis, &["stats", "--json"]));
    assert!(stats["topics"].as_array().expect("topics").iter().all(|t| t["rate_limit"].is_null()), "{stats}");
}

#[test]
fn a_bad_spelling_is_refused_before_connecting() {
    // Nothing listens there: the refusal comes first.
    let nowhere = format!("redis://127.0.0.1:{}/", free_port());
    for rate in ["100", "100/d", "fast/s", "100/sec"] {
        let out = run_at(&nowhere, &["limit", "sms", rate]);
        assert_eq!(out.status.code(), Some(2), "{rate}: {}", stderr(&out));
        assert!(stderr(&out).contains("say 100/s, 30/min or 2/h"), "{rate}: {}", stderr(&out));
    }
    let out = run_at(&nowhere, &["limit", "sms", "off", "--burst", "5"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn the_scripts_refusal_is_a_usage_error_with_its_message_and_nothing_is_written() {
    let redis = RedisServer::start();
    for (args, says) in [
        (&["limit", "sms", "0/s"][..], "a rate of 0 would stop the topic: pause it instead"),
        (&["limit", "sms", "-1/s"], "the rate must be more than 0 jobs per second"),
        (&["limit", "sms", "5/s", "--burst", "0"], "the burst must be a whole number of jobs from 1 to 1000000"),
        (&["limit", "sms", "1/h", "--json"], ""),
        (&["limit", "sms", "2000000/s"], "at most 1000000 jobs per second"),
    ] {
        let out = run(&redis, args);
        if says.is_empty() {
            assert!(out.status.success(), "{args:?}: 1/h is allowed: {}", stderr(&out));
            let _: () = redis.connection().del("delayer:flow:sms").expect("DEL");
            continue;
        }
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
        assert!(stdout(&out).is_empty(), "{args:?}");
        let written: bool = redis.connection().exists("delayer:flow:sms").expect("EXISTS");
        assert!(!written, "{args:?}: a refused limit writes nothing");
    }
}

#[test]
fn a_ready_backlog_beyond_the_burst_is_said_with_a_warning() {
    let redis = RedisServer::start();
    let _: () = redis.connection().rpush("delayer:ready_queue:sms", &["1", "2", "3"]).expect("RPUSH");
    let out = run(&redis, &["limit", "sms", "1/s"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("3 job(s) ready"), "{}", stdout(&out));
    let warning = "warning: 3 jobs are already ready: the limit paces jobs becoming ready, so these go out at \
                   consumer speed";
    assert!(stderr(&out).contains(warning), "{}", stderr(&out));
    let v = json(&run(&redis, &["limit", "sms", "1/s", "--burst", "3", "--json"]));
    assert_eq!(v["ready_backlog"], 3);
    let within = run(&redis, &["limit", "sms", "1/s", "--burst", "3"]);
    assert!(!stderr(&within).contains("warning"), "a burst's worth: {}", stderr(&within));
}
