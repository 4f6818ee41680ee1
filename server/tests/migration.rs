//! The migration from Delayer 1.x that README.md's "Migrating from 1.x"
//! walks through, step by step, on real processes: two servers on one Redis
//! during the switch, Delayer 1.x producers and consumers (what
//! mix/delayer-client writes and reads, byte for byte: testkit's
//! `delayer_1x_push` and [`pop_1x`]) next to the new SDK, then the old server
//! stopped and the consumers switched to reserve/ack on the same topic.
//!
//! The original Go server cannot be installed here, so a second one of ours
//! stands in for it: what this shows is that the new server, old clients and
//! new clients share one Redis and one topic without losing or repeating a
//! job. (That the 1.x server moves jobs pushed by the new SDK is the wire
//! format's compatibility, written down in docs/PROTOCOL.md.)

use delayer::{Delayer, Job};
use redis::Commands;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use testkit::{delayer_1x_push, server_conf, wait_until, DelayerProcess, RedisServer, DEADLINE};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");
const TOPIC: &str = "order";

/// A Delayer 1.x consumer's pop: RPOP the ready queue, HGETALL the job's
/// bucket, DEL it. Returns (id, topic, body).
fn pop_1x(conn: &mut redis::Connection, topic: &str) -> Option<(String, String, String)> {
    let id: Option<String> = redis::cmd("RPOP").arg(format!("delayer:ready_queue:{topic}")).query(conn).expect("RPOP");
    let id = id?;
    let bucket = format!("delayer:job_bucket:{id}");
    let fields: HashMap<String, String> = conn.hgetall(&bucket).expect("HGETALL");
    let _: () = conn.del(&bucket).expect("DEL");
    // 1.x drops a job whose bucket is gone; here that is a lost job.
    assert!(!fields.is_empty(), "job {id} reached the ready queue without its bucket");
    Some((id, fields.get("topic").cloned().unwrap_or_default(), fields.get("body").cloned().unwrap_or_default()))
}

#[test]
fn old_and_new_servers_and_clients_share_a_topic_then_switch_to_reliable_mode() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();

    // Step 1: the new server starts next to the old one, on the same Redis
    // (no pid file, or one of its own). `old` stands in for the 1.x server.
    let mut old = DelayerProcess::start(BIN, &server_conf(redis.port(), 200, ""));
    let new = DelayerProcess::start(BIN, &server_conf(redis.port(), 200, ""));
    for server in [&old, &new] {
        assert!(server.wait_for_output(|o| o.contains("starting")), "{}", server.output());
    }
    let sdk = Delayer::open(&redis.url()).expect("the new SDK");

    // Step 2: new producers and consumers join the old ones. A job pushed
    // by one kind is popped, intact, by the other.
    delayer_1x_push(&mut conn, "o-first", TOPIC, "from 1.x", 0);
    let popped = wait_for(|| sdk.pop(TOPIC).expect("pop")).expect("the SDK pops a 1.x job");
    assert_eq!((popped.id.as_str(), popped.topic.as_str(), popped.body_str()), ("o-first", TOPIC, Some("from 1.x")));
    sdk.push_job(&Job::new(TOPIC, "n-first", Duration::ZERO).body("from the SDK")).expect("push");
    let popped = wait_for(|| pop_1x(&mut conn, TOPIC)).expect("a 1.x consumer pops an SDK job");
    assert_eq!(popped, ("n-first".into(), TOPIC.into(), "from the SDK".into()));

    // Both kinds at once, both servers moving: every job once, intact.
    let mut pushed = BTreeMap::new();
    for i in 0..15 {
        let (o, n) = (format!("o-{i}"), format!("n-{i}"));
        delayer_1x_push(&mut conn, &o, TOPIC, &format!("body {o}"), i % 2);
        let job = Job::new(TOPIC, n.as_str(), Duration::from_millis(100 * i)).body(format!("body {n}"));
        sdk.push_job(&job).expect("push");
        pushed.insert(o.clone(), format!("body {o}"));
        pushed.insert(n.clone(), format!("body {n}"));
    }
    let mut delivered: BTreeMap<String, String> = BTreeMap::new();
    let mut twice = Vec::new();
    let all = wait_until(DEADLINE, || {
        let from_old = pop_1x(&mut conn, TOPIC);
        let from_new = sdk
            .pop(TOPIC)
            .expect("pop")
            .map(|m| (m.id.clone(), m.topic.clone(), m.body_str().unwrap_or("").to_string()));
        for (id, topic, body) in from_old.into_iter().chain(from_new) {
            assert_eq!(topic, TOPIC, "job {id}");
            if delivered.insert(id.clone(), body).is_some() {
                twice.push(id);
            }
        }
        delivered.len() >= pushed.len()
    });
    assert!(all, "delivered {} of {}: {:?}", delivered.len(), pushed.len(), delivered.keys());
    assert!(twice.is_empty(), "delivered twice: {twice:?}");
    assert_eq!(delivered, pushed);

    // Step 3: the old server is stopped (SIGTERM: its batch in flight is
    // finished). The new one moves everything from here on.
    old.signal("TERM");
    assert!(old.wait_exit(DEADLINE).is_some_and(|s| s.success()), "{}", old.output());

    // Step 4: consumers switch to reserve/ack, on the same topic; old
    // producers still push. A job not acked (a worker died) comes back.
    delayer_1x_push(&mut conn, "o-late", TOPIC, "late 1.x", 0);
    sdk.push_job(&Job::new(TOPIC, "n-late", Duration::ZERO).body("late SDK")).expect("push");
    // Long enough that the first job cannot run out before the second is
    // reserved, on a loaded machine.
    let ttr = Duration::from_secs(3);
    let mut bodies = BTreeMap::new();
    let mut dropped = None;
    for _ in 0..2 {
        let job = sdk.breserve(TOPIC, ttr, DEADLINE).expect("breserve").expect("reserved");
        assert_eq!(job.attempts, 1);
        bodies.insert(job.id.clone(), job.body_str().unwrap_or("").to_string());
        if job.id == "o-late" {
            dropped = Some(job); // the worker "dies" holding it
        } else {
            assert!(sdk.ack(&job).expect("ack"));
        }
    }
    assert_eq!(bodies, BTreeMap::from([("n-late".into(), "late SDK".into()), ("o-late".into(), "late 1.x".into())]));
    let dropped = dropped.expect("the 1.x job was reserved");
    let again = sdk.breserve(TOPIC, ttr, DEADLINE).expect("breserve").expect("delivered again");
    assert_eq!((again.id.as_str(), again.attempts, again.body_str()), ("o-late", 2, Some("late 1.x")));
    assert!(!sdk.ack(&dropped).expect("late ack"), "the dead worker no longer holds it");
    assert!(sdk.ack(&again).expect("ack"));

    // Nothing left behind: no bucket, nothing waiting, nothing reserved.
    let buckets: Vec<String> = conn.keys("delayer:job_bucket:*").expect("KEYS");
    assert!(buckets.is_empty(), "{buckets:?}");
    assert_eq!(conn.zcard::<_, u64>("delayer:job_pool").expect("ZCARD"), 0);
    assert!(new.wait_for_output(|o| o.contains("expired 1 reservation(s)")), "{}", new.output());
}

/// Polls `f` until it returns something, up to [`DEADLINE`].
fn wait_for<T>(mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let mut found = None;
    wait_until(DEADLINE, || {
        found = f();
        found.is_some()
    });
    found
}
