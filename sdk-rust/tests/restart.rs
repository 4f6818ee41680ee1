//! Workers as they run in production: blocked for long stretches, and
//! through a Redis restart. A real redis-server is stopped and started again
//! on the same port under blocked bpop and breserve calls, sync and async;
//! once Redis answers again, the next call works. Waits longer than every
//! client timeout keep waiting.

use delayer::{Delayer, Error, Job, PoolOptions};
use redis::Commands;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use testkit::{wait_until, RedisServer, DEADLINE};

/// Makes job `id` ready as the server would: out of the pool, onto its queue.
fn make_ready(conn: &mut redis::Connection, topic: &str, id: &str) {
    let _: () = conn.zrem("delayer:job_pool", id).expect("zrem");
    let _: () = conn.lpush(format!("delayer:ready_queue:{topic}"), id).expect("lpush");
}

/// How many clients are blocked in Redis on `cmd` (brpop, blmove).
fn blocked_on(redis: &RedisServer, cmd: &str) -> usize {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut redis.connection()).expect("CLIENT LIST");
    list.lines().filter(|l| l.contains(" flags=b ") && l.contains(&format!(" cmd={cmd} "))).count()
}

/// A worker loop as the README writes it: a connection error is counted,
/// backed off and retried; a job is sent on; anything else ends the test.
fn worker<T: Send + 'static>(
    errors: Arc<AtomicUsize>,
    jobs: mpsc::Sender<String>,
    mut next: impl FnMut() -> delayer::Result<Option<T>> + Send + 'static,
    id: impl Fn(&T) -> String + Send + 'static,
) -> thread::JoinHandle<()> {
    thread::spawn(move || loop {
        match next() {
            Ok(Some(job)) => {
                if jobs.send(id(&job)).is_err() {
                    return;
                }
            }
            Ok(None) => {}
            Err(Error::Connection(_)) => {
                errors.fetch_add(1, Ordering::SeqCst);
                thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("a worker got an error that is not a connection error: {e:?}"),
        }
    })
}

#[test]
fn blocked_workers_and_idle_connections_survive_a_redis_restart() {
    let mut redis = RedisServer::start();
    let d = Delayer::open(&redis.url()).expect("client");
    // Several idle pooled connections, which the restart leaves stale.
    let idle: Vec<_> = (0..4)
        .map(|_| {
            let d = d.clone();
            thread::spawn(move || d.bpop("idle", Duration::from_millis(300)).expect("bpop"))
        })
        .collect();
    idle.into_iter().for_each(|h| assert_eq!(h.join().expect("join"), None));

    let (tx, jobs) = mpsc::channel();
    let (pop_errors, reserve_errors) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    // The workers have a client of their own: their retries during the
    // outage must not use up the idle connections `d` keeps.
    let workers = Delayer::open(&redis.url()).expect("client");
    let w = workers.clone();
    let _popper = worker(pop_errors.clone(), tx.clone(), move || w.bpop("p", Duration::ZERO), |m| m.id.clone());
    let w = workers;
    let ttr = Duration::from_secs(60);
    let _reserver = worker(reserve_errors.clone(), tx, move || w.breserve("r", ttr, Duration::ZERO), |j| j.id.clone());
    assert!(wait_until(DEADLINE, || blocked_on(&redis, "brpop") == 1 && blocked_on(&redis, "blmove") == 1));

    redis.stop();
    assert!(
        wait_until(DEADLINE, || pop_errors.load(Ordering::SeqCst) > 0 && reserve_errors.load(Ordering::SeqCst) > 0),
        "a blocked call must end with a connection error when Redis goes away"
    );
    redis.restart();

    // Redis answers again: the next call works, on every kind of call, though
    // the pool still holds connections the old Redis closed.
    let mut conn = redis.connection();
    d.push("t", "a", Duration::ZERO).expect("push after the restart");
    make_ready(&mut conn, "t", "a");
    assert_eq!(d.pop("t").expect("pop after the restart").map(|m| m.id).as_deref(), Some("a"));
    assert_eq!(d.bpop("t", Duration::from_millis(100)).expect("bpop after the restart"), None);
    assert_eq!(d.reserve("t", ttr).expect("reserve after the restart"), None);
    assert_eq!(d.breserve("t", ttr, Duration::from_millis(100)).expect("breserve after the restart"), None);
    assert!(!d.remove("nothing").expect("remove after the restart"));

    // The blocked workers carry on by themselves.
    d.push("p", "for-popper", Duration::ZERO).expect("push");
    make_ready(&mut conn, "p", "for-popper");
    d.push("r", "for-reserver", Duration::ZERO).expect("push");
    make_ready(&mut conn, "r", "for-reserver");
    let mut got: Vec<String> = (0..2).map(|_| jobs.recv_timeout(DEADLINE).expect("a worker's job")).collect();
    got.sort();
    assert_eq!(got, ["for-popper", "for-reserver"]);
}

#[tokio::test]
async fn async_workers_and_idle_connections_survive_a_redis_restart() {
    let mut redis = RedisServer::start();
    let d = delayer::aio::Delayer::open(&redis.url()).expect("client");
    d.push("t", "warm", Duration::from_secs(60)).await.expect("the shared connection is up");
    // Idle blocking connections, which the restart leaves stale.
    let idle: Vec<_> = (0..3)
        .map(|_| {
            let d = d.clone();
            tokio::spawn(async move { d.bpop("idle", Duration::from_millis(300)).await })
        })
        .collect();
    for h in idle {
        assert_eq!(h.await.expect("join").expect("bpop"), None);
    }

    let (tx, mut jobs) = tokio::sync::mpsc::unbounded_channel();
    let errors = Arc::new(AtomicUsize::new(0));
    // The workers have a client of their own: their retries during the
    // outage must not use up the idle connections `d` keeps.
    let workers = delayer::aio::Delayer::open(&redis.url()).expect("client");
    for kind in ["bpop", "breserve"] {
        let (d, tx, errors) = (workers.clone(), tx.clone(), errors.clone());
        tokio::spawn(async move {
            loop {
                let got = match kind {
                    "bpop" => d.bpop("p", Duration::ZERO).await.map(|j| j.map(|m| m.id)),
                    _ => d.breserve("r", Duration::from_secs(60), Duration::ZERO).await.map(|j| j.map(|r| r.id)),
                };
                match got {
                    Ok(Some(id)) => {
                        if tx.send(id).is_err() {
                            return;
                        }
                    }
                    Ok(None) => {}
                    Err(Error::Connection(_)) => {
                        errors.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    Err(e) => panic!("not a connection error: {e:?}"),
                }
            }
        });
    }
    assert!(until(|| blocked_on(&redis, "brpop") == 1 && blocked_on(&redis, "blmove") == 1).await);

    redis.stop();
    assert!(until(|| errors.load(Ordering::SeqCst) >= 2).await, "blocked calls end with connection errors");
    // Calls while Redis is away fail, and leave the shared connection failed
    // once its reconnection attempts have run out (well within a second):
    // the first call after the restart must not get that old failure.
    for _ in 0..2 {
        let down = d.push("t", "x", Duration::ZERO).await;
        assert!(matches!(down, Err(Error::Connection(_))), "Redis is down: {down:?}");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    redis.restart();

    let mut conn = redis.connection();
    d.push("t", "a", Duration::ZERO).await.expect("push after the restart");
    make_ready(&mut conn, "t", "a");
    assert_eq!(d.pop("t").await.expect("pop after the restart").map(|m| m.id).as_deref(), Some("a"));
    assert_eq!(d.bpop("t", Duration::from_millis(100)).await.expect("bpop after the restart"), None);
    let ttr = Duration::from_secs(60);
    assert_eq!(d.breserve("t", ttr, Duration::from_millis(100)).await.expect("breserve after the restart"), None);
    assert_eq!(d.reserve("t", ttr).await.expect("reserve after the restart"), None);

    d.push("p", "for-popper", Duration::ZERO).await.expect("push");
    make_ready(&mut conn, "p", "for-popper");
    d.push("r", "for-reserver", Duration::ZERO).await.expect("push");
    make_ready(&mut conn, "r", "for-reserver");
    let mut got = Vec::new();
    for _ in 0..2 {
        let id = tokio::time::timeout(DEADLINE, jobs.recv()).await.expect("in time").expect("a worker's job");
        got.push(id);
    }
    got.sort();
    assert_eq!(got, ["for-popper", "for-reserver"]);
}

/// [`wait_until`] for async tests: polls without blocking the runtime.
async fn until(mut check: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + DEADLINE;
    while !check() {
        if Instant::now() >= end {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

/// Pushes job `id` to `topic` and makes it ready after `after`.
fn push_later(url: String, topic: &'static str, id: &'static str, after: Duration) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        thread::sleep(after);
        let d = Delayer::open(&url).expect("client");
        d.push_job(&Job::new(topic, id, Duration::ZERO)).expect("push");
        let mut conn = redis::Client::open(url.as_str()).and_then(|c| c.get_connection()).expect("conn");
        make_ready(&mut conn, topic, id);
    })
}

#[test]
fn a_worker_idle_longer_than_every_client_timeout_keeps_waiting() {
    let redis = RedisServer::start();
    let idle = Duration::from_secs(7); // more than the 3 s connect timeout
    let defaults = Delayer::open(&redis.url()).expect("client");
    // A pool bounding each reply to 2 s: a blocking wait is not a reply.
    let client = redis::Client::open(redis.url()).expect("client");
    let bounded = PoolOptions { io_timeout: Some(Duration::from_secs(2)), ..PoolOptions::default() };
    let bounded = Delayer::with_options(client, "delayer:", &bounded);
    let ttr = Duration::from_secs(60);

    let pushers = [
        push_later(redis.url(), "forever", "f1", idle),
        push_later(redis.url(), "bounded", "b1", idle),
        push_later(redis.url(), "reserve", "r1", idle),
    ];
    let waits = [
        thread::spawn({
            let d = defaults.clone();
            move || d.bpop("forever", Duration::ZERO).map(|j| j.map(|m| m.id))
        }),
        thread::spawn({
            let d = bounded.clone();
            move || d.bpop("bounded", Duration::ZERO).map(|j| j.map(|m| m.id))
        }),
        thread::spawn({
            let d = bounded.clone();
            move || d.breserve("reserve", ttr, Duration::ZERO).map(|j| j.map(|r| r.id))
        }),
        thread::spawn({
            let d = bounded.clone();
            move || {
                let start = Instant::now();
                let got = d.bpop("nothing", Duration::from_secs(5)).map(|j| j.map(|m| m.id));
                assert!(start.elapsed() >= Duration::from_secs(5), "gave up after {:?}", start.elapsed());
                got
            }
        }),
    ];
    let got: Vec<_> = waits.into_iter().map(|h| h.join().expect("join").expect("the wait failed")).collect();
    assert_eq!(got, [Some("f1".to_string()), Some("b1".into()), Some("r1".into()), None]);
    pushers.into_iter().for_each(|h| h.join().expect("pusher"));
}

#[tokio::test]
async fn an_async_worker_idle_longer_than_every_client_timeout_keeps_waiting() {
    let redis = RedisServer::start();
    let idle = Duration::from_secs(7);
    let d = delayer::aio::Delayer::open(&redis.url()).expect("client");
    let pushers = [push_later(redis.url(), "p", "p1", idle), push_later(redis.url(), "r", "r1", idle)];
    let (popped, reserved) =
        tokio::join!(d.bpop("p", Duration::ZERO), d.breserve("r", Duration::from_secs(60), Duration::ZERO));
    assert_eq!(popped.expect("bpop").map(|m| m.id).as_deref(), Some("p1"));
    assert_eq!(reserved.expect("breserve").map(|r| r.id).as_deref(), Some("r1"));
    pushers.into_iter().for_each(|h| h.join().expect("pusher"));
}
