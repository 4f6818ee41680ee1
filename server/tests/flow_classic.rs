//! The classic layout's mover and a paused topic (issue 23, slice 2;
//! docs/design/flow-control.md §4.2), on the real binary. The topic's flow
//! hash says `paused` and the topic is in `flow_topics` (written by hand, as
//! `delayer pause` will): its due jobs leave the shared pool for its flow
//! pool, once, while other topics move as ever; a resume makes them ready
//! in due order, counted as held, not as the server's lateness, and the
//! topic's next jobs go straight to its ready queue again.

use delayer_protocol::keys::Keys;
use redis::Commands;
use std::time::Duration;
use testkit::{free_port, metric, scrape_metrics, server_conf, wait_until, DelayerProcess, RedisServer, DEADLINE};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");

fn keys() -> Keys {
    Keys::new("delayer:")
}

fn redis_now(conn: &mut redis::Connection) -> f64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(conn).expect("TIME");
    s as f64 + us as f64 / 1e6
}

/// Jobs `<topic><i>` for i in `range`, due at `due`, as a push leaves them.
fn push(conn: &mut redis::Connection, topic: &str, range: std::ops::Range<usize>, due: f64) {
    let k = keys();
    let mut pipe = redis::pipe();
    for i in range.clone() {
        let id = format!("{topic}{i}");
        pipe.hset_multiple(format!("{}{id}", k.bucket_prefix()), &[("topic", topic), ("body", id.as_str())]).ignore();
        // Later ids a microsecond later: due order is id order.
        pipe.zadd(k.job_pool(), &id, due + i as f64 * 1e-6).ignore();
    }
    pipe.hincr(k.scheduled_count(), topic, range.len()).ignore();
    pipe.publish(format!("{}wake", k.prefix()), format!("{due:.3} {topic}")).ignore();
    let _: () = pipe.query(conn).expect("push");
}

fn llen(conn: &mut redis::Connection, key: &str) -> usize {
    conn.llen(key).expect("LLEN")
}

fn zcard(conn: &mut redis::Connection, key: &str) -> usize {
    conn.zcard(key).expect("ZCARD")
}

fn pause(conn: &mut redis::Connection, topic: &str) -> f64 {
    let at = redis_now(conn);
    let _: () = redis::pipe()
        .hset(keys().flow(topic), "paused", format!("{at:.3}"))
        .sadd(keys().flow_topics(), topic)
        .query(conn)
        .expect("pause");
    at
}

fn resume(conn: &mut redis::Connection, topic: &str, paused_at: f64) {
    let at = redis_now(conn);
    let _: () = redis::pipe()
        .atomic()
        .hdel(keys().flow(topic), "paused")
        .hset(keys().flow(topic), "resumed", format!("{at:.3}"))
        .hset(keys().flow(topic), "last_paused", format!("{paused_at:.3}"))
        .publish(format!("{}wake", keys().prefix()), format!("{at:.3} {topic}"))
        .query(conn)
        .expect("resume");
}

#[test]
fn a_paused_topics_backlog_is_set_aside_once_and_a_resume_makes_it_ready_in_due_order() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let port = free_port();
    // batch_size 5000: one batch sets 4,500 ids of one topic aside, more
    // than one ZADD may carry (review hole 1).
    let conf = format!("batch_size = 5000\nmetrics_addr = 127.0.0.1:{port}");
    let server = DelayerProcess::start(BIN, &server_conf(redis.port(), 200, &conf));
    assert!(server.wait_for_output(|o| o.contains("listening for wake-ups")), "{}", server.output());
    let k = keys();
    let paused_at = pause(&mut conn, "sms");
    push(&mut conn, "sms", 0..4500, paused_at);
    push(&mut conn, "mail", 0..10, paused_at);
    let set_aside = |conn: &mut redis::Connection| zcard(conn, &k.flow_pool("sms"));
    assert!(wait_until(DEADLINE, || set_aside(&mut conn) == 4500), "set aside:\n{}", server.output());
    assert!(wait_until(DEADLINE, || llen(&mut conn, &k.ready_queue("mail")) == 10), "{}", server.output());
    assert_eq!(zcard(&mut conn, &k.job_pool()), 0, "the shared pool keeps none of the paused topic's backlog");
    assert_eq!(llen(&mut conn, &k.ready_queue("sms")), 0, "a paused topic's jobs were made ready");
    let count: Option<u64> = conn.hget(k.scheduled_count(), "sms").expect("HGET");
    assert_eq!(count, Some(4500), "set-aside jobs still count as scheduled");

    // While paused: nothing moves over a second, other topics do.
    let now = redis_now(&mut conn);
    push(&mut conn, "mail", 10..20, now);
    push(&mut conn, "sms", 4500..4510, now);
    assert!(wait_until(DEADLINE, || llen(&mut conn, &k.ready_queue("mail")) == 20), "{}", server.output());
    assert!(wait_until(DEADLINE, || set_aside(&mut conn) == 4510), "{}", server.output());
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(llen(&mut conn, &k.ready_queue("sms")), 0, "{}", server.output());

    // A removed job (bucket gone) waits in the flow pool as a stale id: the
    // drain drops it instead of making it ready.
    let _: () = conn.del(format!("{}sms7", k.bucket_prefix())).expect("DEL");
    resume(&mut conn, "sms", paused_at);
    let ready = |conn: &mut redis::Connection| llen(conn, &k.ready_queue("sms"));
    assert!(wait_until(DEADLINE, || ready(&mut conn) == 4509), "{} ready:\n{}", ready(&mut conn), server.output());
    assert_eq!(set_aside(&mut conn), 0);
    assert!(!conn.sismember::<_, _, bool>(k.flow_topics(), "sms").expect("SISMEMBER"), "a drained topic stays listed");
    let count: Option<u64> = conn.hget(k.scheduled_count(), "sms").expect("HGET");
    assert_eq!(count, None, "the counts follow the drain");
    // Due order: consumers RPOP, so the right end is the earliest.
    let first: Vec<String> = conn.lrange(k.ready_queue("sms"), -3, -1).expect("LRANGE");
    assert_eq!(first, ["sms2", "sms1", "sms0"]);
    let last: Vec<String> = conn.lrange(k.ready_queue("sms"), 0, 0).expect("LRANGE");
    assert_eq!(last, ["sms4509"]);

    // The topic runs again: its next job goes straight to its ready queue.
    let now = redis_now(&mut conn);
    push(&mut conn, "sms", 5000..5001, now);
    assert!(wait_until(DEADLINE, || ready(&mut conn) == 4510), "{}", server.output());
    assert_eq!(set_aside(&mut conn), 0);

    // The wait was the pause's: held, not late.
    let m = || scrape_metrics(port).unwrap_or_default();
    let held = |m: &str| metric(m, "delayer_held_seconds_count{reason=\"paused\"}").unwrap_or(0.0);
    assert!(wait_until(DEADLINE, || held(&m()) == 4509.0), "held count: {}", m());
    let body = m();
    let total = metric(&body, "delayer_lateness_seconds_count").expect("lateness count");
    let within = metric(&body, "delayer_lateness_seconds_bucket{le=\"1\"}").expect("a lateness bucket");
    assert_eq!(within, total, "late by the pause:\n{body}");
    let aside = metric(&body, "delayer_jobs_set_aside_total{topic=\"sms\"}").expect("set-aside counter");
    assert_eq!(aside, 4510.0);
}

