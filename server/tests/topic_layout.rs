//! The server in the per-topic layout (`layout = topic`), with jobs written
//! exactly as PROTOCOL.md's "The per-topic layout" tells a client to (no SDK
//! writes this layout yet): moved when due and not before, found although
//! the client's index write was lost, drained once by two servers at once.

use delayer_protocol::keys::TopicKeys;
use redis::Commands;
use std::collections::HashSet;
use std::process::Command;
use std::time::Duration;
use testkit::{server_conf, temp_dir, wait_until, DelayerProcess, RedisServer, DEADLINE};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");

fn keys() -> TopicKeys {
    TopicKeys::new("delayer:")
}

fn start_server(redis: &RedisServer) -> DelayerProcess {
    DelayerProcess::start(BIN, &server_conf(redis.port(), 1000, "layout = topic"))
}

fn redis_now(conn: &mut redis::Connection) -> f64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(conn).expect("TIME");
    s as f64 + us as f64 / 1e6
}

/// What the protocol asks of a pushing client, in its order: the job and
/// its pool entry, then (each skippable, to play a client that crashed) the
/// index entry and the known-topics entry, then the wake-up.
fn push(conn: &mut redis::Connection, topic: &str, id: &str, due: f64, index: bool, known: bool) {
    let k = keys();
    let _: () =
        conn.hset_multiple(format!("{}{id}", k.bucket_prefix(topic)), &[("topic", topic), ("body", id)]).expect("HSET");
    let _: () = conn.zadd(k.pool(topic), id, due).expect("ZADD pool");
    if index {
        redis::cmd("ZADD").arg(k.due()).arg("LT").arg(due).arg(topic).query::<()>(conn).expect("ZADD due");
    }
    if known {
        let _: () = conn.sadd(k.topics(), topic).expect("SADD");
    }
    if index {
        let _: () = conn.publish(k.wake(), format!("{due:.3}")).expect("PUBLISH");
    }
}

fn ready(conn: &mut redis::Connection, topic: &str) -> Vec<String> {
    conn.lrange(keys().ready(topic), 0, -1).expect("LRANGE")
}

/// A topic's index time, rounded to the second. The server writes the index
/// after a drain's scripts return, so a test polls it rather than reading
/// it the moment the ready list changed.
fn index_time(conn: &mut redis::Connection, topic: &str) -> Option<f64> {
    conn.zscore::<_, _, Option<f64>>(keys().due(), topic).expect("ZSCORE").map(|s| s.round())
}

fn index_size(conn: &mut redis::Connection) -> u64 {
    conn.zcard(keys().due()).expect("ZCARD")
}

#[test]
fn a_job_is_moved_when_due_not_before_and_its_index_entry_follows() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    // Idle topics: known, nothing waiting.
    let idle: Vec<String> = (0..1000).map(|i| format!("idle{i}")).collect();
    let _: () = conn.sadd(keys().topics(), &idle).expect("SADD idle");
    let server = start_server(&redis);
    assert!(server.wait_for_output(|o| o.contains("layout topic")), "{}", server.output());

    let due = redis_now(&mut conn) + 1.5;
    push(&mut conn, "mail", "m1", due, true, true);
    push(&mut conn, "mail", "m2", due + 3600.0, true, true);
    assert!(wait_until(DEADLINE, || !ready(&mut conn, "mail").is_empty()), "never moved:\n{}", server.output());
    let seen_at = redis_now(&mut conn);
    assert!(seen_at >= due, "moved {:.3} s before its due time", due - seen_at);
    assert_eq!(ready(&mut conn, "mail"), ["m1"], "only the due job");
    // The index then points at the next job (written after the drain's
    // scripts, so polled), and at nothing for idle topics.
    let next = Some((due + 3600.0).round());
    assert!(wait_until(DEADLINE, || index_time(&mut conn, "mail") == next), "{:?}", index_time(&mut conn, "mail"));
    let entries: u64 = conn.zcard(keys().due()).expect("ZCARD");
    assert_eq!(entries, 1, "idle topics get no index entry");
}

#[test]
fn a_lost_index_write_delays_a_job_but_never_loses_it() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    // A client that died before any index write, before the server started:
    // found by the key-space scan, which starts at once.
    let now = redis_now(&mut conn);
    push(&mut conn, "early", "e1", now - 1.0, false, false);
    let server = start_server(&redis);
    assert!(wait_until(DEADLINE, || ready(&mut conn, "early") == ["e1"]), "never found:\n{}", server.output());
    let known: bool = conn.sismember(keys().topics(), "early").expect("SISMEMBER");
    assert!(known, "the scan records the topic");

    // One that died after SADD but before the index write, while the server
    // runs: the sweep of known topics (every 10 s) finds it.
    let now = redis_now(&mut conn);
    push(&mut conn, "late", "l1", now, false, true);
    assert!(
        wait_until(Duration::from_secs(60), || ready(&mut conn, "late") == ["l1"]),
        "never found by the sweep:\n{}",
        server.output()
    );
}

