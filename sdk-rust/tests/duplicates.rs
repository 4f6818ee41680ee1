//! An id pushed again: it is never delivered before its new due time, by
//! any consumer, sync or async; and push "if absent" tells the caller the id
//! is taken instead of replacing the job. Ids are global across topics (the
//! Delayer 1.x layout). Moves are done by hand, as the server would.

use delayer::{Delayer, Error, IdTaken, Job, JobRef};
use redis::Commands;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use testkit::RedisServer;

const LONG: Duration = Duration::from_secs(100);

/// Makes job `id` ready as the server would: out of the pool, onto its queue.
fn make_ready(conn: &mut redis::Connection, topic: &str, id: &str) {
    let _: () = conn.zrem("delayer:job_pool", id).expect("zrem");
    let _: () = conn.lpush(format!("delayer:ready_queue:{topic}"), id).expect("lpush");
}

fn unix(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH).expect("after 1970").as_secs_f64()
}

/// How the id is pushed the second time.
#[derive(Debug, Clone, Copy)]
enum Again {
    /// With the SDK's push.
    Sdk,
    /// As a Delayer 1.x client writes it (HMSET merges: old fields stay).
    Delayer1x,
}

/// Pushes "x" due now and makes it ready, then pushes "x" again due in
/// 100 s with body "second": the ready queue holds a stale entry for it.
fn ready_then_pushed_again(d: &Delayer, conn: &mut redis::Connection, again: Again) {
    d.push_job(&Job::new("t", "x", Duration::ZERO).body("first")).expect("push");
    make_ready(conn, "t", "x");
    match again {
        Again::Sdk => {
            d.push_job(&Job::new("t", "x", LONG).body("second")).expect("push again");
        }
        Again::Delayer1x => {
            testkit::delayer_1x_push(conn, "x", "t", "second", 100);
        }
    }
}

/// The second job is untouched: still waiting, with its body.
fn assert_still_waiting(conn: &mut redis::Connection, why: &str) {
    let score: Option<f64> = conn.zscore("delayer:job_pool", "x").expect("zscore");
    assert!(score.is_some(), "{why}: the re-pushed job left the pool");
    let body: Option<String> = conn.hget("delayer:job_bucket:x", "body").expect("hget");
    assert_eq!(body.as_deref(), Some("second"), "{why}: the re-pushed job's data is gone");
}

#[test]
fn a_re_pushed_id_is_not_delivered_early_by_any_consumer() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = Delayer::open(&redis.url()).expect("client");
    let short = Duration::from_millis(300);
    let ttr = Duration::from_secs(30);
    for again in [Again::Sdk, Again::Delayer1x] {
        ready_then_pushed_again(&d, &mut conn, again);
        assert_eq!(d.pop("t").expect("pop"), None, "pop, pushed again by {again:?}");
        assert_still_waiting(&mut conn, "pop");

        ready_then_pushed_again(&d, &mut conn, again);
        assert_eq!(d.bpop("t", short).expect("bpop"), None, "bpop, pushed again by {again:?}");
        assert_still_waiting(&mut conn, "bpop");

        ready_then_pushed_again(&d, &mut conn, again);
        assert_eq!(d.reserve("t", ttr).expect("reserve"), None, "reserve, pushed again by {again:?}");
        assert_still_waiting(&mut conn, "reserve");

        ready_then_pushed_again(&d, &mut conn, again);
        assert_eq!(d.breserve("t", ttr, short).expect("breserve"), None, "breserve, pushed again by {again:?}");
        assert_still_waiting(&mut conn, "breserve");
        let _: () = redis::cmd("FLUSHDB").query(&mut conn).expect("flushdb");
    }
}

