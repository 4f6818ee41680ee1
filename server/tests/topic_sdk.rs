//! The Rust SDK (blocking and async) on the per-topic layout, with the real
//! `delayer` server moving and expiring: what each call writes (the topic's
//! own keys, and no index: the scripts announce "<time> <topic>" on the wake
//! channel and the server keeps `<prefix>due`), ids per topic, the at-least-once calls, dead
//! letters, lookups and numbers, and the refusals that name the call to use.

use delayer::{Delayer, Error, Job, JobRef, Layout};
use delayer_protocol::keys::TopicKeys;
use redis::Commands;
use std::time::{Duration, SystemTime};
use testkit::{server_conf, temp_dir, DelayerProcess, RedisServer};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");

fn keys() -> TopicKeys {
    TopicKeys::new("delayer:")
}

fn client(redis: &RedisServer) -> Delayer {
    Delayer::open(&redis.url()).expect("client").with_layout(Layout::Topic).expect("topic layout")
}

fn start_server(redis: &RedisServer) -> DelayerProcess {
    let server = DelayerProcess::start(BIN, &server_conf(redis.port(), 1000, "layout = topic"));
    assert!(server.wait_for_output(|o| o.contains("layout topic")), "{}", server.output());
    server
}

fn unix(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH).expect("clock").as_secs_f64()
}

fn redis_now(conn: &mut redis::Connection) -> f64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(conn).expect("TIME");
    s as f64 + us as f64 / 1e6
}

/// Runs `act` while subscribed to the wake channel: the announcements
/// published ("<time> <topic>": the times, each checked to name `mail`),
/// read until `count` came (5 s at most each), and whether one more came
/// within 300 ms after them.
fn wake_ups<T>(redis: &RedisServer, count: usize, act: impl FnOnce() -> T) -> (T, Vec<f64>, bool) {
    let mut sub = redis.connection();
    let mut pubsub = sub.as_pubsub();
    pubsub.subscribe(keys().wake()).expect("SUBSCRIBE");
    pubsub.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let done = act();
    let mut woken = Vec::new();
    while woken.len() < count {
        let Ok(msg) = pubsub.get_message() else { break };
        let payload = msg.get_payload::<String>().expect("payload");
        let (time, topic) = payload.split_once(' ').expect("<time> <topic>");
        assert_eq!(topic, "mail", "{payload}");
        woken.push(time.parse::<f64>().expect("a time"));
    }
    pubsub.set_read_timeout(Some(Duration::from_millis(300))).expect("timeout");
    let more = pubsub.get_message().is_ok();
    (done, woken, more)
}

#[test]
fn a_push_writes_the_topics_keys_and_announces_an_earlier_head_once() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    let ((later, sooner), woken, more) = wake_ups(&redis, 2, || {
        let later = d.push_job(&Job::new("mail", "42", Duration::from_secs(600)).body("late")).expect("push");
        let sooner = d.push_job(&Job::new("mail", "43", Duration::from_secs(60)).body("soon")).expect("push");
        d.push("mail", "44", Duration::from_secs(900)).expect("push");
        (later, sooner)
    });

    let pool: Vec<(String, f64)> = conn.zrange_withscores(keys().pool("mail"), 0, -1).expect("ZRANGE");
    let ids: Vec<&str> = pool.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["43", "42", "44"]);
    let body: Option<String> = conn.hget(keys().bucket("mail", "42"), "body").expect("HGET");
    assert_eq!(body.as_deref(), Some("late"));
    // The client writes no index (the server keeps it from the
    // announcements), and nothing in the classic layout's keys.
    let index: Vec<String> = conn.keys("delayer:due").expect("KEYS");
    assert!(index.is_empty(), "{index:?}");
    let classic: Vec<String> = conn.keys("delayer:job_*").expect("KEYS");
    assert!(classic.is_empty(), "{classic:?}");
    // Announced into the empty pool (42) and before its head (43), not 44.
    assert_eq!(woken.len(), 2, "two wake-ups: {woken:?}");
    assert!((woken[0] - unix(later)).abs() < 0.002 && (woken[1] - unix(sooner)).abs() < 0.002, "{woken:?}");
    assert!(!more, "no wake-up for a push behind the pool's head");
}

