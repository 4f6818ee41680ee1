//! Job lookup, listings and per-topic numbers (issue 13) against a real
//! redis-server. Moves run the server's own move.lua by hand.

use delayer::inspect::{JobState, Page, TopicStats};
use delayer::{Delayer, Error, Job};
use redis::Commands;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use testkit::RedisServer;

fn client(redis: &RedisServer) -> Delayer {
    Delayer::open(&redis.url()).expect("client")
}

/// One move.lua batch, as the server runs it.
fn run_move(conn: &mut redis::Connection) {
    testkit::move_due_classic(conn);
}

fn topic<'a>(stats: &'a delayer::inspect::Stats, name: &str) -> &'a TopicStats {
    stats.topics.iter().find(|t| t.topic == name).unwrap_or_else(|| panic!("no topic {name} in {stats:?}"))
}

fn numbers(d: &Delayer, name: &str) -> (u64, u64, Option<u64>, u64) {
    let stats = d.stats().expect("stats");
    let t = topic(&stats, name);
    (t.scheduled, t.ready, t.reserved, t.dead)
}

fn secs(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH).expect("after 1970").as_secs_f64()
}

#[test]
fn one_job_through_its_whole_life() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    assert_eq!(d.job("t", "a").expect("lookup").state, JobState::Unknown);

    let due = d.push_job(&Job::new("t", "a", Duration::from_secs(60)).body("hello").max_attempts(3)).expect("push");
    let info = d.job("t", "a").expect("lookup");
    assert_eq!(info.state, JobState::Scheduled);
    assert_eq!(
        (info.topic.as_deref(), info.body_size, info.attempts, info.max_attempts),
        (Some("t"), Some(5), Some(0), Some(3))
    );
    assert_eq!(info.due, Some(due));
    assert_eq!(d.job("other", "a").expect("lookup").state, JobState::Unknown, "ids of another topic are not shown");
    assert_eq!(numbers(&d, "t"), (1, 0, Some(0), 0));

    d.reschedule("a", Duration::ZERO).expect("reschedule").expect("waiting");
    run_move(&mut conn);
    let info = d.job("t", "a").expect("lookup");
    assert_eq!((info.state, info.due), (JobState::Ready, None));
    assert_eq!(numbers(&d, "t"), (0, 1, Some(0), 0));

    let job = d.reserve("t", Duration::from_secs(30)).expect("reserve").expect("job");
    let info = d.job("t", "a").expect("lookup");
    assert_eq!((info.state, info.attempts), (JobState::Reserved, Some(1)));
    assert_eq!(info.deadline, Some(job.deadline));
    assert_eq!(numbers(&d, "t"), (0, 0, Some(1), 0));

    assert!(d.bury_with_error(&job, "Boom: no such order").expect("bury"));
    let info = d.job("t", "a").expect("lookup");
    assert_eq!((info.state, info.dead_reason.as_deref()), (JobState::Dead, Some("buried")));
    assert_eq!(info.last_error.as_deref(), Some("Boom: no such order"), "why it failed is shown");
    assert!(info.dead_at.is_some());
    assert_eq!(numbers(&d, "t"), (0, 0, Some(0), 1));

    assert_eq!(d.requeue_dead("t", Some(&["a"])).expect("requeue"), 1);
    let info = d.job("t", "a").expect("lookup");
    assert_eq!((info.state, info.attempts, info.dead_reason), (JobState::Scheduled, Some(0), None));
    assert_eq!(numbers(&d, "t"), (1, 0, Some(0), 0));

    run_move(&mut conn);
    let job = d.reserve("t", Duration::from_secs(30)).expect("reserve").expect("job");
    assert!(d.ack(&job).expect("ack"));
    assert_eq!(d.job("t", "a").expect("lookup").state, JobState::Unknown);
    assert_eq!(numbers(&d, "t"), (0, 0, Some(0), 0));
}

