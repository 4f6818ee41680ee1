//! The calls a worker is built on, against a real redis-server:
//! reserve_many (acks and the next jobs in one call) and release / bury
//! that record why an attempt failed. Sync and async share the builders
//! and parsers; both are called here.

use delayer::{Delayer, Error, Job, JobRef};
use std::time::Duration;
use testkit::RedisServer;

const TTR: Duration = Duration::from_secs(30);

fn ready(redis: &RedisServer, d: &Delayer, ids: &[&str]) {
    for id in ids {
        d.push_job(&Job::new("t", *id, Duration::ZERO).body(format!("body of {id}"))).expect("push");
        let mut conn = redis.connection();
        let _: () = redis::cmd("ZREM").arg("delayer:job_pool").arg(*id).query(&mut conn).expect("zrem");
        let _: () = redis::cmd("LPUSH").arg("delayer:ready_queue:t").arg(*id).query(&mut conn).expect("lpush");
    }
}

fn last_error(redis: &RedisServer, id: &str) -> Option<String> {
    redis::cmd("HGET")
        .arg(format!("delayer:job_bucket:{id}"))
        .arg("last_error")
        .query(&mut redis.connection())
        .expect("hget")
}

#[test]
fn reserve_many_acks_first_then_takes_up_to_n_in_ready_order() {
    let redis = RedisServer::start();
    let d = Delayer::open(&redis.url()).expect("client");
    ready(&redis, &d, &["a", "b", "c"]);

    let (acks, jobs) = d.reserve_many("t", TTR, 2, &[]).expect("reserve_many");
    assert!(acks.is_empty());
    let ids: Vec<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["a", "b"], "oldest first, no more than n");
    assert_eq!((jobs[0].body_str(), jobs[0].attempts), (Some("body of a"), 1));

    // Ack both (one by receipt, one by id) and a stranger; take the rest.
    let refs = [JobRef::from(&jobs[0]), JobRef::from(jobs[1].id.as_str()), JobRef::from("nobody")];
    let (acks, rest) = d.reserve_many("t", TTR, 10, &refs).expect("reserve_many");
    assert_eq!(acks, [true, true, false]);
    assert_eq!(rest.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(), ["c"], "fewer than n: the queue ran out");
    assert!(!d.ack(&jobs[0]).expect("ack"), "already acked by reserve_many");

    // n = 0 only acks.
    let (acks, none) = d.reserve_many("t", TTR, 0, &[JobRef::from(&rest[0])]).expect("ack only");
    assert_eq!((acks, none.len()), (vec![true], 0));
    let (acks, none) = d.reserve_many("t", TTR, 5, &[]).expect("empty queue");
    assert!(acks.is_empty() && none.is_empty());
}

#[test]
fn reserve_many_refuses_bad_arguments_before_sending() {
    let redis = RedisServer::start();
    let d = Delayer::open(&redis.url()).expect("client");
    for bad in [
        d.reserve_many("t", TTR, 1001, &[]),
        d.reserve_many("", TTR, 1, &[]),
        d.reserve_many("t", Duration::ZERO, 1, &[]),
        d.reserve_many("t", TTR, 1, &[JobRef::with_receipt("a", "")]),
    ] {
        assert!(matches!(bad, Err(Error::InvalidArgument(_))), "{bad:?}");
    }
}

#[test]
fn release_and_bury_keep_why_the_attempt_failed() {
    let redis = RedisServer::start();
    let d = Delayer::open(&redis.url()).expect("client");
    ready(&redis, &d, &["r", "b", "plain"]);
    let (_, jobs) = d.reserve_many("t", TTR, 3, &[]).expect("reserve");

    assert!(d.release_with_error(&jobs[0], Some(Duration::from_secs(60)), "Timeout: gateway slow").expect("release"));
    assert_eq!(last_error(&redis, "r").as_deref(), Some("Timeout: gateway slow"));
    assert!(d.bury_with_error(&jobs[1], "Invalid: no phone number").expect("bury"));
    assert_eq!(last_error(&redis, "b").as_deref(), Some("Invalid: no phone number"));
    let dead = d.dead_letters("t", 0, 10).expect("dead");
    assert_eq!((dead[0].id.as_str(), dead[0].reason.as_str()), ("b", "buried"));
    // The old calls record nothing.
    assert!(d.release(&jobs[2], None).expect("release"));
    assert_eq!(last_error(&redis, "plain"), None);
    assert!(!d.bury_with_error(&jobs[0], "again").expect("not held"), "its reservation ended");
}

#[test]
fn a_long_error_is_cut_at_1000_bytes_on_a_character_boundary() {
    let redis = RedisServer::start();
    let d = Delayer::open(&redis.url()).expect("client");
    ready(&redis, &d, &["long"]);
    let (_, jobs) = d.reserve_many("t", TTR, 1, &[]).expect("reserve");
    let text = "é".repeat(700); // 1400 bytes, 2 per character
    assert!(d.release_with_error(&jobs[0], None, &text).expect("release"));
    let kept = last_error(&redis, "long").expect("kept");
    assert_eq!(kept.len(), 1000, "the first 1000 bytes");
    assert!(text.starts_with(&kept));
}

#[test]
fn the_async_client_has_the_same_calls() {
    let redis = RedisServer::start();
    let d = Delayer::open(&redis.url()).expect("client");
    ready(&redis, &d, &["x", "y"]);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let a = delayer::aio::Delayer::open(&redis.url()).expect("client");
        let (_, jobs) = a.reserve_many("t", TTR, 5, &[]).await.expect("reserve_many");
        assert_eq!(jobs.len(), 2);
        let (acks, _) = a.reserve_many("t", TTR, 1, &[JobRef::from(&jobs[0])]).await.expect("ack");
        assert_eq!(acks, [true]);
        assert!(a.bury_with_error(&jobs[1], "E: why").await.expect("bury"));
        assert!(a.reserve_many("t", TTR, 1001, &[]).await.is_err());
    });
    assert_eq!(last_error(&redis, "y").as_deref(), Some("E: why"));
    assert!(d.release_with_error("x", None, "gone").is_ok_and(|held| !held), "acked: not held");
}