#[test]
fn a_push_after_redis_lost_its_scripts_still_wakes_the_server() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    // A new client's first push finds push.lua missing, as after a restart:
    // loaded and sent again, it still announces.
    redis::cmd("SCRIPT").arg("FLUSH").query::<()>(&mut conn).expect("SCRIPT FLUSH");
    let (due, woken, _) =
        wake_ups(&redis, 1, || d.push("mail", "1", Duration::from_millis(300)).expect("push after SCRIPT FLUSH"));
    assert_eq!(woken.len(), 1, "a wake-up for the job");
    assert!((woken[0] - unix(due)).abs() < 0.002, "the wake-up carries the due time: {woken:?} vs {due:?}");
}

#[test]
fn a_server_says_when_jobs_wait_in_the_layout_it_does_not_run() {
    // A client left on the classic layout, a server on the per-topic one.
    let redis = RedisServer::start();
    let classic = Delayer::open(&redis.url()).expect("client");
    classic.push("mail", "1", Duration::ZERO).expect("push");
    let server = start_server(&redis);
    let said = server.wait_for_output(|o| o.contains("1 job(s) wait in the classic key layout"));
    assert!(said, "{}", server.output());
    assert!(server.output().contains("delayer migrate --to topic"), "{}", server.output());

    // And the other way round.
    let redis = RedisServer::start();
    client(&redis).push("mail", "1", Duration::from_secs(60)).expect("push");
    let server = DelayerProcess::start(BIN, &server_conf(redis.port(), 1000, ""));
    let said = server.wait_for_output(|o| o.contains("1 job(s) wait in the topic key layout"));
    assert!(said, "{}", server.output());
    assert!(server.output().contains("delayer migrate --to classic"), "{}", server.output());
}

#[test]
fn ids_are_per_topic_and_the_server_delivers_each_when_due_never_before() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let _server = start_server(&redis);
    let d = client(&redis);

    let due_mail = d.push_job(&Job::new("mail", "1", Duration::from_millis(1500)).body("to mail")).expect("push");
    d.push_job(&Job::new("sms", "1", Duration::from_millis(300)).body("to sms")).expect("push");
    let sms = d.bpop("sms", Duration::from_secs(20)).expect("bpop").expect("the sms job");
    assert_eq!((sms.id.as_str(), sms.body_str()), ("1", Some("to sms")), "same id, its own job");
    let mail = d.bpop("mail", Duration::from_secs(20)).expect("bpop").expect("the mail job");
    assert_eq!(mail.body_str(), Some("to mail"));
    assert!(redis_now(&mut conn) >= unix(due_mail), "delivered before its due time");
}

#[test]
fn remove_and_reschedule_take_the_topic_and_refuse_without_it() {
    let redis = RedisServer::start();
    let d = client(&redis);
    d.push("mail", "1", Duration::from_secs(60)).expect("push");
    d.push("sms", "1", Duration::from_secs(60)).expect("push");

    let err = d.remove("1").expect_err("no topic");
    assert!(matches!(&err, Error::InvalidArgument(m) if m.contains("remove_in(topic, id)")), "{err}");
    let err = d.reschedule("1", Duration::ZERO).expect_err("no topic");
    assert!(matches!(&err, Error::InvalidArgument(m) if m.contains("reschedule_in")), "{err}");
    let err = d.push("a{b}", "1", Duration::ZERO).expect_err("a brace");
    assert!(matches!(&err, Error::InvalidArgument(m) if m.contains("per-topic layout")), "{err}");
    let err = d.ack(JobRef::from("1")).expect_err("no topic");
    assert!(matches!(&err, Error::InvalidArgument(m) if m.contains("JobRef::in_topic")), "{err}");

    assert!(d.remove_in("mail", "1").expect("remove"), "removed from mail");
    assert!(!d.remove_in("mail", "1").expect("remove"), "gone");
    let due = d.reschedule_in("sms", "1", Duration::from_secs(5)).expect("reschedule").expect("waiting");
    let mut conn = redis.connection();
    let score: f64 = conn.zscore(keys().pool("sms"), "1").expect("ZSCORE");
    assert!((score - unix(due)).abs() < 0.002, "moved in the topic's own pool");
}

