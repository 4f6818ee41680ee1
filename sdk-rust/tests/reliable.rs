//! The at-least-once mode of the Rust SDK (reserve, ack, release, bury,
//! reschedule, dead letters) against a real redis-server. Moves are done by
//! hand; the expiry of reservations is the server's and is tested there.

use delayer::{Backoff, Delayer, Error, Job, JobRef, Reserved};
use redis::Commands;
use std::collections::HashMap;
use std::thread;
use std::time::{Duration, Instant, UNIX_EPOCH};
use testkit::{wait_until, RedisServer, DEADLINE};

fn client(redis: &RedisServer) -> Delayer {
    Delayer::open(&redis.url()).expect("client")
}

fn redis_now(conn: &mut redis::Connection) -> f64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(conn).expect("TIME");
    s as f64 + us as f64 / 1e6
}

/// Pushes job `id` and makes it ready as the server would.
fn push_ready(d: &Delayer, conn: &mut redis::Connection, job: Job) {
    let (topic, id) = (job.topic.clone(), job.id.clone());
    d.push_job(&job).expect("push");
    let _: () = conn.zrem("delayer:job_pool", &id).expect("zrem");
    let _: () = conn.lpush(format!("delayer:ready_queue:{topic}"), &id).expect("lpush");
}

/// Makes whatever is due in the pool ready (a hand-run move of every id).
fn move_all(conn: &mut redis::Connection) {
    let ids: Vec<(String, f64)> = conn.zrange_withscores("delayer:job_pool", 0, -1).expect("zrange");
    for (id, _) in ids {
        let topic: String = conn.hget(format!("delayer:job_bucket:{id}"), "topic").expect("topic");
        let _: () = conn.zrem("delayer:job_pool", &id).expect("zrem");
        let _: () = conn.lpush(format!("delayer:ready_queue:{topic}"), &id).expect("lpush");
    }
}

fn pool_score(conn: &mut redis::Connection, id: &str) -> Option<f64> {
    conn.zscore("delayer:job_pool", id).expect("zscore")
}

fn reserve(d: &Delayer, topic: &str) -> Reserved {
    d.reserve(topic, Duration::from_secs(30)).expect("reserve").expect("a job")
}

#[test]
fn reserve_hides_the_job_until_ack() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    assert_eq!(d.reserve("t", Duration::from_secs(1)).expect("empty"), None);
    push_ready(&d, &mut conn, Job::new("t", "a", Duration::ZERO).body("hello"));

    let before = redis_now(&mut conn);
    let job = d.reserve("t", Duration::from_millis(1500)).expect("reserve").expect("job");
    assert_eq!((job.id.as_str(), job.topic.as_str(), job.body_str()), ("a", "t", Some("hello")));
    assert_eq!((job.attempts, job.max_attempts), (1, 25), "first attempt, default limit");
    assert!(!job.is_last_attempt());
    let deadline: f64 = conn.zscore::<_, _, f64>("delayer:reserved", "a").expect("reserved") / 1000.0; // ms
    assert!((deadline - (before + 1.5)).abs() < 0.5, "deadline {deadline} vs now {before}");
    let returned = job.deadline.duration_since(UNIX_EPOCH).expect("epoch").as_secs_f64();
    assert!((returned - deadline).abs() < 0.002);
    let ttl: i64 = conn.pttl("delayer:job_bucket:a").expect("pttl");
    assert_eq!(ttl, -1, "a reserved job is kept until acked");
    let bucket: HashMap<String, String> = conn.hgetall("delayer:job_bucket:a").expect("hgetall");
    assert_eq!(bucket.get("receipt"), Some(&job.receipt));
    assert_eq!(bucket.get("backoff"), None, "the retry defaults are not written (release.lua applies them)");

    // Invisible to everyone else, classic consumers included.
    assert_eq!(d.reserve("t", Duration::from_secs(1)).expect("reserve"), None);
    assert_eq!(d.pop("t").expect("pop"), None);

    assert!(!d.ack(JobRef::with_receipt("a", "not-the-receipt")).expect("ack"), "wrong receipt");
    assert!(d.ack(&job).expect("ack"));
    assert!(!d.ack(&job).expect("ack again"), "a second ack finds nothing");
    assert!(!conn.exists::<_, bool>("delayer:job_bucket:a").expect("exists"));
    assert_eq!(conn.zcard::<_, u64>("delayer:reserved").expect("zcard"), 0);
}