#[test]
fn malformed_buckets_are_told_apart() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    let _: () = conn.hset("delayer:job_bucket:h", "body", "x").expect("hset");
    let _: () = conn.set("delayer:job_bucket:s", "x").expect("set");
    assert_eq!(d.job("t", "h").expect("lookup").state, JobState::Malformed);
    assert_eq!(d.job("t", "s").expect("lookup").state, JobState::Malformed);
    assert!(matches!(d.job("", "a"), Err(Error::InvalidArgument(_))));
    assert!(matches!(d.job("t", ""), Err(Error::InvalidArgument(_))));
}

#[test]
fn scheduled_counts_follow_replace_remove_and_move() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    d.push("a", "1", Duration::from_secs(60)).expect("push");
    d.push("a", "2", Duration::from_secs(60)).expect("push");
    d.push("b", "2", Duration::from_secs(60)).expect("replace onto b");
    let many: Vec<Job> = (0..150).map(|i| Job::new("c", format!("c{i}"), Duration::ZERO)).collect();
    d.push_many(&many).expect("push_many");
    d.push_many(&[Job::new("b", "1", Duration::from_secs(60))]).expect("replace a's 1 onto b");
    let stats = d.stats().expect("stats");
    assert_eq!(stats.scheduled_total, 152);
    let scheduled: Vec<(&str, u64)> = stats.topics.iter().map(|t| (t.topic.as_str(), t.scheduled)).collect();
    assert_eq!(scheduled, [("b", 2), ("c", 150)], "a's jobs were both replaced onto b");

    assert!(d.remove("1").expect("remove"));
    assert_eq!(numbers(&d, "b").0, 1);
    run_move(&mut conn);
    assert_eq!(numbers(&d, "c"), (0, 150, Some(0), 0));
    assert!(d.remove("2").expect("remove"));
    run_move(&mut conn);
    let exists: bool = conn.exists("delayer:scheduled_count").expect("exists");
    assert!(!exists, "an empty pool resets the counts");
    let topics: Vec<String> = d.stats().expect("stats").topics.into_iter().map(|t| t.topic).collect();
    assert_eq!(topics, ["c"], "topics moved stay known; a and b never were and have nothing left");
}

#[test]
fn a_1x_pusher_is_counted_once_the_pool_drains() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    testkit::delayer_1x_push(&mut conn, "old", "legacy", "x", 0);
    run_move(&mut conn);
    assert_eq!(numbers(&d, "legacy"), (0, 1, Some(0), 0), "move makes a 1.x topic known");
}

#[test]
fn listings_page_through_a_topic() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    // Two topics interleaved in the pool, so list.lua skips the other one.
    for i in 0..25 {
        d.push("x", &format!("x{i:02}"), Duration::from_secs(100 + i)).expect("push");
        d.push("y", &format!("y{i:02}"), Duration::from_secs(100 + i)).expect("push");
    }
    let mut seen = Vec::new();
    let mut cursor = 0;
    loop {
        let page = d.list_scheduled("x", cursor, 10).expect("list");
        assert!(page.items.len() <= 10);
        seen.extend(page.items.iter().map(|l| (l.id.clone(), secs(l.time))));
        match page.next {
            Some(next) => cursor = next,
            None => break,
        }
    }
    let ids: Vec<&str> = seen.iter().map(|(id, _)| id.as_str()).collect();
    let want: Vec<String> = (0..25).map(|i| format!("x{i:02}")).collect();
    assert_eq!(ids, want, "every x job once, earliest due first");
    assert!(seen.windows(2).all(|w| w[0].1 <= w[1].1));

    // Ready: next out first.
    for i in 0..5 {
        let _: () = conn.lpush("delayer:ready_queue:r", format!("r{i}")).expect("lpush");
    }
    let page = d.list_ready("r", 0, 3).expect("ready");
    assert_eq!(page, Page { items: vec!["r0".into(), "r1".into(), "r2".into()], next: Some(3) });
    let page = d.list_ready("r", 3, 3).expect("ready");
    assert_eq!(page, Page { items: vec!["r3".into(), "r4".into()], next: None });

    // Reserved: by deadline.
    d.push("q", "q1", Duration::ZERO).expect("push");
    d.push("q", "q2", Duration::ZERO).expect("push");
    run_move(&mut conn);
    let first = d.reserve("q", Duration::from_secs(60)).expect("reserve").expect("job");
    let second = d.reserve("q", Duration::from_secs(30)).expect("reserve").expect("job");
    let page = d.list_reserved_with_deadlines("q", 0, 10).expect("reserved");
    let ids: Vec<&str> = page.items.iter().map(|l| l.id.as_str()).collect();
    assert_eq!(ids, [second.id.as_str(), first.id.as_str()]);
    assert_eq!(page.items[0].time, second.deadline);
    assert_eq!(d.list_reserved("q", 0, 10).expect("reserved").items, [second.id.clone(), first.id.clone()]);
    assert!(matches!(d.list_ready("r", 0, 1001), Err(Error::InvalidArgument(_))));
}