#[tokio::test]
async fn a_re_pushed_id_is_not_delivered_early_by_the_async_client() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let sync = Delayer::open(&redis.url()).expect("client");
    let d = delayer::aio::Delayer::open(&redis.url()).expect("client");
    let short = Duration::from_millis(300);
    let ttr = Duration::from_secs(30);

    ready_then_pushed_again(&sync, &mut conn, Again::Sdk);
    assert_eq!(d.pop("t").await.expect("pop"), None);
    ready_then_pushed_again(&sync, &mut conn, Again::Sdk);
    assert_eq!(d.bpop("t", short).await.expect("bpop"), None);
    ready_then_pushed_again(&sync, &mut conn, Again::Delayer1x);
    assert_eq!(d.reserve("t", ttr).await.expect("reserve"), None);
    ready_then_pushed_again(&sync, &mut conn, Again::Delayer1x);
    assert_eq!(d.breserve("t", ttr, short).await.expect("breserve"), None);
    assert_still_waiting(&mut conn, "async");

    // A live job behind a stale entry is still found by the same wait.
    sync.push("t", "live", Duration::ZERO).expect("push");
    make_ready(&mut conn, "t", "live");
    let got = d.bpop("t", Duration::from_secs(5)).await.expect("bpop").map(|m| m.id);
    assert_eq!(got.as_deref(), Some("live"));
}

#[test]
fn a_reservation_is_not_held_once_its_id_is_pushed_again() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = Delayer::open(&redis.url()).expect("client");
    d.push("t", "x", Duration::ZERO).expect("push");
    make_ready(&mut conn, "t", "x");
    let job = d.reserve("t", Duration::from_secs(30)).expect("reserve").expect("job");
    // A 1.x-style write keeps the bucket's receipt field: only the pool
    // tells that the reservation is stale.
    testkit::delayer_1x_push(&mut conn, "x", "t", "second", 100);

    assert_eq!(d.touch(&job, Duration::from_secs(60)).expect("touch"), None, "touch");
    assert!(!d.release(&job, None).expect("release"), "release");
    assert!(!d.bury(&job).expect("bury"), "bury");
    assert!(!d.ack(&job).expect("ack"), "ack");
    assert!(!d.ack(JobRef::from("x")).expect("ack by id"), "ack by id");
    assert_still_waiting(&mut conn, "after ending a stale reservation");
}

#[test]
fn ids_are_global_and_if_absent_reports_the_job_holding_one() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = Delayer::open(&redis.url()).expect("client");
    let first_due = d.push("close_order", "42", Duration::from_secs(1800)).expect("push");

    let err = d.push_job(&Job::new("sms", "42", Duration::from_secs(5)).if_absent()).expect_err("taken");
    let Error::IdTaken(IdTaken { taken, due }) = &err else { panic!("expected IdTaken, got {err:?}") };
    assert_eq!(taken.len(), 1);
    assert_eq!((taken[0].id.as_str(), taken[0].topic.as_str()), ("42", "close_order"));
    let taken_due = taken[0].due.expect("still waiting");
    assert!((unix(taken_due) - unix(first_due)).abs() < 0.002, "the taken job's due time");
    assert_eq!(due, &vec![None]);
    let text = err.to_string();
    assert!(text.contains("\"42\"") && text.contains("close_order") && text.contains("taken"), "{text}");
    let topic: String = conn.hget("delayer:job_bucket:42", "topic").expect("hget");
    assert_eq!(topic, "close_order", "nothing was written");

    // Not waiting any more (ready): taken all the same, with no due time.
    make_ready(&mut conn, "close_order", "42");
    let err = d.push_job(&Job::new("sms", "42", Duration::ZERO).if_absent()).expect_err("taken while ready");
    let Error::IdTaken(t) = err else { panic!("expected IdTaken") };
    assert_eq!(t.taken[0].due, None);

    // A free id is written as by a plain push.
    d.push_job(&Job::new("sms", "43", Duration::from_secs(5)).if_absent()).expect("free id");
    let topic: String = conn.hget("delayer:job_bucket:43", "topic").expect("hget");
    assert_eq!(topic, "sms");

    // The default replaces, whatever the topic (Delayer 1.x's behaviour).
    d.push("sms", "42", Duration::from_secs(5)).expect("replace");
    let topic: String = conn.hget("delayer:job_bucket:42", "topic").expect("hget");
    assert_eq!(topic, "sms");
}