#[test]
fn classic_push_and_pop_are_unchanged() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    d.push_job(&Job::new("t", "plain", Duration::from_secs(5)).body("b")).expect("push");
    let bucket: HashMap<String, String> = conn.hgetall("delayer:job_bucket:plain").expect("hgetall");
    assert_eq!(bucket.len(), 2, "only topic and body, as Delayer 1.x: {bucket:?}");

    d.push_job(
        &Job::new("t", "tuned", Duration::from_secs(5))
            .max_attempts(3)
            .backoff(Backoff::exponential(Duration::from_millis(250), Duration::from_secs(2))),
    )
    .expect("push");
    let bucket: HashMap<String, String> = conn.hgetall("delayer:job_bucket:tuned").expect("hgetall");
    let field = |k: &str| bucket.get(k).map(String::as_str);
    assert_eq!(
        (field("max_attempts"), field("backoff"), field("backoff_ms"), field("backoff_max_ms")),
        (Some("3"), Some("exponential"), Some("250"), Some("2000"))
    );
    move_all(&mut conn);
    let popped = d.pop("t").expect("pop").expect("job");
    assert_eq!(popped.id, "plain");
    assert_eq!(d.pop("t").expect("pop").expect("job").id, "tuned", "retry fields do not change pop");
}

#[test]
fn touch_sets_a_new_deadline_for_the_holder_only() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    push_ready(&d, &mut conn, Job::new("t", "a", Duration::ZERO));
    let job = d.reserve("t", Duration::from_secs(5)).expect("reserve").expect("job");

    let before = redis_now(&mut conn);
    let deadline = d.touch(&job, Duration::from_secs(600)).expect("touch").expect("held");
    let stored: f64 = conn.zscore::<_, _, f64>("delayer:reserved", "a").expect("reserved") / 1000.0; // ms
    let returned = deadline.duration_since(UNIX_EPOCH).expect("epoch").as_secs_f64();
    assert!((returned - stored).abs() < 0.002, "returned {returned}, stored {stored}");
    assert!((stored - (before + 600.0)).abs() < 0.5, "now + ttr: {stored} vs {before}");
    // Set, not added: a shorter ttr brings the deadline in.
    let shorter = d.touch("a", Duration::from_secs(10)).expect("touch by id").expect("held");
    assert!(shorter < deadline);
    let bucket: HashMap<String, String> = conn.hgetall("delayer:job_bucket:a").expect("hgetall");
    assert_eq!(bucket.get("attempts").map(String::as_str), Some("1"), "still the first attempt");

    assert_eq!(d.touch(JobRef::with_receipt("a", "other"), Duration::from_secs(1)).expect("touch"), None);
    assert_eq!(d.touch("unknown", Duration::from_secs(1)).expect("touch"), None);
    assert!(d.ack(&job).expect("ack"));
    assert_eq!(d.touch(&job, Duration::from_secs(1)).expect("touch after ack"), None);
    assert_eq!(conn.zcard::<_, u64>("delayer:reserved").expect("zcard"), 0, "a late touch adds nothing");
}

