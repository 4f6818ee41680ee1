//! When the real server moves jobs: short delays pushed while it sleeps
//! (the wake-up channel), and how soon it moves again once a restarted Redis
//! answers. Each test gives the server a `timer_interval` far longer than the
//! bound it checks, so only the mechanism under test can pass it.

use delayer::{Delayer, Job};
use redis::Commands;
use std::time::{Duration, SystemTime};
use testkit::{delayer_1x_push, server_conf, wait_until, DelayerProcess, RedisServer, DEADLINE};

/// The server under test: this build, or `DELAYER_BIN` (to check that a
/// test fails on an older build, as the conformance suite allows too).
fn bin() -> String {
    std::env::var("DELAYER_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_delayer").to_string())
}

fn start_server(redis: &RedisServer, timer_ms: u64) -> DelayerProcess {
    DelayerProcess::start(&bin(), &server_conf(redis.port(), timer_ms, ""))
}

/// Waits until the server is asleep on an empty pool, subscribed for wake-ups.
fn wait_until_listening(server: &DelayerProcess) {
    let listening = server.wait_for_output(|log| log.contains("listening for wake-ups"));
    assert!(listening, "the server never subscribed: {}", server.output());
}

#[test]
fn short_delays_pushed_while_the_server_sleeps_are_moved_on_time() {
    let redis = RedisServer::start();
    // A 60 s timer: without a wake-up each job below would wait up to a minute.
    let server = start_server(&redis, 60_000);
    wait_until_listening(&server);
    let d = Delayer::open(&redis.url()).expect("client");
    for (i, delay_ms) in [0u64, 30, 250, 120, 700].into_iter().enumerate() {
        let id = format!("short{i}");
        let due = d.push("t", &id, Duration::from_millis(delay_ms)).expect("push");
        let job = d
            .bpop("t", Duration::from_secs(10))
            .expect("bpop")
            .unwrap_or_else(|| panic!("{id} (delay {delay_ms} ms) not delivered within 10 s: {}", server.output()));
        let popped = SystemTime::now();
        assert_eq!(job.id, id);
        let late = popped.duration_since(due).unwrap_or_else(|e| panic!("{id} popped {:?} early", e.duration()));
        // Generous for a loaded 2-core machine; the bench measures the real figure.
        assert!(late < Duration::from_secs(2), "{id} (delay {delay_ms} ms) popped {late:?} after its due time");
    }
}

#[test]
fn a_job_due_before_the_one_the_server_sleeps_toward_wakes_it() {
    let redis = RedisServer::start();
    let d = Delayer::open(&redis.url()).expect("client");
    d.push("t", "later", Duration::from_secs(3600)).expect("push");
    let server = start_server(&redis, 60_000);
    wait_until_listening(&server);
    // The server sleeps toward `later` (capped at 60 s); this one comes first.
    let due = d.push("t", "sooner", Duration::from_millis(300)).expect("push");
    let job = d.bpop("t", Duration::from_secs(10)).expect("bpop").expect("sooner delivered within 10 s");
    assert_eq!(job.id, "sooner");
    let late = SystemTime::now().duration_since(due).expect("not early");
    assert!(late < Duration::from_secs(2), "popped {late:?} after its due time");
    // A push due after the pool's earliest publishes nothing, and needs nothing.
    let mut conn = redis.connection();
    assert_eq!(conn.zcard::<_, u64>("delayer:job_pool").expect("zcard"), 1);
}

#[test]
fn after_a_redis_restart_wake_ups_resume() {
    let mut redis = RedisServer::start();
    let server = start_server(&redis, 60_000);
    wait_until_listening(&server);
    redis.restart();
    // The listener subscribes again (a second "listening" line).
    let again = server.wait_for_output(|log| log.matches("listening for wake-ups").count() >= 2);
    assert!(again, "no new subscription after the restart: {}", server.output());
    let d = Delayer::open(&redis.url()).expect("client");
    let due = d.push("t", "after", Duration::from_millis(200)).expect("push");
    let job = d.bpop("t", Duration::from_secs(10)).expect("bpop").expect("delivered within 10 s after the restart");
    assert_eq!(job.id, "after");
    assert!(SystemTime::now().duration_since(due).is_ok(), "popped early");
}

#[test]
fn jobs_pushed_by_a_1x_client_still_move_within_timer_interval() {
    let redis = RedisServer::start();
    let server = start_server(&redis, 300);
    wait_until_listening(&server);
    let mut conn = redis.connection();
    // 1.x pushes publish nothing: the timer alone finds them.
    delayer_1x_push(&mut conn, "old", "t", "from 1.x", 0);
    let d = Delayer::open(&redis.url()).expect("client");
    let job = d.bpop("t", DEADLINE).expect("bpop").expect("delivered");
    assert_eq!((job.id.as_str(), job.body_str()), ("old", Some("from 1.x")));
}

/// Issue 10, item 7: recovery once took 11.7 s, because retries had backed
/// off to 5 s, and each pooled connection that died with Redis cost one more
/// failed tick. Once Redis answers again, the first move must follow within
/// a second (of the jobs' due time, when that comes later). Outages of
/// several lengths, since how long the old code took depended on where in
/// its backoff Redis came back.
#[test]
fn once_a_restarted_redis_answers_the_first_move_follows_within_a_second() {
    let mut redis = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "everysec", "--save", ""]);
    let topics: Vec<String> = (0..4).map(|i| format!("r{i}")).collect();
    // Several pooled connections, all of which die with Redis; the default
    // timer_interval: the bound below is about retries, not the timer.
    let server = DelayerProcess::start(
        &bin(),
        &server_conf(redis.port(), 1000, "").replace("password =\n", "password =\nmax_idle = 4\nmax_active = 8\n"),
    );
    wait_until_listening(&server);
    let n = 10_000;
    for (round, outage) in [Duration::ZERO, Duration::from_secs(2), Duration::from_secs(8)].into_iter().enumerate() {
        let d = Delayer::open(&redis.url()).expect("client");
        let jobs: Vec<Job> =
            (0..n).map(|i| Job::new(&topics[i % 4], format!("j{round}-{i}"), Duration::from_millis(1000))).collect();
        let due = *d.push_many(&jobs).expect("push").iter().max().expect("due times");
        drop(d);
        redis.stop(); // SIGTERM: the AOF is flushed
        std::thread::sleep(outage);
        redis.restart(); // returns once Redis answers PING, its AOF loaded
        let answered = SystemTime::now().max(due);
        let mut conn = redis.connection();
        let ready = |conn: &mut redis::Connection| -> u64 {
            topics.iter().map(|t| conn.llen::<_, u64>(format!("delayer:ready_queue:{t}")).unwrap_or(0)).sum()
        };
        assert!(wait_until(DEADLINE, || ready(&mut conn) > 0), "nothing moved after the restart: {}", server.output());
        let first_move = SystemTime::now().duration_since(answered).unwrap_or_default();
        assert!(wait_until(DEADLINE, || ready(&mut conn) == n as u64), "not all {n} jobs moved: {}", server.output());
        eprintln!("outage of {outage:?}: first move {first_move:?} after Redis answered (and the jobs were due)");
        assert!(
            first_move < Duration::from_secs(1),
            "outage of {outage:?}: first move {first_move:?} after Redis answered again (and the jobs were due)"
        );
        let _: () = redis::cmd("FLUSHALL").query(&mut conn).expect("flushall");
    }
}