#[test]
fn push_many_if_absent_writes_the_free_ids_and_reports_the_taken_ones() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = Delayer::open(&redis.url()).expect("client");
    d.push("old", "a", Duration::from_secs(600)).expect("push a");
    d.push("old", "c", Duration::from_secs(600)).expect("push c");

    let jobs: Vec<Job> =
        ["a", "b", "c"].iter().map(|id| Job::new("new", *id, Duration::from_secs(60)).if_absent()).collect();
    let err = d.push_many(&jobs).expect_err("two ids taken");
    let Error::IdTaken(IdTaken { taken, due }) = &err else { panic!("expected IdTaken, got {err:?}") };
    let ids: Vec<_> = taken.iter().map(|t| (t.id.as_str(), t.topic.as_str())).collect();
    assert_eq!(ids, [("a", "old"), ("c", "old")]);
    assert!(taken.iter().all(|t| t.due.is_some()), "both still waiting");
    assert_eq!(due.iter().map(Option::is_some).collect::<Vec<_>>(), [false, true, false]);
    let b: String = conn.hget("delayer:job_bucket:b", "topic").expect("hget");
    let a: String = conn.hget("delayer:job_bucket:a", "topic").expect("hget");
    assert_eq!((a.as_str(), b.as_str()), ("old", "new"));
    assert!(err.to_string().contains("2 ids are taken"), "{err}");

    // Mixed policies over several calls and pipelines: each job is pushed
    // with its own, and replies line up with the jobs.
    let jobs: Vec<Job> = (0..1250)
        .map(|i| {
            let job = Job::new("mix", format!("m{i}"), Duration::from_secs(60));
            if (i / 7) % 2 == 0 {
                job.if_absent()
            } else {
                job
            }
        })
        .collect();
    assert_eq!(d.push_many(&jobs).expect("all free").len(), 1250);
    let again: Vec<Job> = jobs.iter().map(|j| Job { topic: "other".into(), ..j.clone() }).collect();
    let Err(Error::IdTaken(t)) = d.push_many(&again) else { panic!("expected IdTaken") };
    let expected: Vec<String> = (0..1250).filter(|i| (i / 7) % 2 == 0).map(|i| format!("m{i}")).collect();
    assert_eq!(t.taken.iter().map(|t| t.id.clone()).collect::<Vec<_>>(), expected);
    assert_eq!(t.due.len(), 1250);
    for (i, due) in t.due.iter().enumerate() {
        assert_eq!(due.is_some(), (i / 7) % 2 == 1, "job m{i}");
        let topic: String = conn.hget(format!("delayer:job_bucket:m{i}"), "topic").expect("hget");
        assert_eq!(topic, if (i / 7) % 2 == 0 { "mix" } else { "other" }, "job m{i}");
    }
}

#[tokio::test]
async fn the_async_client_reports_taken_ids_alike() {
    let redis = RedisServer::start();
    let d = delayer::aio::Delayer::open(&redis.url()).expect("client");
    d.push("old", "a", Duration::from_secs(600)).await.expect("push");
    let err = d.push_job(&Job::new("new", "a", Duration::ZERO).if_absent()).await.expect_err("taken");
    assert!(matches!(&err, Error::IdTaken(t) if t.taken[0].topic == "old"), "{err:?}");
    let jobs = [Job::new("new", "a", Duration::ZERO).if_absent(), Job::new("new", "b", Duration::ZERO).if_absent()];
    let Err(Error::IdTaken(t)) = d.push_many(&jobs).await else { panic!("expected IdTaken") };
    assert_eq!((t.taken.len(), t.due[0].is_none(), t.due[1].is_some()), (1, true, true));
}
