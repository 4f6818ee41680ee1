//! The async client against a real redis-server: same data, same semantics
//! as the blocking one, and a waiting bpop never stalls other operations.

use delayer::aio::Delayer;
use delayer::{Error, Job};
use redis::Commands;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use testkit::RedisServer;

fn make_ready(conn: &mut redis::Connection, topic: &str, id: &str) {
    let _: () = conn.zrem("delayer:job_pool", id).expect("zrem");
    let _: () = conn.lpush(format!("delayer:ready_queue:{topic}"), id).expect("lpush");
}

#[tokio::test]
async fn round_trip_with_the_blocking_clients_layout() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = Delayer::open(&redis.url()).expect("client");
    d.push_job(&Job::new("t", "a1", Duration::from_secs(5)).body(vec![0u8, 1, 255])).await.expect("push");
    let bucket: HashMap<String, Vec<u8>> = conn.hgetall("delayer:job_bucket:a1").expect("hgetall");
    assert_eq!(bucket.get("topic").map(Vec::as_slice), Some(&b"t"[..]));
    assert_eq!(bucket.get("body").map(Vec::as_slice), Some(&[0u8, 1, 255][..]));
    let pttl: i64 = conn.pttl("delayer:job_bucket:a1").expect("pttl");
    assert!(pttl > 604_000_000, "ttl {pttl}");

    make_ready(&mut conn, "t", "a1");
    let got = d.pop("t").await.expect("pop").expect("job");
    assert_eq!((got.id.as_str(), got.body), ("a1", vec![0u8, 1, 255]));
    assert_eq!(d.pop("t").await.expect("pop"), None);
}

#[tokio::test]
async fn a_waiting_bpop_does_not_stall_other_operations() {
    let redis = RedisServer::start();
    let d = Delayer::open(&redis.url()).expect("client");
    let waiter = {
        let d = d.clone();
        tokio::spawn(async move { d.bpop("slow", Duration::from_secs(10)).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let start = Instant::now();
    d.push("t", "x", Duration::from_secs(60)).await.expect("push while bpop waits");
    assert!(d.remove("x").await.expect("remove"));
    assert!(start.elapsed() < Duration::from_secs(2), "stalled {:?}", start.elapsed());

    let mut conn = redis.connection();
    d.push("slow", "s1", Duration::ZERO).await.expect("push");
    make_ready(&mut conn, "slow", "s1");
    let got = waiter.await.expect("join").expect("bpop");
    assert_eq!(got.map(|m| m.id), Some("s1".into()));
}

#[tokio::test]
async fn bpop_times_out_and_remove_and_push_many_work() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = Delayer::open(&redis.url()).expect("client");
    let start = Instant::now();
    assert_eq!(d.bpop("t", Duration::from_millis(200)).await.expect("bpop"), None);
    assert!(start.elapsed() >= Duration::from_millis(200));

    let jobs: Vec<Job> = (0..1500).map(|i| Job::new("m", format!("m{i}"), Duration::from_secs(30))).collect();
    assert_eq!(d.push_many(&jobs).await.expect("push_many").len(), 1500);
    let n: u64 = conn.zcard("delayer:job_pool").expect("zcard");
    assert_eq!(n, 1500);
    assert!(d.remove("m7").await.expect("remove"));
    assert!(!d.remove("m7").await.expect("remove again"));
}

#[tokio::test]
async fn errors_match_the_blocking_client() {
    let redis = RedisServer::start();
    let d = Delayer::open(&redis.url()).expect("client");
    assert!(matches!(d.push("t", "", Duration::ZERO).await, Err(Error::InvalidArgument(_))));
    assert!(d.push("close order", "any {id}", Duration::ZERO).await.is_ok(), "names 1.x wrote are taken");
    assert!(matches!(d.bpop("", Duration::ZERO).await, Err(Error::InvalidArgument(_))));
    let closed = Delayer::open(&format!("redis://127.0.0.1:{}/", testkit::free_port())).expect("lazy");
    let start = Instant::now();
    assert!(matches!(closed.push("t", "x", Duration::ZERO).await, Err(Error::Connection(_))));
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn the_at_least_once_mode_works_alike() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = Delayer::open(&redis.url()).expect("client");
    let fast = delayer::Backoff::fixed(Duration::from_millis(1500));
    d.push_job(&Job::new("t", "r1", Duration::ZERO).body("x").max_attempts(2).backoff(fast)).await.expect("push");
    make_ready(&mut conn, "t", "r1");

    let job = d.reserve("t", Duration::from_secs(30)).await.expect("reserve").expect("job");
    assert_eq!((job.id.as_str(), job.attempts, job.max_attempts), ("r1", 1, 2));
    assert!(d.release(&job, None).await.expect("release"), "held");
    let score: f64 = conn.zscore("delayer:job_pool", "r1").expect("back in the pool");
    let (now, _): (u64, u64) = redis::cmd("TIME").query(&mut conn).expect("TIME");
    assert!((score - now as f64 - 1.5).abs() < 1.1, "after its fixed backoff: {score} vs {now}");
    assert!(d.reschedule("r1", Duration::ZERO).await.expect("reschedule").is_some());
    make_ready(&mut conn, "t", "r1");

    // A waiting breserve does not stall other calls, and wakes on the job.
    let waiter = {
        let d = d.clone();
        tokio::spawn(async move { d.breserve("t", Duration::from_secs(30), Duration::from_secs(10)).await })
    };
    let second = waiter.await.expect("task").expect("breserve").expect("job");
    assert_eq!(second.attempts, 2);
    assert!(d.bury("r1").await.expect("bury by id"));
    let dead = d.dead_letters("t", 0, 10).await.expect("dead letters");
    assert_eq!(dead.iter().map(|l| (l.id.as_str(), l.reason.as_str())).collect::<Vec<_>>(), vec![("r1", "buried")]);
    assert_eq!(d.requeue_dead("t", None).await.expect("requeue"), 1);
    make_ready(&mut conn, "t", "r1");
    let third = d.breserve("t", Duration::from_secs(30), Duration::from_secs(10)).await.expect("b").expect("job");
    assert!(d.ack(&third).await.expect("ack"));
    assert!(!d.ack(&third).await.expect("ack again"));
    assert_eq!(d.purge_dead("t", None).await.expect("purge"), 0);
    assert!(matches!(d.reserve("t", Duration::ZERO).await, Err(Error::InvalidArgument(_))));
}