#[test]
fn two_servers_drain_many_topics_exactly_once() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let topics: Vec<String> = (0..10).map(|i| format!("t{i}")).collect();
    let now = redis_now(&mut conn);
    for topic in &topics {
        for n in 0..2000 {
            push(&mut conn, topic, &format!("{topic}-{n}"), now - 1.0 + n as f64 / 10_000.0, n == 0, n == 0);
        }
    }
    let (a, b) = (start_server(&redis), start_server(&redis));
    let total = |conn: &mut redis::Connection| -> usize { topics.iter().map(|t| ready(conn, t).len()).sum() };
    assert!(
        wait_until(DEADLINE, || total(&mut conn) >= 20_000),
        "moved {}:\n{}\n{}",
        total(&mut conn),
        a.output(),
        b.output()
    );
    std::thread::sleep(Duration::from_millis(500)); // a duplicate would show by now
    let all: Vec<String> = topics.iter().flat_map(|t| ready(&mut conn, t)).collect();
    let unique: HashSet<&String> = all.iter().collect();
    assert_eq!((all.len(), unique.len()), (20_000, 20_000), "every job once");
    for topic in &topics {
        let order = ready(&mut conn, topic);
        let first_out = order.last().map(String::as_str);
        assert_eq!(first_out, Some(format!("{topic}-0").as_str()), "first due, first out");
        let left: u64 = conn.zcard(keys().pool(topic)).expect("ZCARD");
        assert_eq!(left, 0);
    }
    assert!(wait_until(DEADLINE, || index_size(&mut conn) == 0), "drained topics leave the index");
}

#[test]
fn a_topic_whose_keys_hold_the_wrong_type_does_not_stop_the_others() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let now = redis_now(&mut conn);
    // "broken"'s ready list is a string: its moves fail with WRONGTYPE.
    let _: () = conn.set(keys().ready("broken"), "not a list").expect("SET");
    push(&mut conn, "broken", "b1", now - 2.0, true, true);
    push(&mut conn, "fine", "f1", now - 1.0, true, true);
    let server = start_server(&redis);
    assert!(wait_until(DEADLINE, || ready(&mut conn, "fine") == ["f1"]), "the good topic waited:\n{}", server.output());
    let named = |o: &str| o.contains("key \"delayer:{broken}:ready\" holds a string") && o.contains("set aside");
    assert!(server.wait_for_output(named), "not reported:\n{}", server.output());
    let waiting: u64 = conn.zcard(keys().pool("broken")).expect("ZCARD");
    assert_eq!(waiting, 1, "the broken topic's job is kept, not lost");
    // Fixed, it moves again (the sweep puts it back in the index).
    let _: () = conn.del(keys().ready("broken")).expect("DEL");
    assert!(
        wait_until(Duration::from_secs(60), || ready(&mut conn, "broken") == ["b1"]),
        "never moved after the fix:\n{}",
        server.output()
    );
}

#[test]
fn the_server_moves_on_after_redis_lost_its_scripts() {
    // After a restart without persistence of scripts, or SCRIPT FLUSH, every
    // script the drain sends (release.lua for expiry, then move_topic.lua)
    // meets NOSCRIPT: the server loads each and sends its calls again.
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let server = start_server(&redis);
    let now = redis_now(&mut conn);
    push(&mut conn, "a", "a1", now - 1.0, true, true);
    assert!(wait_until(DEADLINE, || ready(&mut conn, "a") == ["a1"]), "{}", server.output());
    redis::cmd("SCRIPT").arg("FLUSH").query::<()>(&mut conn).expect("SCRIPT FLUSH");
    for (topic, id) in [("a", "a2"), ("b", "b1"), ("c", "c1")] {
        let due = redis_now(&mut conn) - 0.5;
        push(&mut conn, topic, id, due, true, true);
    }
    assert!(
        wait_until(DEADLINE, || ready(&mut conn, "a") == ["a2", "a1"]
            && ready(&mut conn, "b") == ["b1"]
            && ready(&mut conn, "c") == ["c1"]),
        "not moved after SCRIPT FLUSH:\n{}",
        server.output()
    );
    assert!(wait_until(DEADLINE, || index_size(&mut conn) == 0), "drained topics leave the index");
}

