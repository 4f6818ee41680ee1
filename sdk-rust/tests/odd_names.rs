//! Any id or topic a Delayer 1.x client could write works on every call.
//!
//! 1.x refused only empty ids and topics, so jobs on topics like
//! `close order`, and ids with spaces, braces, control characters or hundreds
//! of bytes, exist in the field; the classic layout puts them in key names,
//! where Redis takes any bytes.

use delayer::{Delayer, Error, Job, JobRef};
use redis::Commands;
use std::time::Duration;
use testkit::RedisServer;

const TOPIC: &str = "close order";

fn odd_ids() -> Vec<String> {
    ["order 42", "{tag}", "a}b{", "订单 一", "tab\there\nnewline", " ", "42", "\u{7f}\u{0}"]
        .into_iter()
        .map(String::from)
        .chain([format!("long {}", "x".repeat(300))])
        .collect()
}

fn client(redis: &RedisServer) -> Delayer {
    Delayer::open(&redis.url()).expect("client")
}

/// Makes job `id` ready as the server would: out of the pool, onto its queue.
fn make_ready(conn: &mut redis::Connection, topic: &str, id: &str) {
    let _: () = conn.zrem("delayer:job_pool", id).expect("zrem");
    let _: () = conn.lpush(format!("delayer:ready_queue:{topic}"), id).expect("lpush");
}

fn in_pool(conn: &mut redis::Connection, id: &str) -> bool {
    conn.zscore::<_, _, Option<f64>>("delayer:job_pool", id).expect("zscore").is_some()
}

#[test]
fn a_1x_job_with_an_odd_topic_and_id_is_popped_bpopped_and_removed() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    let ids = odd_ids();
    for id in &ids {
        testkit::delayer_1x_push(&mut conn, id, TOPIC, &format!("body of {id}"), 0);
        make_ready(&mut conn, TOPIC, id);
    }
    for id in &ids[..ids.len() - 1] {
        let got = d.pop(TOPIC).expect("pop").expect("a job");
        assert_eq!((got.id.as_str(), got.topic.as_str()), (id.as_str(), TOPIC));
        assert_eq!(got.body_str(), Some(format!("body of {id}").as_str()));
    }
    let last = d.bpop(TOPIC, Duration::from_secs(5)).expect("bpop").expect("a job");
    assert_eq!(last.id, ids[ids.len() - 1]);
    assert_eq!(d.pop(TOPIC).expect("pop"), None);

    for id in &ids {
        testkit::delayer_1x_push(&mut conn, id, TOPIC, "waiting", 60);
        assert!(d.remove(id).expect("remove"), "{id:?} not removed");
        assert!(!in_pool(&mut conn, id), "{id:?} still waiting");
    }
    let keys: Vec<String> = conn.keys("*").expect("keys");
    assert!(keys.is_empty(), "left behind: {keys:?}");
}

#[test]
fn odd_names_are_pushed_reserved_rescheduled_and_dead_lettered() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    let ids = odd_ids();
    let (first, rest) = ids.split_first().expect("ids");
    d.push_job(&Job::new(TOPIC, first.as_str(), Duration::from_secs(60)).body("b")).expect("push");
    let many: Vec<Job> = rest.iter().map(|id| Job::new(TOPIC, id.as_str(), Duration::from_secs(60))).collect();
    d.push_many(&many).expect("push_many");
    for id in &ids {
        let topic: String = conn.hget(format!("delayer:job_bucket:{id}"), "topic").expect("hget");
        assert_eq!(topic, TOPIC, "{id:?}");
    }

    for id in &ids {
        // One at a time, so each call meets this job.
        assert!(d.reschedule(id, Duration::ZERO).expect("reschedule").is_some(), "{id:?} not rescheduled");
        make_ready(&mut conn, TOPIC, id);
        let job = d.reserve(TOPIC, Duration::from_secs(60)).expect("reserve").expect("a job");
        assert_eq!((job.id.as_str(), job.topic.as_str()), (id.as_str(), TOPIC));
        assert!(d.touch(&job, Duration::from_secs(60)).expect("touch").is_some(), "{id:?} not touched");
        assert!(d.release(JobRef::with_receipt(id, &job.receipt), None).expect("release"), "{id:?}");
        assert!(d.reschedule(id, Duration::ZERO).expect("reschedule").is_some());
        make_ready(&mut conn, TOPIC, id);
        let again = d.breserve(TOPIC, Duration::from_secs(60), Duration::from_secs(5)).expect("breserve");
        let again = again.expect("a job");
        assert_eq!(again.id, *id);
        if id == first {
            assert!(d.ack(id.as_str()).expect("ack"), "{id:?} not acked");
        } else {
            assert!(d.bury(&again).expect("bury"), "{id:?} not buried");
        }
    }

    let dead = d.dead_letters(TOPIC, 0, 100).expect("dead letters");
    let mut listed: Vec<&str> = dead.iter().map(|l| l.id.as_str()).collect();
    let mut expected: Vec<&str> = rest.iter().map(String::as_str).collect();
    listed.sort_unstable();
    expected.sort_unstable();
    assert_eq!(listed, expected);
    let (requeued, purged) = rest.split_at(rest.len() / 2);
    let requeued: Vec<&str> = requeued.iter().map(String::as_str).collect();
    let purged: Vec<&str> = purged.iter().map(String::as_str).collect();
    assert_eq!(d.requeue_dead(TOPIC, Some(&requeued)).expect("requeue"), requeued.len() as u64);
    assert_eq!(d.purge_dead(TOPIC, Some(&purged)).expect("purge"), purged.len() as u64);
    for id in &requeued {
        assert!(in_pool(&mut conn, id), "{id:?} not re-queued");
    }
    assert!(d.dead_letters(TOPIC, 0, 100).expect("dead letters").is_empty());
}

#[test]
fn only_empty_names_are_refused() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    let invalid = |r: Result<(), Error>| matches!(r, Err(Error::InvalidArgument(_)));
    assert!(invalid(d.push("", "id", Duration::ZERO).map(|_| ())));
    assert!(invalid(d.push("t", "", Duration::ZERO).map(|_| ())));
    assert!(invalid(d.pop("").map(|_| ())));
    assert!(invalid(d.remove("").map(|_| ())));
    assert!(invalid(d.reserve("", Duration::from_secs(1)).map(|_| ())));
    assert!(invalid(d.requeue_dead(TOPIC, Some(&["ok", ""])).map(|_| ())));
    let keys: Vec<String> = conn.keys("*").expect("keys");
    assert!(keys.is_empty(), "nothing written: {keys:?}");
}