#[test]
fn reservations_are_acked_released_buried_requeued_and_expired_per_topic() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let server = start_server(&redis);
    let d = client(&redis);
    for id in ["ack", "release", "bury", "expire"] {
        d.push_job(&Job::new("work", id, Duration::ZERO).body(id)).expect("push");
    }
    let ttr = Duration::from_secs(30);
    let mut held = Vec::new();
    while held.len() < 4 {
        let job = d.breserve("work", ttr, Duration::from_secs(20)).expect("breserve").expect("a job");
        held.push(job);
    }
    let by_id = |id: &str| held.iter().find(|j| j.id == id).expect("reserved").clone();
    // reserve.lua announced the deadline; the server put it in its index.
    let deadline = unix(by_id("ack").deadline) + 0.002;
    let indexed = testkit::wait_until(testkit::DEADLINE, || {
        conn.zscore::<_, _, Option<f64>>(keys().due(), "work").ok().flatten().is_some_and(|at| at <= deadline)
    });
    assert!(indexed, "the index holds a deadline at the latest:\n{}", server.output());

    assert!(d.ack(&by_id("ack")).expect("ack"));
    assert!(d.release(&by_id("release"), Some(Duration::from_millis(200))).expect("release"));
    assert!(d.bury_with_error(&by_id("bury"), "no such order").expect("bury"));
    let dead = d.dead_letters("work", 0, 10).expect("dead letters");
    assert_eq!(dead.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(), ["bury"]);
    let in_list: Vec<String> = conn.lrange(keys().dead("work"), 0, -1).expect("LRANGE");
    assert_eq!(in_list, ["bury"], "the topic's own dead-letter list");
    // The released job is due again and the server moves it.
    let again = d.breserve("work", ttr, Duration::from_secs(20)).expect("breserve").expect("released job");
    assert_eq!((again.id.as_str(), again.attempts), ("release", 2));
    assert!(d.ack(&again).expect("ack"));
    // A requeued dead letter comes back through the server, attempts reset.
    assert_eq!(d.requeue_dead("work", None).expect("requeue"), 1);
    let requeued = d.breserve("work", ttr, Duration::from_secs(20)).expect("breserve").expect("requeued job");
    assert_eq!((requeued.id.as_str(), requeued.attempts), ("bury", 1));
    assert!(d.ack(&requeued).expect("ack"));
    // The last one's reservation runs out: the server hands it out again.
    let expiring = by_id("expire");
    assert!(d.touch(&expiring, Duration::from_millis(500)).expect("touch").is_some());
    let retried = d.breserve("work", ttr, Duration::from_secs(30)).expect("breserve");
    let retried = retried.unwrap_or_else(|| panic!("never expired:\n{}", server.output()));
    assert_eq!((retried.id.as_str(), retried.attempts), ("expire", 2));
    assert!(!d.ack(&expiring).expect("ack"), "the expired reservation is not held any more");
    assert!(d.ack(&retried).expect("ack"));
    let stats = d.stats().expect("stats");
    let work = stats.topics.iter().find(|t| t.topic == "work").expect("work's numbers");
    assert_eq!((work.scheduled, work.ready, work.reserved, work.dead), (0, 0, Some(0), 0), "{stats:?}");
}

#[test]
fn push_many_groups_by_topic_and_lookups_and_listings_read_the_topics_keys() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    let jobs: Vec<Job> = (0..250)
        .map(|i| Job::new(if i % 50 < 25 { "a" } else { "b" }, format!("{i}"), Duration::from_secs(60 + i)))
        .collect();
    let due = d.push_many(&jobs).expect("push_many");
    assert_eq!(due.len(), 250);
    let (a, b): (u64, u64) = (conn.zcard(keys().pool("a")).expect("ZCARD"), conn.zcard(keys().pool("b")).expect("Z"));
    assert_eq!((a, b), (125, 125));
    let index: Vec<String> = conn.keys("delayer:due").expect("KEYS");
    assert!(index.is_empty(), "the client writes no index: {index:?}");

    let info = d.job("a", "0").expect("lookup");
    assert_eq!(info.state, delayer::inspect::JobState::Scheduled);
    assert_eq!(d.job("b", "0").expect("lookup").state, delayer::inspect::JobState::Unknown, "ids are per topic");
    let page = d.list_scheduled("b", 0, 10).expect("listing");
    assert_eq!(page.items.first().map(|l| l.id.as_str()), Some("25"));
    // The topics stats() counts are the server's (<prefix>topics, kept from
    // the announcements): once one runs, both are there.
    let server = start_server(&redis);
    let counted = testkit::wait_until(testkit::DEADLINE, || d.stats().is_ok_and(|s| s.topics.len() == 2));
    let stats = d.stats().expect("stats");
    assert!(counted, "{stats:?}\n{}", server.output());
    assert_eq!(stats.scheduled_total, 250, "{stats:?}");
}

