//! A property test of the move scripts (lua/move.lua, lua/move_topic.lua)
//! against a real redis-server: random mixes of valid jobs and corrupt
//! entries (ready queues and bookkeeping keys of the wrong type, buckets
//! without a topic or of the wrong type, orphans, scores of -inf, huge and
//! +inf, ids and topics that are not UTF-8, one id on two topics), sometimes
//! with Redis out of memory, driven as the server drives them until nothing
//! more moves; then the bad keys are deleted and the scripts run again.
//!
//! In the classic layout some topics are paused and listed in flow_topics:
//! their due jobs are set aside in their flow pool (score kept) instead, and
//! once the pause is lifted move_flow.lua makes them ready.
//!
//! Invariants: every valid due job ends up exactly once in its ready list
//! (held in the pool, untouched, while its list has the wrong type; set
//! aside exactly once while its topic is paused); no job
//! that was not due moves; orphans leave the pool, malformed ids are parked
//! once (held while the malformed list has the wrong type), buckets are
//! kept; a bad key is left as it was; a call either succeeds or fails with
//! nothing written.
//!
//! 64 cases by default; `PROPTEST_CASES=2000 cargo test -p delayer-server
//! --test move_props` runs more.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use redis::{Script, Value};
use std::collections::{BTreeMap, BTreeSet};
use testkit::RedisServer;

const P: &str = "delayer:";