#[test]
fn a_flow_pool_of_the_wrong_type_holds_only_its_topic() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let server = DelayerProcess::start(BIN, &server_conf(redis.port(), 200, ""));
    assert!(server.wait_for_output(|o| o.contains("listening for wake-ups")), "{}", server.output());
    let k = keys();
    let _: () = conn.set(k.flow_pool("sms"), "junk").expect("SET");
    let paused_at = pause(&mut conn, "sms");
    push(&mut conn, "sms", 0..5, paused_at - 1.0);
    push(&mut conn, "mail", 0..5, paused_at);
    assert!(wait_until(DEADLINE, || llen(&mut conn, &k.ready_queue("mail")) == 5), "{}", server.output());
    assert!(
        wait_until(DEADLINE, || server.output().contains("delayer:flow_pool:sms")),
        "the bad key is named:\n{}",
        server.output()
    );
    assert_eq!(zcard(&mut conn, &k.job_pool()), 5, "held in the pool, none lost");
    // Fixed: the held ids are set aside, then a resume makes them ready.
    let _: () = conn.del(k.flow_pool("sms")).expect("DEL");
    assert!(wait_until(DEADLINE, || zcard(&mut conn, &k.flow_pool("sms")) == 5), "{}", server.output());
    resume(&mut conn, "sms", paused_at);
    assert!(wait_until(DEADLINE, || llen(&mut conn, &k.ready_queue("sms")) == 5), "{}", server.output());
}

#[test]
fn a_topic_that_is_not_utf8_drains_after_its_resume() {
    // PHP and 1.x clients may name a topic with any bytes.
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let server = DelayerProcess::start(BIN, &server_conf(redis.port(), 100, ""));
    assert!(server.wait_for_output(|o| o.contains("listening for wake-ups")), "{}", server.output());
    let topic: &[u8] = b"caf\xe9";
    let key = |kind: &str| [b"delayer:".as_slice(), kind.as_bytes(), topic].concat();
    let _: () = redis::pipe()
        .hset(key("flow:"), "paused", "1.000")
        .sadd("delayer:flow_topics", topic)
        .hset_multiple("delayer:job_bucket:x", &[(b"topic".as_slice(), topic), (b"body".as_slice(), b"b".as_slice())])
        .zadd("delayer:job_pool", "x", 1.0)
        .query(&mut conn)
        .expect("a paused topic's job");
    let held = |conn: &mut redis::Connection| conn.zcard::<_, usize>(key("flow_pool:")).expect("ZCARD");
    assert!(wait_until(DEADLINE, || held(&mut conn) == 1), "set aside:\n{}", server.output());
    let _: () = conn.hdel(key("flow:"), "paused").expect("HDEL");
    let ready = |conn: &mut redis::Connection| conn.llen::<_, usize>(key("ready_queue:")).expect("LLEN");
    assert!(wait_until(DEADLINE, || ready(&mut conn) == 1), "never drained:\n{}", server.output());
}

#[test]
fn a_resume_is_seen_at_once_through_its_announcement() {
    // A paused topic is asked again only every 10 s (engine/flow.rs); the
    // resume's announcement wakes it at once.
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let server = DelayerProcess::start(BIN, &server_conf(redis.port(), 100, ""));
    assert!(server.wait_for_output(|o| o.contains("listening for wake-ups")), "{}", server.output());
    let paused_at = pause(&mut conn, "late");
    let now = redis_now(&mut conn);
    push(&mut conn, "late", 0..3, now);
    assert!(wait_until(DEADLINE, || zcard(&mut conn, &keys().flow_pool("late")) == 3), "{}", server.output());
    // Long enough for the server to have asked, found it paused, and rested it.
    std::thread::sleep(Duration::from_millis(1500));
    let resumed = std::time::Instant::now();
    resume(&mut conn, "late", paused_at);
    assert!(
        wait_until(Duration::from_secs(4), || llen(&mut conn, &keys().ready_queue("late")) == 3),
        "not ready {:?} after the resume: {}",
        resumed.elapsed(),
        server.output()
    );
}