#[test]
fn the_config_file_chooses_the_layout() {
    let redis = RedisServer::start();
    let dir = temp_dir("topic-conf");
    let path = dir.join("delayer.conf");
    std::fs::write(&path, server_conf(redis.port(), 1000, "layout = topic")).expect("write conf");
    let d = Delayer::from_conf(&path).expect("a topic-layout client");
    assert_eq!(d.keys().layout(), Layout::Topic);
    d.push("mail", "1", Duration::from_secs(60)).expect("push");
    let mut conn = redis.connection();
    let exists: bool = conn.exists(keys().bucket("mail", "1")).expect("EXISTS");
    assert!(exists);
    std::fs::write(&path, server_conf(redis.port(), 1000, "layout = topic\nkey_prefix = a{b}:")).expect("write");
    let err = Delayer::from_conf(&path).expect_err("a brace in the prefix");
    assert!(err.to_string().contains("key_prefix"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_async_client_runs_the_same_calls() {
    let redis = RedisServer::start();
    let _server = start_server(&redis);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let d = delayer::aio::Delayer::open(&redis.url()).expect("client").with_layout(Layout::Topic).expect("layout");
        d.push_job(&Job::new("mail", "1", Duration::from_millis(200)).body("hi")).await.expect("push");
        let job = d.breserve("mail", Duration::from_secs(30), Duration::from_secs(20)).await.expect("breserve");
        let job = job.expect("the job");
        assert_eq!(job.body_str(), Some("hi"));
        assert!(d.release(&job, Some(Duration::ZERO)).await.expect("release"));
        let again = d.breserve("mail", Duration::from_secs(30), Duration::from_secs(20)).await.expect("breserve");
        let again = again.expect("released job");
        assert_eq!(again.attempts, 2);
        assert!(d.ack(&again).await.expect("ack"));
        assert!(matches!(d.remove("1").await, Err(Error::InvalidArgument(_))));
        let stats = d.stats().await.expect("stats");
        assert_eq!(stats.topics.len(), 1);
    });
}

#[test]
fn the_cli_reads_and_steers_the_per_topic_layout_from_its_config() {
    let redis = RedisServer::start();
    let dir = temp_dir("topic-cli");
    let conf = dir.join("delayer.conf");
    std::fs::write(&conf, server_conf(redis.port(), 1000, "layout = topic")).expect("write conf");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(BIN)
            .arg("-c")
            .arg(&conf)
            .args(args)
            .env_remove("DELAYER_URL")
            .output()
            .expect("run delayer");
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let json = |args: &[&str]| -> serde_json::Value { serde_json::from_str(&run(args)).expect("json") };
    let d = client(&redis);
    // A deployment no topic has reached yet has empty numbers, in the SDK
    // and in the CLI (an empty request once failed with "empty command").
    assert!(d.stats().expect("stats of a new deployment").topics.is_empty());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let empty = rt.block_on(async {
        let aio =
            delayer::aio::Delayer::open(&redis.url()).expect("client").with_layout(Layout::Topic).expect("layout");
        aio.stats().await.expect("async stats of a new deployment")
    });
    assert!(empty.topics.is_empty());
    assert_eq!(json(&["stats", "--json"])["topics"], serde_json::json!([]));
    let braced = std::process::Command::new(BIN).arg("-c").arg(&conf).args(["peek", "a{b}"]).output().expect("run");
    assert_eq!(braced.status.code(), Some(2), "peek refuses a topic the layout cannot name, as job does");
    assert!(String::from_utf8_lossy(&braced.stderr).contains("per-topic layout"));
    // The topics a deployment knows are the server's (kept from the
    // scripts' announcements): one runs from here on.
    let _server = start_server(&redis);
    d.push_job(&Job::new("mail", "1", Duration::from_secs(1800)).body("later")).expect("push");
    d.push("sms", "1", Duration::from_secs(60)).expect("push");

    let job = json(&["job", "mail", "1", "--json"]);
    assert_eq!((job["state"].as_str(), job["body_size"].as_u64()), (Some("scheduled"), Some(5)), "{job}");
    let listed = json(&["list", "sms", "--state", "scheduled", "--json"]);
    assert_eq!(listed["items"][0]["id"], "1", "{listed}");
    let topics = |stats: &serde_json::Value| -> Vec<String> {
        let topics = stats["topics"].as_array().expect("topics").iter();
        topics.filter_map(|t| t["topic"].as_str().map(str::to_string)).collect()
    };
    let both = testkit::wait_until(testkit::DEADLINE, || topics(&json(&["stats", "--json"])) == ["mail", "sms"]);
    let stats = json(&["stats", "--json"]);
    assert!(both, "{stats}");
    assert_eq!(stats["pool_size"], 2, "{stats}");
    assert!(run(&["reschedule", "mail", "1", "0"]).contains("is due"));
    assert!(run(&["remove", "sms", "1"]).contains("removed"));
    let mut conn = redis.connection();
    let left: u64 = conn.zcard(keys().pool("sms")).expect("ZCARD");
    assert_eq!(left, 0, "removed from the topic's own pool");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_worker_on_several_topics_acks_every_job_in_the_per_topic_layout() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let redis = RedisServer::start();
    let _server = start_server(&redis);
    let d = client(&redis);
    let jobs: Vec<Job> =
        (0..60).map(|i| Job::new(["a", "b", "c"][i % 3], format!("{i}"), Duration::from_millis(100))).collect();
    d.push_many(&jobs).expect("push_many");
    let done = Arc::new(AtomicUsize::new(0));
    let stopper = delayer::worker::Stopper::new();
    let mut worker = delayer::worker::Worker::new(d.clone()).concurrency(8).with_stopper(stopper.clone());
    for topic in ["a", "b", "c"] {
        let done = done.clone();
        worker = worker.handle(topic, move |_task| -> Result<(), String> {
            done.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
    }
    let running = std::thread::spawn(move || worker.run());
    // Its acks of one topic ride in the fetch of another: in this layout
    // they must be sent on their own topic's keys, and all land.
    let mut conn = redis.connection();
    let all_acked = testkit::wait_until(testkit::DEADLINE, || {
        let left: u64 = ["a", "b", "c"]
            .iter()
            .map(|t| {
                let reserved: u64 = conn.zcard(keys().reserved(t)).unwrap_or(1);
                let pool: u64 = conn.zcard(keys().pool(t)).unwrap_or(1);
                let ready: u64 = conn.llen(keys().ready(t)).unwrap_or(1);
                reserved + pool + ready
            })
            .sum();
        done.load(Ordering::SeqCst) >= 60 && left == 0
    });
    stopper.stop();
    running.join().expect("worker thread").expect("worker run");
    assert!(all_acked, "handled {} of 60, or left reserved", done.load(Ordering::SeqCst));
    let buckets: Vec<String> = conn.keys("delayer:{*}:job:*").expect("KEYS");
    assert!(buckets.is_empty(), "acked jobs are deleted: {buckets:?}");
}

#[test]
fn a_user_without_publish_still_pushes_in_the_per_topic_layout() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    redis::cmd("ACL")
        .arg(&["SETUSER", "pusher", "on", ">pw", "~*", "&*", "+@all", "-publish"])
        .query::<()>(&mut conn)
        .expect("ACL SETUSER");
    let url = format!("redis://pusher:pw@127.0.0.1:{}/0", redis.port());
    let d = Delayer::open(&url).expect("client").with_layout(Layout::Topic).expect("layout");
    d.push("mail", "1", Duration::from_secs(60)).expect("a push whose wake-up is refused still succeeds");
    let score: Option<f64> = conn.zscore(keys().pool("mail"), "1").expect("ZSCORE");
    assert!(score.is_some(), "the job is written (the server's rescan finds it)");
}
