//! `delayer migrate --to topic` (and back) on a running system: a server per
//! layout, producers and consumers at work while jobs move, reservations
//! held across the move and acked in the new layout, dead letters moved and
//! re-queued. Every job pushed is consumed exactly once.

use delayer::{Delayer, Job, Layout, Reserved};
use redis::Commands;
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use testkit::{server_conf, temp_dir, wait_until, DelayerProcess, RedisServer};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");
const TOPICS: [&str; 3] = ["mail", "sms", "close order"];

fn migrate(conf: &std::path::Path, to: &str) -> (bool, String) {
    let out = Command::new(BIN).arg("-c").arg(conf).args(["migrate", "--to", to]).output().expect("run delayer");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// Pops every topic in `d`'s layout until `stop`, recording each job.
fn consumer(d: Delayer, seen: Arc<Mutex<Vec<(String, String)>>>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            let mut any = false;
            for t in TOPICS {
                if let Ok(Some(m)) = d.pop(t) {
                    seen.lock().expect("seen").push((m.topic, m.id));
                    any = true;
                }
            }
            if !any {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    })
}

#[test]
fn jobs_move_to_the_per_topic_layout_and_back_while_clients_work() {
    let redis = RedisServer::start();
    let dir = temp_dir("layout-migrate");
    let (classic_conf, topic_conf) = (dir.join("classic.conf"), dir.join("topic.conf"));
    std::fs::write(&classic_conf, server_conf(redis.port(), 100, "")).expect("conf");
    std::fs::write(&topic_conf, server_conf(redis.port(), 100, "layout = topic")).expect("conf");
    let classic = Delayer::open(&redis.url()).expect("client");
    let topic = Delayer::open(&redis.url()).expect("client").with_layout(Layout::Topic).expect("layout");
    let mut pushed: BTreeSet<(String, String)> = BTreeSet::new();

    // Before: classic jobs waiting (up to 3 s), some reserved and held, some dead.
    let seed: Vec<Job> = (0..300)
        .map(|i| Job::new(TOPICS[i % 3], format!("seed-{i}"), Duration::from_millis(40 * (i as u64 % 75))))
        .collect();
    classic.push_many(&seed).expect("push_many");
    pushed.extend(seed.iter().map(|j| (j.topic.clone(), j.id.clone())));
    let held_jobs: Vec<Job> =
        (0..30).map(|i| Job::new(TOPICS[i % 3], format!("held-{i}"), Duration::ZERO).max_attempts(5)).collect();
    classic.push_many(&held_jobs).expect("push_many");
    pushed.extend(held_jobs.iter().map(|j| (j.topic.clone(), j.id.clone())));
    let _classic_server = DelayerProcess::start(BIN, &std::fs::read_to_string(&classic_conf).expect("conf"));
    let _topic_server = DelayerProcess::start(BIN, &std::fs::read_to_string(&topic_conf).expect("conf"));
    let mut held: Vec<Reserved> = Vec::new();
    let got_all = wait_until(Duration::from_secs(30), || {
        for t in TOPICS {
            while let Ok(Some(job)) = classic.reserve(t, Duration::from_secs(120)) {
                held.push(job);
            }
        }
        held.iter().filter(|j| j.id.starts_with("held-")).count() == 30
    });
    // The reserve loop may also take seed jobs already due: they are held too.
    assert!(got_all, "reserved {} of the 30", held.len());
    let (buried, held): (Vec<Reserved>, Vec<Reserved>) = held.into_iter().partition(|j| j.id.ends_with('0'));
    for job in &buried {
        assert!(classic.bury(job).expect("bury"), "buried {}", job.id);
    }

    // During: consumers in both layouts, a classic producer, and the move.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let consumers =
        [consumer(classic.clone(), seen.clone(), stop.clone()), consumer(topic.clone(), seen.clone(), stop.clone())];
    let producer = {
        let classic = classic.clone();
        std::thread::spawn(move || {
            let mut ids = Vec::new();
            for i in 0..300 {
                let job = Job::new(TOPICS[i % 3], format!("live-{i}"), Duration::from_millis(10 * (i as u64 % 100)));
                classic.push_job(&job).expect("push");
                ids.push((job.topic, job.id));
                std::thread::sleep(Duration::from_millis(2));
            }
            ids
        })
    };
    let (_, during) = migrate(&topic_conf, "topic");
    pushed.extend(producer.join().expect("producer"));
    // Every client uses the per-topic layout now: the last run leaves nothing.
    let (done, after) = migrate(&topic_conf, "topic");
    assert!(done, "a run after the producers switched leaves nothing:\n{after}\n(first run:\n{during})");

    // Reservations moved with their receipts: acked in the new layout.
    for job in &held {
        assert!(topic.ack(job).expect("ack"), "the reservation of {} survived the move", job.id);
    }
    let acked: BTreeSet<(String, String)> = held.iter().map(|j| (j.topic.clone(), j.id.clone())).collect();
    // Dead letters moved: re-queued in the new layout.
    let requeued: u64 = TOPICS.iter().map(|t| topic.requeue_dead(t, None).expect("requeue")).sum();
    assert_eq!(requeued, buried.len() as u64, "every buried job");

    let expected: BTreeSet<(String, String)> = pushed.difference(&acked).cloned().collect();
    let all_seen = wait_until(Duration::from_secs(30), || seen.lock().expect("seen").len() >= expected.len());
    std::thread::sleep(Duration::from_millis(300)); // a late duplicate would show now
    stop.store(true, Ordering::SeqCst);
    consumers.into_iter().for_each(|c| c.join().expect("consumer"));
    let seen = seen.lock().expect("seen").clone();
    let mut counts: BTreeMap<&(String, String), usize> = BTreeMap::new();
    seen.iter().for_each(|k| *counts.entry(k).or_default() += 1);
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "delivered twice: {twice:?}");
    let got: BTreeSet<(String, String)> = seen.into_iter().collect();
    let missing: Vec<_> = expected.difference(&got).take(10).collect();
    assert!(all_seen && missing.is_empty(), "{} of {} consumed; missing e.g. {missing:?}", got.len(), expected.len());
    let mut conn = redis.connection();
    let classic_pool: u64 = conn.zcard("delayer:job_pool").expect("ZCARD");
    assert_eq!(classic_pool, 0, "nothing left in the classic layout");

    // And back: waiting jobs of the per-topic layout become classic ones.
    for i in 0..20 {
        topic.push(TOPICS[i % 3], &format!("back-{i}"), Duration::from_secs(600)).expect("push");
    }
    let (done, text) = migrate(&classic_conf, "classic");
    assert!(done, "{text}");
    assert!(text.contains("moved scheduled  20"), "{text}");
    let classic_pool: u64 = conn.zcard("delayer:job_pool").expect("ZCARD");
    assert_eq!(classic_pool, 20);
    assert!(classic.remove("back-7").expect("remove"), "a classic client reaches the moved job");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn jobs_no_run_can_move_are_named_with_what_to_do() {
    let redis = RedisServer::start();
    let dir = temp_dir("migrate-left");
    let conf = dir.join("delayer.conf");
    std::fs::write(&conf, server_conf(redis.port(), 1000, "")).expect("conf");
    let d = Delayer::open(&redis.url()).expect("client");
    d.push("a{b}", "1", Duration::from_secs(600)).expect("push");
    d.push("mail", "2", Duration::from_secs(600)).expect("push");
    let (ok, text) = migrate(&conf, "topic");
    assert!(!ok, "{text}");
    assert!(text.contains("left topic \"a{b}\""), "{text}");
    assert!(text.contains("no run will move them") && text.contains("remove them"), "{text}");
    let moved: u64 =
        redis.connection().zcard(delayer_protocol::keys::TopicKeys::new("delayer:").pool("mail")).expect("ZCARD");
    assert_eq!(moved, 1, "the others move all the same");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn held_jobs_and_flow_control_move_with_their_topic() {
    use delayer_protocol::keys::{Keys, TopicKeys};
    let redis = RedisServer::start();
    let dir = temp_dir("migrate-flow");
    let conf = dir.join("delayer.conf");
    std::fs::write(&conf, server_conf(redis.port(), 1000, "")).expect("conf");
    let (classic, topic) = (Keys::new("delayer:"), TopicKeys::new("delayer:"));
    let d = Delayer::open(&redis.url()).expect("client");
    let mut r = redis.connection();
    // "paused" is paused, and the classic mover set one of its jobs aside.
    d.push("paused", "held", Duration::from_secs(600)).expect("push");
    d.push("paused", "waiting", Duration::from_secs(900)).expect("push");
    let due: f64 = r.zscore(classic.job_pool(), "held").expect("ZSCORE");
    let _: () = r.zrem(classic.job_pool(), "held").expect("ZREM");
    let _: () = r.zadd(classic.flow_pool("paused"), "held", due).expect("ZADD");
    let _: () = r.hset(classic.flow("paused"), "paused", "1.000").expect("HSET");
    let _: () = r.sadd(classic.flow_topics(), "paused").expect("SADD");
    // An id without a job in another flow pool: left, and counted as left.
    let _: () = r.zadd(classic.flow_pool("other"), "gone", 1.0).expect("ZADD");
    assert_eq!(r.hget::<_, _, u64>(classic.scheduled_count(), "paused").expect("HGET"), 2);

    let (ok, text) = migrate(&conf, "topic");
    assert!(!ok, "the id without a job is left: {text}");
    assert!(text.contains("moved scheduled  2") && text.contains("left 1 entries"), "{text}");
    let pool: Vec<(String, f64)> = r.zrange_withscores(topic.pool("paused"), 0, -1).expect("ZRANGE");
    assert_eq!(pool.len(), 2, "{pool:?}");
    assert_eq!(pool[0].0, "held");
    assert!((pool[0].1 - due).abs() < 0.0005, "the due time is kept: {pool:?}");
    assert!(r.exists::<_, bool>(topic.bucket("paused", "held")).expect("EXISTS"));
    assert_eq!(r.zcard::<_, u64>(classic.flow_pool("paused")).expect("ZCARD"), 0);
    assert_eq!(r.hget::<_, _, Option<u64>>(classic.scheduled_count(), "paused").expect("HGET"), None);
    assert_eq!(r.hget::<_, _, Option<String>>(topic.flow("paused"), "paused").expect("HGET").as_deref(), Some("1.000"));
    // The per-topic layout's consumers see the pause.
    let per_topic = Delayer::open(&redis.url()).expect("client").with_layout(Layout::Topic).expect("layout");
    let _: () = r.lpush(topic.ready("paused"), "held").expect("LPUSH");
    let _: () = r.zrem(topic.pool("paused"), "held").expect("ZREM");
    assert!(per_topic.pop("paused").expect("pop").is_none(), "still paused after the move");

    // Back: a per-topic flow hash (a limit, no pause) becomes the classic one,
    // and the topic joins flow_topics.
    let _: () = r.del(classic.flow_pool("other")).expect("DEL");
    let _: () = r.hset(topic.flow("limited"), "per_second", "0.5").expect("HSET");
    per_topic.push("limited", "1", Duration::from_secs(600)).expect("push");
    let (ok, text) = migrate(&conf, "classic");
    assert!(ok, "{text}");
    assert_eq!(
        r.hget::<_, _, Option<String>>(classic.flow("limited"), "per_second").expect("HGET").as_deref(),
        Some("0.5")
    );
    assert!(r.sismember::<_, _, bool>(classic.flow_topics(), "limited").expect("SISMEMBER"));
    assert!(r.sismember::<_, _, bool>(classic.flow_topics(), "paused").expect("SISMEMBER"));
    assert_eq!(
        r.hget::<_, _, Option<String>>(classic.flow("paused"), "paused").expect("HGET").as_deref(),
        Some("1.000")
    );

    // Resumed in the classic layout, then moved again: the per-topic hash
    // left by the first move becomes the classic one, its pause gone.
    let classic_client = Delayer::open(&redis.url()).expect("client");
    assert!(classic_client.resume("paused").expect("resume"));
    let (ok, text) = migrate(&conf, "topic");
    assert!(ok, "{text}");
    assert!(!per_topic.is_paused("paused").expect("is_paused"), "a resumed topic paused again by a migration");
    let _ = std::fs::remove_dir_all(dir);
}
