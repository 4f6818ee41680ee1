//! Keys of the wrong type, and a full Redis, against the real server
//! (PROTOCOL.md, "Operations", the guard rule): a bad key holds only the jobs
//! that need it, is named once in the log and in `delayer stats`, and when
//! it is fixed its jobs move exactly once; bookkeeping keys of the wrong type
//! stop nothing; under maxmemory with noeviction due jobs still move and
//! pop while pushes are refused cleanly, and pushes work again once memory
//! frees.

use delayer::{Delayer, Error, Layout};
use redis::Commands;
use std::collections::HashSet;
use std::process::Command;
use std::time::Duration;
use testkit::{server_conf, wait_until, DelayerProcess, RedisServer, DEADLINE};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");

fn redis_now(conn: &mut redis::Connection) -> f64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(conn).expect("TIME");
    s as f64 + us as f64 / 1e6
}

/// A job in the pool due at `due`, written as a 1.x client writes it.
fn job(conn: &mut redis::Connection, topic: &str, id: &str, due: f64) {
    let bucket = format!("delayer:job_bucket:{id}");
    let _: () = redis::pipe()
        .hset_multiple(&bucket, &[("topic", topic), ("body", id)])
        .expire(&bucket, 3600)
        .zadd("delayer:job_pool", id, due)
        .query(conn)
        .expect("job");
}

fn ready(conn: &mut redis::Connection, topic: &str) -> Vec<String> {
    conn.lrange(format!("delayer:ready_queue:{topic}"), 0, -1).expect("LRANGE")
}

/// Asserts each of `ids` appears once, and there are `n` of them.
fn once(ids: &[String], n: usize, what: &str) {
    let unique: HashSet<&String> = ids.iter().collect();
    assert_eq!((ids.len(), unique.len()), (n, n), "{what}: every job exactly once");
}

