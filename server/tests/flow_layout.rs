//! The per-topic layout's mover and a paused topic (issue 23, slice 2;
//! docs/design/flow-control.md §4.1), on the real binary: while the
//! topic's flow hash says `paused` (written by hand, as `delayer pause`
//! will), its due jobs stay in its pool, its index entry does not bring the
//! mover back every tick, and other topics move as ever; a resume (the flag
//! gone, the announcement on the wake channel) makes them ready at once, and
//! the time they waited is counted as held, not as the server's lateness.

use delayer_protocol::keys::TopicKeys;
use redis::Commands;
use std::time::Duration;
use testkit::{free_port, metric, scrape_metrics, server_conf, wait_until, DelayerProcess, RedisServer, DEADLINE};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");

fn keys() -> TopicKeys {
    TopicKeys::new("delayer:")
}

fn redis_now(conn: &mut redis::Connection) -> f64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(conn).expect("TIME");
    s as f64 + us as f64 / 1e6
}

/// A job due at `due`, with its index entry and announcement, as a push
/// leaves it.
fn push(conn: &mut redis::Connection, topic: &str, id: &str, due: f64) {
    let k = keys();
    let _: () =
        conn.hset_multiple(format!("{}{id}", k.bucket_prefix(topic)), &[("topic", topic), ("body", id)]).expect("HSET");
    let _: () = conn.zadd(k.pool(topic), id, due).expect("ZADD pool");
    let _: () = conn.sadd(k.topics(), topic).expect("SADD");
    let _: () = conn.publish(k.wake(), format!("{due:.3} {topic}")).expect("PUBLISH");
}

fn ready(conn: &mut redis::Connection, topic: &str) -> usize {
    conn.llen(keys().ready(topic)).expect("LLEN")
}

fn ticks(port: u16) -> f64 {
    scrape_metrics(port).and_then(|m| metric(&m, "delayer_tick_duration_seconds_count")).unwrap_or(0.0)
}

#[test]
fn a_paused_topic_waits_in_its_pool_and_a_resume_moves_it_counted_as_held() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let port = free_port();
    let server = DelayerProcess::start(
        BIN,
        &server_conf(redis.port(), 200, &format!("layout = topic\nmetrics_addr = 127.0.0.1:{port}")),
    );
    assert!(server.wait_for_output(|o| o.contains("listening for wake-ups")), "{}", server.output());
    let paused_at = redis_now(&mut conn);
    let _: () = conn.hset(keys().flow("sms"), "paused", format!("{paused_at:.3}")).expect("HSET");
    let now = redis_now(&mut conn);
    for i in 0..20 {
        push(&mut conn, "sms", &format!("s{i}"), paused_at);
    }
    push(&mut conn, "mail", "m1", now);
    assert!(wait_until(DEADLINE, || ready(&mut conn, "mail") == 1), "another topic moves:\n{}", server.output());
    // Paused: nothing moved over 2 s, and the mover is not brought back
    // to the topic every tick (a handful of ticks, not one per round).
    assert!(wait_until(DEADLINE, || ticks(port) >= 1.0), "no metrics\n{}", server.output());
    let before = ticks(port);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(ready(&mut conn, "sms"), 0, "a paused topic's jobs were moved:\n{}", server.output());
    assert_eq!(conn.zcard::<_, u64>(keys().pool("sms")).expect("ZCARD"), 20);
    let spent = ticks(port) - before;
    assert!(spent <= 20.0, "{spent} ticks in 2 s with timer_interval 200 ms: the paused topic keeps the mover busy");

    // A resume: the flag goes (the times kept), the topic is announced.
    let resumed = redis_now(&mut conn);
    let _: () = redis::pipe()
        .atomic()
        .hdel(keys().flow("sms"), "paused")
        .hset(keys().flow("sms"), "resumed", format!("{resumed:.3}"))
        .hset(keys().flow("sms"), "last_paused", format!("{paused_at:.3}"))
        .publish(keys().wake(), format!("{resumed:.3} sms"))
        .query(&mut conn)
        .expect("resume");
    assert!(wait_until(Duration::from_secs(2), || ready(&mut conn, "sms") == 20), "{}", server.output());
    let m = || scrape_metrics(port).unwrap_or_default();
    let held = |m: &str| metric(m, "delayer_held_seconds_count{reason=\"paused\"}").unwrap_or(0.0);
    assert!(wait_until(DEADLINE, || held(&m()) == 20.0), "held count: {}", m());
    let body = m();
    let held_sum = metric(&body, "delayer_held_seconds_sum{reason=\"paused\"}").expect("held sum");
    assert!(held_sum / 20.0 >= 1.5, "each waited the ~2 s pause: {held_sum}");
    // The lateness histogram has no sample of the pause's length: every
    // job is within a second (the drain after the resume).
    let total = metric(&body, "delayer_lateness_seconds_count").expect("lateness count");
    let within = metric(&body, "delayer_lateness_seconds_bucket{le=\"1\"}").expect("a lateness bucket");
    assert_eq!(within, total, "late by the pause:\n{body}");
}