#[test]
fn release_waits_the_given_delay_or_the_backoff() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    let s = Duration::from_secs;
    push_ready(&d, &mut conn, Job::new("f", "fixed", Duration::ZERO).backoff(Backoff::fixed(s(7))));
    push_ready(&d, &mut conn, Job::new("e", "exp", Duration::ZERO).backoff(Backoff::exponential(s(10), s(25))));

    let fixed = reserve(&d, "f");
    assert_eq!(fixed.id, "fixed");
    let now = redis_now(&mut conn);
    assert!(d.release(&fixed, Some(Duration::from_millis(3500))).expect("release"));
    let score = pool_score(&mut conn, "fixed").expect("back in the pool");
    assert!((score - (now + 3.5)).abs() < 0.5, "release delay: {score} vs {now}");
    assert_eq!(conn.zscore::<_, _, Option<f64>>("delayer:reserved", "fixed").expect("zscore"), None);
    assert!(!d.release(&fixed, None).expect("release again"), "not held any more");

    let exp = reserve(&d, "e");
    assert_eq!(exp.id, "exp");
    let mut waits = Vec::new();
    for attempt in 1..=3 {
        let now = redis_now(&mut conn);
        assert!(d.release("exp", None).expect("release by id"));
        waits.push(pool_score(&mut conn, "exp").expect("in the pool") - now);
        move_all(&mut conn);
        let again = reserve(&d, "e");
        assert_eq!(again.attempts, attempt + 1);
    }
    let rounded: Vec<i64> = waits.iter().map(|w| w.round() as i64).collect();
    assert_eq!(rounded, vec![10, 20, 25], "doubling from 10 s, capped at 25 s");

    let fixed = reserve(&d, "f");
    assert_eq!(fixed.attempts, 2);
    let now = redis_now(&mut conn);
    assert!(d.release(&fixed, None).expect("release"));
    let wait = pool_score(&mut conn, "fixed").expect("pool") - now;
    assert!((wait - 7.0).abs() < 0.5, "fixed backoff: {wait}");
}

#[test]
fn failures_past_max_attempts_and_burials_become_dead_letters() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    push_ready(&d, &mut conn, Job::new("t", "twice", Duration::ZERO).body("b1").max_attempts(2));
    push_ready(&d, &mut conn, Job::new("t", "grave", Duration::ZERO).body("b2"));

    let first = reserve(&d, "t");
    assert_eq!(first.id, "twice");
    assert!(d.release(&first, Some(Duration::ZERO)).expect("release"));
    let grave = reserve(&d, "t");
    assert_eq!(grave.id, "grave");
    assert!(d.bury_with_error(&grave, "no such address").expect("bury"));
    move_all(&mut conn);
    let last = reserve(&d, "t");
    assert_eq!((last.id.as_str(), last.attempts), ("twice", 2));
    assert!(last.is_last_attempt());
    assert!(d.release_with_error(&last, Some(Duration::ZERO), "smtp timeout").expect("release"));

    assert_eq!(pool_score(&mut conn, "twice"), None, "not scheduled again");
    let dead = d.dead_letters("t", 0, 10).expect("dead letters");
    let summary: Vec<(&str, &str, u32, &[u8])> =
        dead.iter().map(|l| (l.id.as_str(), l.reason.as_str(), l.attempts, &l.body[..])).collect();
    assert_eq!(summary, vec![("twice", "max_attempts", 2, &b"b1"[..]), ("grave", "buried", 1, &b"b2"[..])]);
    // Each says why its last attempt failed.
    let errors: Vec<Option<&str>> = dead.iter().map(|l| l.last_error.as_deref()).collect();
    assert_eq!(errors, [Some("smtp timeout"), Some("no such address")]);
    assert_eq!(d.dead_letters("t", 1, 10).expect("page").len(), 1);
    assert!(!d.bury(&last).expect("bury a dead job"), "nothing held");

    // Re-queue one by id: attempts start again, due now.
    assert_eq!(d.requeue_dead("t", Some(&["grave", "unknown"])).expect("requeue"), 1);
    assert!(pool_score(&mut conn, "grave").is_some());
    let attempts: String = conn.hget("delayer:job_bucket:grave", "attempts").expect("attempts");
    assert_eq!(attempts, "0");
    // Purge the rest.
    assert_eq!(d.purge_dead("t", None).expect("purge"), 1);
    assert!(!conn.exists::<_, bool>("delayer:job_bucket:twice").expect("exists"));
    assert!(d.dead_letters("t", 0, 10).expect("list").is_empty());
}