fn stats(redis: &RedisServer, json: bool) -> String {
    let mut cmd = Command::new(BIN);
    cmd.arg("--url").arg(redis.url()).arg("stats");
    if json {
        cmd.arg("--json");
    }
    let out = cmd.output().expect("delayer stats");
    assert!(out.status.success(), "stats failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_ready_queue_of_the_wrong_type_holds_its_topic_only_and_moves_once_fixed() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let now = redis_now(&mut conn);
    let _: () = conn.set("delayer:ready_queue:poisoned", "x").expect("SET");
    // More held jobs at the pool's head than a batch takes, then the others.
    for i in 0..150 {
        job(&mut conn, "poisoned", &format!("p{i}"), now - 20.0 + i as f64 / 1000.0);
    }
    for i in 0..999 {
        job(&mut conn, "good", &format!("g{i}"), now - 10.0 + i as f64 / 1000.0);
    }
    let server = DelayerProcess::start(BIN, &server_conf(redis.port(), 200, "batch_size = 100"));
    assert!(wait_until(DEADLINE, || ready(&mut conn, "good").len() >= 999), "good waited:\n{}", server.output());

    // Jobs pushed now, behind the held head, move on time, every tick.
    let d = Delayer::open(&redis.url()).expect("client");
    for i in 0..5 {
        d.push("good", &format!("late{i}"), Duration::from_millis(50)).expect("push");
        assert!(
            wait_until(Duration::from_secs(3), || ready(&mut conn, "good").len() > 999 + i),
            "a job behind the held head waited:\n{}",
            server.output()
        );
    }
    std::thread::sleep(Duration::from_millis(700)); // a repeated push would show by now
    once(&ready(&mut conn, "good"), 1004, "good");
    let held: u64 = conn.zcard("delayer:job_pool").expect("ZCARD");
    assert_eq!(held, 150, "the poisoned topic's jobs wait in the pool, none lost");
    let named = "key \"delayer:ready_queue:poisoned\" holds a string";
    assert_eq!(server.output().matches(named).count(), 1, "named once, not per tick:\n{}", server.output());

    assert!(
        stats(&redis, false).contains("delayer:ready_queue:poisoned   string, not list"),
        "{}",
        stats(&redis, false)
    );
    let v: serde_json::Value = serde_json::from_str(&stats(&redis, true)).expect("json");
    assert_eq!(
        v["bad_keys"],
        serde_json::json!([{"key": "delayer:ready_queue:poisoned", "type": "string", "expected": "list"}])
    );

    // Fixed: every held job moves, exactly once, in due order.
    let _: () = conn.del("delayer:ready_queue:poisoned").expect("DEL");
    assert!(
        wait_until(DEADLINE, || ready(&mut conn, "poisoned").len() >= 150),
        "held jobs never moved:\n{}",
        server.output()
    );
    std::thread::sleep(Duration::from_millis(700));
    let moved = ready(&mut conn, "poisoned");
    once(&moved, 150, "poisoned");
    assert_eq!(moved.last().map(String::as_str), Some("p0"), "first due, first out");
    once(&ready(&mut conn, "good"), 1004, "good");
    // Said as the check found it: deleted ("no key"), or already refilled by the moves.
    let fixed = |o: &str| {
        ["is a list now", "is no key now"]
            .iter()
            .any(|kind| o.contains(&format!("key \"delayer:ready_queue:poisoned\" {kind}")))
    };
    assert!(server.wait_for_output(fixed), "the fix not said:\n{}", server.output());
    assert!(stats(&redis, true).contains("\"bad_keys\":[]"));
}

#[test]
fn bookkeeping_keys_of_the_wrong_type_stop_no_move() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    for key in ["delayer:topics", "delayer:scheduled_count", "delayer:reserved"] {
        let _: () = conn.set(key, "x").expect("SET");
    }
    let _: () = conn.sadd("delayer:malformed", "x").expect("SADD");
    let d = Delayer::open(&redis.url()).expect("client");
    for i in 0..50 {
        d.push(["a", "b"][i % 2], &format!("j{i}"), Duration::ZERO).expect("push with a bad count hash");
    }
    // A bucket without a topic: it needs the malformed list, so it waits.
    let now = redis_now(&mut conn);
    let _: () = conn.hset("delayer:job_bucket:nameless", "body", "x").expect("HSET");
    let _: () = conn.zadd("delayer:job_pool", "nameless", now - 1.0).expect("ZADD");

    let server = DelayerProcess::start(BIN, &server_conf(redis.port(), 100, ""));
    assert!(
        wait_until(DEADLINE, || ready(&mut conn, "a").len() + ready(&mut conn, "b").len() >= 50),
        "jobs waited:\n{}",
        server.output()
    );
    std::thread::sleep(Duration::from_millis(500));
    let mut all = ready(&mut conn, "a");
    all.extend(ready(&mut conn, "b"));
    once(&all, 50, "a and b");
    let left: Vec<String> = conn.zrange("delayer:job_pool", 0, -1).expect("ZRANGE");
    assert_eq!(left, ["nameless"], "the malformed id waits for its list");
    for key in ["delayer:topics", "delayer:scheduled_count", "delayer:reserved", "delayer:malformed"] {
        let named = format!("key {key:?} holds a");
        assert!(server.wait_for_output(|o| o.contains(&named)), "{key} not named:\n{}", server.output());
        assert_eq!(server.output().matches(&named).count(), 1, "{key} named more than once:\n{}", server.output());
    }
    let text = stats(&redis, false);
    for key in ["delayer:topics", "delayer:scheduled_count", "delayer:reserved", "delayer:malformed"] {
        assert!(text.contains(key), "stats does not name {key}:\n{text}");
    }
    // The malformed list fixed, the id is parked there.
    let _: () = conn.del("delayer:malformed").expect("DEL");
    assert!(
        wait_until(DEADLINE, || conn.lrange::<_, Vec<String>>("delayer:malformed", 0, -1).unwrap_or_default()
            == ["nameless"]),
        "not parked after the fix:\n{}",
        server.output()
    );
}