/// Ids and topics: plain, a space, not UTF-8.
fn name(n: u8, kind: &str) -> Vec<u8> {
    match n % 4 {
        0 => format!("{kind}{n}").into_bytes(),
        1 => format!("{kind} {n}").into_bytes(),
        2 => vec![0xff, 0xfe, b'0' + n % 10],
        _ => format!("{kind}-{n}").into_bytes(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Due {
    Past(u16),
    Future(u16),
    NegInf,
    Huge,
    PosInf,
}

impl Due {
    fn score(self, now: f64) -> f64 {
        match self {
            Due::Past(s) => now - 1.0 - f64::from(s),
            Due::Future(s) => now + 100.0 + f64::from(s),
            Due::NegInf => f64::NEG_INFINITY,
            Due::Huge => 1e20,
            Due::PosInf => f64::INFINITY,
        }
    }

    fn is_due(self) -> bool {
        matches!(self, Due::Past(_) | Due::NegInf)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Bucket {
    Valid,
    Missing,
    NoTopic,
    NotHash,
}

#[derive(Debug, Clone)]
struct Spec {
    id: u8,
    topic: u8,
    due: Due,
    bucket: Bucket,
}

#[derive(Debug, Clone)]
struct Scenario {
    jobs: Vec<Spec>,
    /// Topics whose ready list is a string.
    bad_ready: BTreeSet<u8>,
    /// malformed, scheduled_count, topics, reserved of the wrong type.
    bad_books: [bool; 4],
    batch: u32,
    full: bool,
    /// Topics paused (and listed in flow_topics) until the fix.
    paused: BTreeSet<u8>,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    let due = prop_oneof![
        6 => (0u16..1000).prop_map(Due::Past),
        2 => (0u16..1000).prop_map(Due::Future),
        1 => Just(Due::NegInf),
        1 => Just(Due::Huge),
        1 => Just(Due::PosInf),
    ];
    let bucket = prop_oneof![8 => Just(Bucket::Valid), 1 => Just(Bucket::Missing), 1 => Just(Bucket::NoTopic),
        1 => Just(Bucket::NotHash)];
    let spec = (0u8..40, 0u8..5, due, bucket).prop_map(|(id, topic, due, bucket)| Spec { id, topic, due, bucket });
    (
        prop::collection::vec(spec, 0..60),
        prop::collection::btree_set(0u8..5, 0..3),
        prop::array::uniform4(prop::bool::weighted(0.25)),
        1u32..25,
        prop::bool::weighted(0.2),
        prop::collection::btree_set(0u8..5, 0..3),
    )
        .prop_map(|(jobs, bad_ready, bad_books, batch, full, paused)| Scenario {
            jobs,
            bad_ready,
            bad_books,
            batch,
            full,
            paused,
        })
}

fn cat(a: &str, b: &[u8]) -> Vec<u8> {
    [a.as_bytes(), b].concat()
}

fn now(conn: &mut redis::Connection) -> f64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(conn).expect("TIME");
    s as f64 + us as f64 / 1e6
}

fn full(conn: &mut redis::Connection, on: bool) {
    let max = if on { "1" } else { "0" };
    let _: () = redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg(max).query(conn).expect("maxmemory");
}

fn list(conn: &mut redis::Connection, key: &[u8]) -> Vec<Vec<u8>> {
    redis::cmd("LRANGE").arg(key).arg(0).arg(-1).query(conn).unwrap_or_default()
}

/// The classic layout: one pool, ids global (the last write of an id wins).
fn classic(conn: &mut redis::Connection, s: &Scenario) -> Result<(), TestCaseError> {
    full(conn, false); // a case that failed may have left it on
    let _: () = redis::cmd("FLUSHALL").query(conn).expect("FLUSHALL");
    let t = now(conn);
    let mut jobs: BTreeMap<Vec<u8>, Spec> = BTreeMap::new();
    for spec in &s.jobs {
        jobs.insert(name(spec.id, "j"), spec.clone());
    }
    for (id, spec) in &jobs {
        let bucket = cat("delayer:job_bucket:", id);
        let mut pipe = redis::pipe();
        match spec.bucket {
            Bucket::Valid => pipe.cmd("HSET").arg(&bucket).arg("topic").arg(name(spec.topic, "t")).arg("body").arg(id),
            Bucket::NoTopic => pipe.cmd("HSET").arg(&bucket).arg("body").arg(id),
            Bucket::NotHash => pipe.cmd("SET").arg(&bucket).arg(id),
            Bucket::Missing => &mut pipe,
        };
        pipe.cmd("ZADD").arg("delayer:job_pool").arg(spec.due.score(t)).arg(id);
        let _: () = pipe.query(conn).expect("fill");
    }
    let bad_keys: Vec<(Vec<u8>, &str)> = s
        .bad_ready
        .iter()
        .map(|t| cat("delayer:ready_queue:", &name(*t, "t")))
        .chain(
            ["malformed", "scheduled_count", "topics", "reserved"]
                .iter()
                .zip(s.bad_books)
                .filter(|(_, bad)| *bad)
                .map(|(k, _)| cat(P, k.as_bytes())),
        )
        .map(|k| (k, "bad"))
        .collect();
    for (key, value) in &bad_keys {
        let _: () = redis::cmd("SET").arg(key).arg(value).query(conn).expect("SET");
    }
    for topic in &s.paused {
        let (t, flow) = (name(*topic, "t"), cat("delayer:flow:", &name(*topic, "t")));
        let _: () = redis::pipe()
            .cmd("SADD")
            .arg("delayer:flow_topics")
            .arg(&t)
            .cmd("HSET")
            .arg(flow)
            .arg("paused")
            .arg("1.000")
            .query(conn)
            .expect("pause");
    }
    let script = Script::new(include_str!("../lua/move.lua"));
    let drain = Script::new(include_str!("../lua/move_flow.lua"));
    let run = |conn: &mut redis::Connection| -> Result<(), TestCaseError> {
        if s.full {
            full(conn, true);
        }
        let mut from = 0u64;
        for _ in 0..1000 {
            let reply: Value = script
                .key(format!("{P}job_pool"))
                .key(format!("{P}malformed"))
                .key(format!("{P}scheduled_count"))
                .key(format!("{P}topics"))
                .key(format!("{P}reserved"))
                .key(format!("{P}flow_topics"))
                .arg(format!("{P}job_bucket:"))
                .arg(format!("{P}ready_queue:"))
                .arg(s.batch)
                .arg("1")
                .arg(from)
                .arg(format!("{P}flow_pool:"))
                .invoke(conn)
                .map_err(|e| TestCaseError::fail(format!("move.lua failed: {e}")))?;
            let Value::Array(items) = reply else { return Err(TestCaseError::fail("not an array")) };
            let n = |i: usize| match items.get(i) {
                Some(Value::Int(n)) => *n as u64,
                other => panic!("element {i}: {other:?}"),
            };
            let (taken, held, head) = (n(0), n(9), n(11));
            // As the server: on while batches come back full, or from the
            // pool's head again when the held head changed.
            let again = from > 0 && head == 0;
            from = head;
            if taken + held < u64::from(s.batch) && !again {
                break;
            }
        }
        // The flow drain, as the server runs it: every listed topic, until
        // no call takes a whole batch.
        for _ in 0..1000 {
            let mut more = false;
            for topic in 0..5u8 {
                let t = name(topic, "t");
                let reply: Value = drain
                    .key(cat("delayer:flow_pool:", &t))
                    .key(cat("delayer:ready_queue:", &t))
                    .key(cat("delayer:flow:", &t))
                    .key(format!("{P}job_pool"))
                    .key(format!("{P}reserved"))
                    .key(format!("{P}scheduled_count"))
                    .key(format!("{P}flow_topics"))
                    .arg(&t)
                    .arg(format!("{P}job_bucket:"))
                    .arg(s.batch)
                    .arg("1")
                    .invoke(conn)
                    .map_err(|e| TestCaseError::fail(format!("move_flow.lua failed: {e}")))?;
                let Value::Array(items) = reply else { return Err(TestCaseError::fail("not an array")) };
                let (Some(Value::Int(moved)), Some(Value::Int(dropped))) = (items.first(), items.get(1)) else {
                    return Err(TestCaseError::fail(format!("move_flow.lua: {items:?}")));
                };
                more |= (moved + dropped) as u64 >= u64::from(s.batch);
            }
            if !more {
                break;
            }
        }
        full(conn, false);
        Ok(())
    };
    run(conn)?;

    // Before the fix: the bad keys are as they were, held jobs wait.
    for (key, value) in &bad_keys {
        let now: Option<Vec<u8>> = redis::cmd("GET").arg(key).query(conn).unwrap_or(None);
        prop_assert_eq!(now.as_deref(), Some(value.as_bytes()), "a bad key was changed");
    }
    let malformed_bad = s.bad_books[0];
    let pool: BTreeMap<Vec<u8>, f64> = redis::cmd("ZRANGE")
        .arg("delayer:job_pool")
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query::<Vec<(Vec<u8>, f64)>>(conn)
        .expect("ZRANGE")
        .into_iter()
        .collect();
    for (id, spec) in &jobs {
        let paused = s.paused.contains(&spec.topic);
        let held = spec.due.is_due()
            && match spec.bucket {
                Bucket::Valid => !paused && s.bad_ready.contains(&spec.topic),
                Bucket::NoTopic | Bucket::NotHash => malformed_bad,
                Bucket::Missing => false,
            };
        let waits = !spec.due.is_due() || held;
        prop_assert_eq!(pool.contains_key(id), waits, "{:?} {:?}: in the pool", id, spec);
        if waits {
            let score = pool[id];
            prop_assert!(score == spec.due.score(t) || (score - spec.due.score(t)).abs() < 1e-3, "score changed");
        }
        // A paused topic's due jobs: set aside once, with their due time.
        let aside = spec.due.is_due() && spec.bucket == Bucket::Valid && paused;
        let key = cat("delayer:flow_pool:", &name(spec.topic, "t"));
        let score: Option<f64> = redis::cmd("ZSCORE").arg(&key).arg(id).query(conn).unwrap_or(None);
        prop_assert_eq!(score.is_some(), aside, "{:?} {:?}: set aside", id, spec);
        if let Some(score) = score {
            prop_assert!(score == spec.due.score(t) || (score - spec.due.score(t)).abs() < 1e-3, "score changed");
        }
        let ready = list(conn, &cat("delayer:ready_queue:", &name(spec.topic, "t")));
        prop_assert!(!(paused && ready.contains(id)), "{:?}: a paused topic's job was made ready", id);
    }
    // The fix: every bad key deleted, the pauses lifted, then the scripts run again.
    for (key, _) in &bad_keys {
        let _: () = redis::cmd("DEL").arg(key).query(conn).expect("DEL");
    }
    for topic in &s.paused {
        let _: () = redis::cmd("DEL").arg(cat("delayer:flow:", &name(*topic, "t"))).query(conn).expect("DEL");
    }
    run(conn)?;
    let listed: usize = redis::cmd("SCARD").arg("delayer:flow_topics").query(conn).expect("SCARD");
    prop_assert_eq!(listed, 0, "a drained topic is still listed");

    let mut ready: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
    for topic in 0..5 {
        for id in list(conn, &cat("delayer:ready_queue:", &name(topic, "t"))) {
            *ready.entry(id).or_default() += 1;
        }
    }
    let mut parked: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
    for id in list(conn, b"delayer:malformed") {
        *parked.entry(id).or_default() += 1;
    }
    for (id, spec) in &jobs {
        let due = spec.due.is_due();
        let (want_ready, want_parked) = match spec.bucket {
            Bucket::Valid => (due, false),
            Bucket::NoTopic | Bucket::NotHash => (false, due),
            Bucket::Missing => (false, false),
        };
        prop_assert_eq!(ready.get(id).copied().unwrap_or(0), usize::from(want_ready), "{:?} {:?}: ready", id, spec);
        if want_ready {
            let queue = list(conn, &cat("delayer:ready_queue:", &name(spec.topic, "t")));
            prop_assert!(queue.contains(id), "{:?} in another topic's queue", id);
        }
        prop_assert_eq!(parked.get(id).copied().unwrap_or(0), usize::from(want_parked), "{:?}: parked", id);
        let exists: bool = redis::cmd("EXISTS").arg(cat("delayer:job_bucket:", id)).query(conn).expect("EXISTS");
        prop_assert_eq!(exists, spec.bucket != Bucket::Missing, "{:?}: bucket kept", id);
        let waiting: Option<f64> = redis::cmd("ZSCORE").arg("delayer:job_pool").arg(id).query(conn).expect("ZSCORE");
        prop_assert_eq!(waiting.is_some(), !due, "{:?}: left in the pool", id);
    }
    Ok(())
}

/// The per-topic layout: ids per topic, one call per topic.
fn per_topic(conn: &mut redis::Connection, s: &Scenario) -> Result<(), TestCaseError> {
    full(conn, false); // a case that failed may have left it on
    let _: () = redis::cmd("FLUSHALL").query(conn).expect("FLUSHALL");
    let t = now(conn);
    let key = |topic: u8, kind: &str| cat(P, &[b"{", &name(topic, "t")[..], b"}:", kind.as_bytes()].concat());
    let mut jobs: BTreeMap<(u8, Vec<u8>), Due> = BTreeMap::new();
    for spec in &s.jobs {
        jobs.insert((spec.topic, name(spec.id, "j")), spec.due);
    }
    for ((topic, id), due) in &jobs {
        let _: () = redis::cmd("ZADD").arg(key(*topic, "pool")).arg(due.score(t)).arg(id).query(conn).expect("ZADD");
    }
    for topic in &s.bad_ready {
        let _: () = redis::cmd("SET").arg(key(*topic, "ready")).arg("bad").query(conn).expect("SET");
    }
    if s.bad_books[3] {
        let _: () = redis::cmd("SET").arg(key(0, "reserved")).arg("bad").query(conn).expect("SET");
    }
    let script = Script::new(include_str!("../lua/move_topic.lua"));
    let drain = |conn: &mut redis::Connection| -> Result<(), TestCaseError> {
        if s.full {
            full(conn, true);
        }
        for topic in 0..5u8 {
            for _ in 0..1000 {
                let before: Vec<(Vec<u8>, f64)> = redis::cmd("ZRANGE")
                    .arg(key(topic, "pool"))
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query(conn)
                    .expect("pool");
                let reply = script
                    .key(key(topic, "pool"))
                    .key(key(topic, "ready"))
                    .key(key(topic, "reserved"))
                    .key(key(topic, "flow"))
                    .arg(s.batch)
                    .invoke::<Value>(conn);
                match reply {
                    Ok(Value::Array(items)) => match items.first() {
                        Some(Value::Int(n)) if *n < i64::from(s.batch) => break,
                        Some(Value::Int(_)) => {}
                        other => return Err(TestCaseError::fail(format!("taken: {other:?}"))),
                    },
                    Ok(other) => return Err(TestCaseError::fail(format!("reply {other:?}"))),
                    Err(e) => {
                        prop_assert!(s.bad_ready.contains(&topic), "move_topic.lua failed: {}", e);
                        prop_assert_eq!(e.code(), Some("WRONGTYPE"));
                        let after: Vec<(Vec<u8>, f64)> = redis::cmd("ZRANGE")
                            .arg(key(topic, "pool"))
                            .arg(0)
                            .arg(-1)
                            .arg("WITHSCORES")
                            .query(conn)
                            .expect("pool");
                        prop_assert_eq!(before, after, "a failed call wrote");
                        break;
                    }
                }
            }
        }
        full(conn, false);
        Ok(())
    };
    drain(conn)?;
    for topic in &s.bad_ready {
        let _: () = redis::cmd("DEL").arg(key(*topic, "ready")).query(conn).expect("DEL");
    }
    drain(conn)?;
    for ((topic, id), due) in &jobs {
        let n = list(conn, &key(*topic, "ready")).iter().filter(|x| *x == id).count();
        prop_assert_eq!(n, usize::from(due.is_due()), "{:?} of topic {}: ready", id, topic);
        let waiting: Option<f64> = redis::cmd("ZSCORE").arg(key(*topic, "pool")).arg(id).query(conn).expect("ZSCORE");
        prop_assert_eq!(waiting.is_some(), !due.is_due(), "{:?} of topic {}: pool", id, topic);
    }
    if s.bad_books[3] {
        let kept: Option<String> = redis::cmd("GET").arg(key(0, "reserved")).query(conn).expect("GET");
        prop_assert_eq!(kept.as_deref(), Some("bad"), "a bad reserved key was changed");
    }
    Ok(())
}

#[test]
fn the_move_scripts_keep_every_job_whatever_redis_holds() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("maxmemory-policy").arg("noeviction").query(&mut conn).expect("policy");
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64);
    let mut runner = TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
    let conn = std::cell::RefCell::new(conn);
    let outcome = runner.run(&scenario(), |s| {
        let mut conn = conn.borrow_mut();
        classic(&mut conn, &s)?;
        per_topic(&mut conn, &s)
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
}