#[test]
fn requeue_all_goes_through_every_dead_letter() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    // More than one call's worth (1000), with a stale entry that must not count.
    let jobs: Vec<Job> = (0..1203).map(|i| Job::new("t", format!("j{i}"), Duration::ZERO)).collect();
    d.push_many(&jobs).expect("push_many");
    move_all(&mut conn);
    while let Some(job) = d.reserve("t", Duration::from_secs(30)).expect("reserve") {
        assert!(d.bury(&job).expect("bury"));
    }
    assert!(d.remove("j7").expect("remove"), "makes j7's entry stale");
    assert_eq!(d.requeue_dead("t", None).expect("requeue"), 1202);
    assert_eq!(conn.zcard::<_, u64>("delayer:job_pool").expect("zcard"), 1202);
    assert_eq!(conn.llen::<_, u64>("delayer:dead:t").expect("llen"), 0);
}

#[test]
fn reschedule_moves_a_waiting_job_only() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    d.push_job(&Job::new("t", "w", Duration::from_secs(100)).ready_max_lifetime(Duration::from_secs(50)))
        .expect("push");
    let now = redis_now(&mut conn);
    let due = d.reschedule("w", Duration::from_secs(10)).expect("reschedule").expect("waiting");
    let score = pool_score(&mut conn, "w").expect("in the pool");
    assert!((score - (now + 10.0)).abs() < 0.5);
    assert!((due.duration_since(UNIX_EPOCH).expect("epoch").as_secs_f64() - score).abs() < 0.002);
    let ttl: i64 = conn.pttl("delayer:job_bucket:w").expect("pttl");
    assert!((59_000..=61_000).contains(&ttl), "ttl follows the due time: {ttl} ms");

    assert_eq!(d.reschedule("unknown", Duration::from_secs(1)).expect("unknown"), None);
    push_ready(&d, &mut conn, Job::new("t", "ready", Duration::ZERO));
    assert_eq!(d.reschedule("ready", Duration::from_secs(1)).expect("ready"), None, "already delivered");
    assert_eq!(pool_score(&mut conn, "ready"), None, "never resurrected");
}

#[test]
fn breserve_waits_without_taking_and_wakes_on_a_job() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    let started = Instant::now();
    assert_eq!(d.breserve("t", Duration::from_secs(5), Duration::from_millis(300)).expect("timeout"), None);
    assert!(started.elapsed() >= Duration::from_millis(290), "waited the timeout");

    // A stale id (no bucket) is skipped, the live one behind it is reserved.
    let _: () = conn.lpush("delayer:ready_queue:t", "ghost").expect("lpush");
    let waiter = {
        let d = d.clone();
        thread::spawn(move || d.breserve("t", Duration::from_secs(5), Duration::from_secs(20)))
    };
    thread::sleep(Duration::from_millis(100));
    d.push_job(&Job::new("t", "late", Duration::ZERO).body("x")).expect("push");
    move_all(&mut conn);
    let got = waiter.join().expect("thread").expect("breserve").expect("a job");
    assert_eq!(got.id, "late");
    assert!(conn.zscore::<_, _, Option<f64>>("delayer:reserved", "late").expect("zscore").is_some());

    // Waiting takes nothing: an id left for someone else stays where it was.
    let _: () = conn.lpush("delayer:ready_queue:other", "kept").expect("lpush");
    let _: () = conn.hset("delayer:job_bucket:kept", "topic", "other").expect("hset");
    let ids: Vec<String> = conn.lrange("delayer:ready_queue:other", 0, -1).expect("lrange");
    assert_eq!(ids, vec!["kept"]);
    assert_eq!(d.breserve("other", Duration::from_secs(5), Duration::from_secs(5)).expect("b").expect("j").id, "kept");
}

