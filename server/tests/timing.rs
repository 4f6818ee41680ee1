//! When the real server moves jobs: short delays pushed while it sleeps
//! (the wake-up channel), and how soon it moves again once a restarted Redis
//! answers. Each test gives the server a `timer_interval` far longer than the
//! bound it checks, so only the mechanism under test can pass it.

use delayer::{Delayer, Job};
use redis::Commands;
use std::time::{Duration, Instant, SystemTime};
use testkit::{delayer_1x_push, server_conf, wait_until, DelayerProcess, RedisServer, DEADLINE};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");

fn start_server(redis: &RedisServer, timer_ms: u64) -> DelayerProcess {
    DelayerProcess::start(BIN, &server_conf(redis.port(), timer_ms, ""))
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
/// off to 5 s and each pooled connection that died with Redis cost one more
/// failed tick. Once Redis answers again, the first move must follow within
/// a second.
#[test]
fn once_a_restarted_redis_answers_the_first_move_follows_within_a_second() {
    let mut redis = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always", "--save", ""]);
    let topics: Vec<String> = (0..4).map(|i| format!("r{i}")).collect();
    // Several pooled connections, all of which die with Redis.
    let server = DelayerProcess::start(
        BIN,
        &server_conf(redis.port(), 60_000, "").replace("password =\n", "password =\nmax_idle = 4\nmax_active = 8\n"),
    );
    wait_until_listening(&server);
    let d = Delayer::open(&redis.url()).expect("client");
    let n = 10_000;
    let jobs: Vec<Job> =
        (0..n).map(|i| Job::new(&topics[i % 4], format!("j{i}"), Duration::from_millis(1500))).collect();
    d.push_many(&jobs).expect("push");
    redis.stop();
    // Down long enough for any backoff to reach its longest; the jobs fall due meanwhile.
    let waited = server.wait_for_output(|log| log.contains("redis unavailable"));
    assert!(waited, "the outage was not noticed: {}", server.output());
    std::thread::sleep(Duration::from_secs(8));
    redis.restart(); // returns once Redis answers PING (its AOF loaded)
    let answered = Instant::now();
    let mut conn = redis.connection();
    let ready = |conn: &mut redis::Connection| -> u64 {
        topics.iter().map(|t| conn.llen::<_, u64>(format!("delayer:ready_queue:{t}")).unwrap_or(0)).sum()
    };
    assert!(wait_until(DEADLINE, || ready(&mut conn) > 0), "nothing moved after the restart: {}", server.output());
    let first_move = answered.elapsed();
    assert!(wait_until(DEADLINE, || ready(&mut conn) == n as u64), "not all {n} jobs moved: {}", server.output());
    assert!(first_move < Duration::from_secs(1), "first move {first_move:?} after Redis answered again");
}