/// Fills Redis with filler strings until it refuses a write for maxmemory.
fn fill(conn: &mut redis::Connection) -> usize {
    let chunk = "x".repeat(64 * 1024);
    for i in 0.. {
        if let Err(e) = conn.set::<_, _, ()>(format!("filler:{i}"), &chunk) {
            assert!(e.to_string().contains("OOM"), "{e}");
            return i;
        }
        assert!(i < 10_000, "never full");
    }
    unreachable!()
}

#[test]
fn a_full_redis_keeps_moving_refuses_pushes_and_recovers() {
    full_redis(Layout::Classic);
}

#[test]
fn a_full_redis_keeps_moving_in_the_per_topic_layout() {
    full_redis(Layout::Topic);
}

fn full_redis(layout: Layout) {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = Delayer::open(&redis.url()).expect("client").with_layout(layout).expect("layout");
    let ready_key = match layout {
        Layout::Classic => "delayer:ready_queue:full",
        Layout::Topic => "delayer:{full}:ready",
    };
    let ready = |conn: &mut redis::Connection| -> Vec<String> { conn.lrange(ready_key, 0, -1).expect("LRANGE") };
    for i in 0..300 {
        d.push("full", &format!("j{i}"), Duration::from_millis(1500)).expect("push");
    }
    // Due later, while Redis is full: moved then too.
    for i in 0..3 {
        d.push("full", &format!("later{i}"), Duration::from_millis(4000)).expect("push");
    }
    let info: String = redis::cmd("INFO").arg("memory").query(&mut conn).expect("INFO");
    let used: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory");
    let set = |conn: &mut redis::Connection, name: &str, value: String| {
        let _: () = redis::cmd("CONFIG").arg("SET").arg(name).arg(value).query(conn).expect("CONFIG SET");
    };
    set(&mut conn, "maxmemory-policy", "noeviction".into());
    set(&mut conn, "maxmemory", (used + 4 * 1024 * 1024).to_string());
    let fillers = fill(&mut conn);

    let layout_line = if layout == Layout::Topic { "layout = topic" } else { "" };
    let server = DelayerProcess::start(BIN, &server_conf(redis.port(), 100, layout_line));
    assert!(server.wait_for_output(|o| o.contains("redis is out of memory")), "not said:\n{}", server.output());
    // Due jobs move and are popped while Redis is full.
    assert!(wait_until(DEADLINE, || ready(&mut conn).len() == 303), "moves stopped:\n{}", server.output());
    for _ in 0..100 {
        assert!(d.pop("full").expect("pop while full").is_some());
    }
    assert!(!server.output().contains("ERROR"), "a tick failed while Redis was full:\n{}", server.output());
    // A push is refused, and leaves nothing behind.
    let pool_key = if layout == Layout::Topic { "delayer:{full}:pool" } else { "delayer:job_pool" };
    let bucket = if layout == Layout::Topic { "delayer:{full}:job:refused" } else { "delayer:job_bucket:refused" };
    match d.push("full", "refused", Duration::ZERO) {
        Err(Error::Redis(e)) => assert!(e.to_string().contains("OOM"), "{e}"),
        other => panic!("a push into a full Redis: {other:?}"),
    }
    assert_eq!(conn.zcard::<_, u64>(pool_key).expect("ZCARD"), 0);
    assert!(!conn.exists::<_, bool>(bucket).expect("EXISTS"), "half a push");

    // Memory frees: pushes work again, and the server says so.
    for i in 0..fillers {
        let _: () = conn.del(format!("filler:{i}")).expect("DEL");
    }
    d.push("full", "after", Duration::ZERO).expect("a push once memory is free");
    assert!(server.wait_for_output(|o| o.contains("redis has memory again")), "not said:\n{}", server.output());
    assert!(wait_until(DEADLINE, || ready(&mut conn).contains(&"after".to_string())));
    assert_eq!(server.output().matches("redis is out of memory").count(), 1, "said once:\n{}", server.output());
}