#[test]
fn bad_input_is_refused_before_redis() {
    let redis = RedisServer::start();
    let d = client(&redis);
    let invalid = |r: Result<_, Error>| matches!(r, Err(Error::InvalidArgument(_)));
    assert!(invalid(d.reserve("t", Duration::ZERO).map(|_| ())));
    assert!(invalid(d.reserve("t", Duration::from_secs(315_360_001)).map(|_| ())));
    assert!(invalid(d.reserve("", Duration::from_secs(1)).map(|_| ())));
    assert!(invalid(d.breserve("t", Duration::ZERO, Duration::from_secs(1)).map(|_| ())));
    assert!(invalid(d.push_job(&Job::new("t", "x", Duration::ZERO).max_attempts(1_000_001)).map(|_| ())));
    let backwards = Backoff::exponential(Duration::from_secs(2), Duration::from_secs(1));
    assert!(invalid(d.push_job(&Job::new("t", "x", Duration::ZERO).backoff(backwards)).map(|_| ())));
    assert!(invalid(d.ack("").map(|_| ())));
    assert!(invalid(d.dead_letters("t", 0, 0).map(|_| ())));
    assert!(invalid(d.dead_letters("t", 0, 1001).map(|_| ())));
    assert!(invalid(d.requeue_dead("t", Some(&["ok", ""])).map(|_| ())));
    assert!(invalid(d.reschedule("x", Duration::from_secs(315_360_001)).map(|_| ())));
    assert!(invalid(d.touch("x", Duration::ZERO).map(|_| ())));
    assert!(invalid(d.touch(JobRef::with_receipt("x", ""), Duration::from_secs(1)).map(|_| ())));
    let mut conn = redis.connection();
    let keys: Vec<String> = conn.keys("*").expect("keys");
    assert!(keys.is_empty(), "nothing written: {keys:?}");
}

#[test]
fn reserve_parks_a_job_with_unreadable_retry_fields() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    let _: () = conn.hset_multiple("delayer:job_bucket:odd", &[("topic", "t"), ("attempts", "many")]).expect("hset");
    let _: () = conn.lpush("delayer:ready_queue:t", "odd").expect("lpush");
    assert_eq!(d.reserve("t", Duration::from_secs(1)).expect("reserve"), None);
    let parked: Vec<String> = conn.lrange("delayer:malformed", 0, -1).expect("lrange");
    assert_eq!(parked, vec!["odd"], "reported, not lost");
    assert!(wait_until(DEADLINE, || conn.exists::<_, bool>("delayer:job_bucket:odd").unwrap_or(false)));
}

#[test]
fn a_dead_letter_belongs_to_its_topic_only() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    push_ready(&d, &mut conn, Job::new("a", "x", Duration::ZERO));
    assert!(d.bury(&reserve(&d, "a")).expect("bury on a"));
    // Pushed again under the same id, on another topic, where it dies too.
    push_ready(&d, &mut conn, Job::new("b", "x", Duration::ZERO));
    assert!(d.bury(&reserve(&d, "b")).expect("bury on b"));
    assert!(d.dead_letters("a", 0, 10).expect("list a").is_empty(), "a's entry is stale");
    assert_eq!(d.dead_letters("b", 0, 10).expect("list b").len(), 1);
    assert_eq!(d.requeue_dead("a", None).expect("requeue a"), 0, "a stale entry re-queues nothing");
    assert_eq!(pool_score(&mut conn, "x"), None);
    assert_eq!(d.requeue_dead("b", Some(&["x"])).expect("requeue b"), 1);
}

#[test]
fn a_long_exponential_backoff_from_zero_stays_a_number() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    let zero = Backoff::exponential(Duration::ZERO, Duration::ZERO);
    push_ready(&d, &mut conn, Job::new("t", "many", Duration::ZERO).max_attempts(0).backoff(zero));
    let _: () = conn.hset("delayer:job_bucket:many", "attempts", 5000).expect("hset");
    let job = reserve(&d, "t");
    assert_eq!(job.attempts, 5001);
    let now = redis_now(&mut conn);
    assert!(d.release(&job, None).expect("release"), "0 * 2^5000 is 0, not NaN");
    let score = pool_score(&mut conn, "many").expect("in the pool");
    assert!((score - now).abs() < 0.5);
    let empty = JobRef::with_receipt("many", "");
    assert!(matches!(d.ack(empty), Err(Error::InvalidArgument(_))), "an empty receipt is a bug");
}