#[tokio::test]
async fn the_async_client_sees_the_same() {
    let redis = RedisServer::start();
    let d = delayer::aio::Delayer::open(&redis.url()).expect("client");
    let due = d.push("t", "a", Duration::from_secs(60)).await.expect("push");
    let info = d.job("t", "a").await.expect("lookup");
    assert_eq!((info.state, info.due), (JobState::Scheduled, Some(due)));
    let page = d.list_scheduled("t", 0, 5).await.expect("list");
    assert_eq!(page.items.iter().map(|l| l.id.as_str()).collect::<Vec<_>>(), ["a"]);
    assert_eq!(page.next, None);
    assert_eq!(d.list_ready("t", 0, 5).await.expect("ready").items, Vec::<String>::new());
    assert_eq!(d.list_reserved("t", 0, 5).await.expect("reserved").items, Vec::<String>::new());
    let stats = d.stats().await.expect("stats");
    assert_eq!((stats.scheduled_total, topic(&stats, "t").scheduled), (1, 1));
}

#[tokio::test]
async fn listing_positions_past_the_bound_are_refused_before_redis() {
    use delayer::inspect::MAX_POSITION;
    let redis = RedisServer::start();
    let d = client(&redis);
    let a = delayer::aio::Delayer::open(&redis.url()).expect("client");
    d.push("t", "a", Duration::from_secs(60)).expect("push");
    let refused = |r: Result<(), Error>, call: &str| match r {
        Err(Error::InvalidArgument(why)) => assert!(why.contains(&MAX_POSITION.to_string()), "{call}: {why}"),
        other => panic!("{call}: {other:?}"),
    };
    for past in [MAX_POSITION + 1, 1 << 63, u64::MAX] {
        refused(d.list_scheduled("t", past, 10).map(drop), "list_scheduled");
        refused(d.list_reserved("t", past, 10).map(drop), "list_reserved");
        refused(d.list_reserved_with_deadlines("t", past, 10).map(drop), "list_reserved_with_deadlines");
        refused(d.list_ready_raw("t", past, 10).map(drop), "list_ready_raw");
        refused(d.dead_letters("t", past as usize, 10).map(drop), "dead_letters");
        refused(a.list_scheduled("t", past, 10).await.map(drop), "aio list_scheduled");
        refused(a.list_reserved_with_deadlines("t", past, 10).await.map(drop), "aio list_reserved_with_deadlines");
        refused(a.dead_letters("t", past as usize, 10).await.map(drop), "aio dead_letters");
    }
    // The bound itself is a position: past every job, an empty last page.
    let last = d.list_scheduled("t", MAX_POSITION, 10).expect("at the bound");
    assert_eq!((last.items.len(), last.next), (0, None));
    assert!(d.dead_letters("t", MAX_POSITION as usize, 10).expect("at the bound").is_empty());
    assert_eq!(d.list_ready_raw("t", MAX_POSITION, 10).expect("at the bound").items.len(), 0);
}