#[test]
fn the_config_refuses_what_the_layout_cannot_use() {
    let dir = temp_dir("topic-layout-conf");
    for (name, extra, key, message) in [
        ("brace", "layout = topic\nkey_prefix = {app}:", "key_prefix", "contains a brace"),
        ("unknown", "layout = columns", "layout", "\"columns\" is not one of classic, topic"),
    ] {
        let path = dir.join(format!("{name}.conf"));
        std::fs::write(&path, server_conf(6379, 1000, extra)).expect("write conf");
        let out = Command::new(BIN).arg("-c").arg(&path).output().expect("run delayer");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains(&format!("[delayer] {key}: ")) && stderr.contains(message), "{name}: {stderr}");
        assert!(stderr.contains(&path.display().to_string()), "{name}: names the file: {stderr}");
    }
}

/// A reservation as reserve.lua leaves it in the per-topic layout: the
/// bucket with its receipt and attempts, the id in the topic's reserved set
/// scored by its deadline (Unix ms), and (unless `index` is false, a client
/// that crashed) the deadline in the index.
fn reserved(conn: &mut redis::Connection, topic: &str, id: &str, deadline: f64, max_attempts: u32, index: bool) {
    let k = keys();
    let bucket = k.bucket(topic, id);
    let fields = [("topic", topic.to_string()), ("body", id.to_string()), ("receipt", "7".to_string())];
    let _: () = conn.hset_multiple(&bucket, &fields).expect("HSET");
    let _: () =
        conn.hset_multiple(&bucket, &[("attempts", "1"), ("max_attempts", &max_attempts.to_string())]).expect("HSET");
    let _: () = conn.zadd(k.reserved(topic), id, (deadline * 1000.0).round() as i64).expect("ZADD reserved");
    let _: () = conn.sadd(k.topics(), topic).expect("SADD");
    if index {
        redis::cmd("ZADD").arg(k.due()).arg("LT").arg(deadline).arg(topic).query::<()>(conn).expect("ZADD due");
    }
}

#[test]
fn expired_reservations_are_retried_or_dead_lettered_per_topic() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let server = start_server(&redis);
    assert!(server.wait_for_output(|o| o.contains("layout topic")), "{}", server.output());

    let deadline = redis_now(&mut conn) + 1.5;
    reserved(&mut conn, "mail", "retry-me", deadline, 0, true);
    reserved(&mut conn, "mail", "last-try", deadline, 1, true);
    reserved(&mut conn, "mail", "held", deadline + 3600.0, 0, true);
    assert!(
        wait_until(DEADLINE, || ready(&mut conn, "mail") == ["retry-me"]),
        "the expired job was not retried: ready {:?}\n{}",
        ready(&mut conn, "mail"),
        server.output()
    );
    assert!(redis_now(&mut conn) >= deadline, "expired before its deadline");
    let dead: Vec<String> = conn.lrange(keys().dead("mail"), 0, -1).expect("LRANGE dead");
    assert_eq!(dead, ["last-try"], "max_attempts reached: the topic's dead-letter list");
    let reason: Option<String> = conn.hget(keys().bucket("mail", "last-try"), "dead_reason").expect("HGET");
    assert_eq!(reason.as_deref(), Some("max_attempts"));
    let still: Vec<String> = conn.zrange(keys().reserved("mail"), 0, -1).expect("ZRANGE");
    assert_eq!(still, ["held"], "a reservation before its deadline stays");
    // The index then points at the held job's deadline (seconds): written
    // after the drain's scripts, so it may follow the ready list by a moment.
    let held = Some((deadline + 3600.0).round());
    assert!(wait_until(DEADLINE, || index_time(&mut conn, "mail") == held), "{:?}", index_time(&mut conn, "mail"));
    // Nothing was written to the classic layout's keys.
    let classic: Vec<String> = conn.keys("delayer:dead:*").expect("KEYS");
    assert!(classic.is_empty(), "{classic:?}");
}

#[test]
fn a_reservation_whose_index_write_was_lost_still_expires() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    // Known topic, no index entry: the sweep (at start, then every 10 s)
    // puts the reserved set's head in the index.
    let deadline = redis_now(&mut conn) + 0.5;
    reserved(&mut conn, "sms", "s1", deadline, 0, false);
    let server = start_server(&redis);
    assert!(
        wait_until(DEADLINE, || ready(&mut conn, "sms") == ["s1"]),
        "never expired: reserved {:?}\n{}",
        conn.zrange::<_, Vec<String>>(keys().reserved("sms"), 0, -1),
        server.output()
    );
}
