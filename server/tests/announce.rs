//! The per-topic layout with the index left to the server (PROTOCOL.md,
//! "The per-topic layout"): jobs pushed by `EVALSHA push_topic.lua` alone, exactly
//! as a thin SDK sends them (no index write, no SADD), arrive in their ready
//! list no earlier than due and no later than the bound on a lost
//! announcement, while the server's subscription is cut again and again
//! (`CLIENT KILL TYPE pubsub`, also in one transaction with a push, so that
//! push's announcement is lost for certain).

use delayer_protocol::keys::TopicKeys;
use redis::Commands;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use testkit::{server_conf, wait_until, DelayerProcess, RedisServer, DEADLINE};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");
const PUSH: &str = include_str!("../../lua/push_topic.lua");

/// How late a job may be when its announcement was lost to a cut the
/// server sees at once (a killed connection): the resubscribe backoff
/// (at most 500 ms), the rescan and a tick (PROTOCOL.md states it). The
/// slack is for a loaded test machine; the sweeps' periods (10 s, 60 s)
/// are far beyond it, so a server that waited for them fails.
const BOUND: f64 = 2.0;

fn keys() -> TopicKeys {
    TopicKeys::new("delayer:")
}

/// The one call a thin SDK makes for a push: push_topic.lua with the topic's
/// pool and bucket, the wake channel in ARGV[11].
fn push_cmd(sha: &str, topic: &str, id: &str, delay_ms: u64) -> redis::Cmd {
    let k = keys();
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(sha).arg(2).arg(k.pool(topic)).arg(format!("{}{id}", k.bucket_prefix(topic)));
    cmd.arg(id).arg(topic).arg(id).arg(delay_ms).arg(60_000);
    cmd.arg(&["", "", "", "", ""][..]).arg(k.wake()).arg(""); // no retry settings, policy "" (replace), the channel, no traceparent
    cmd
}

fn push(conn: &mut redis::Connection, sha: &str, topic: &str, id: &str, delay_ms: u64) -> f64 {
    let due: String = push_cmd(sha, topic, id, delay_ms).query(conn).expect("EVALSHA push_topic.lua");
    due.parse().expect("due")
}

/// The push, in one transaction after killing the server's subscription:
/// its announcement is published to no one.
fn push_while_cut(conn: &mut redis::Connection, sha: &str, topic: &str, id: &str, delay_ms: u64) -> f64 {
    let (_, due): (redis::Value, String) = redis::pipe()
        .atomic()
        .cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .add_command(push_cmd(sha, topic, id, delay_ms))
        .query(conn)
        .expect("MULTI kill + push");
    due.parse().expect("due")
}

/// Watches the topics' ready lists from another connection: the Redis time
/// each id was first seen there.
struct Watch {
    seen: std::thread::JoinHandle<HashMap<String, f64>>,
    done: Arc<AtomicBool>,
}

fn watch(redis: &RedisServer, topics: Vec<String>) -> Watch {
    let mut conn = redis.connection();
    let done = Arc::new(AtomicBool::new(false));
    let stop = done.clone();
    let seen = std::thread::spawn(move || {
        let mut seen = HashMap::new();
        let started = Instant::now();
        // One more read after `done`: the caller saw every job arrive.
        let mut last = false;
        while !last && started.elapsed() < DEADLINE {
            last = stop.load(Ordering::SeqCst);
            let mut read = redis::pipe();
            read.cmd("TIME");
            topics.iter().for_each(|t| {
                read.cmd("LRANGE").arg(keys().ready(t)).arg(0).arg(-1);
            });
            // TIME's reply is a list too: [seconds, microseconds], then each list.
            let lists: Vec<Vec<String>> = read.query(&mut conn).expect("read ready lists");
            let secs = |i: usize| lists[0][i].parse::<f64>().expect("TIME");
            let now = secs(0) + secs(1) / 1e6;
            for id in lists.into_iter().skip(1).flatten() {
                seen.entry(id).or_insert(now);
            }
            std::thread::sleep(Duration::from_millis(3));
        }
        seen
    });
    Watch { seen, done }
}

fn start(redis: &RedisServer) -> DelayerProcess {
    // debug: the log shows each rescan, for a failure's message.
    let server = DelayerProcess::start(BIN, &server_conf(redis.port(), 1000, "layout = topic\nlog_level = debug"));
    assert!(server.wait_for_output(|o| o.contains("listening for wake-ups")), "{}", server.output());
    server
}

/// Every job arrived, none before its due time, none later than [`BOUND`].
fn assert_on_time(dues: &HashMap<String, f64>, seen: &HashMap<String, f64>, server: &DelayerProcess) {
    for (id, due) in dues {
        let Some(at) = seen.get(id) else { panic!("{id} never arrived\n{}", server.output()) };
        assert!(*at >= *due, "{id} arrived {:.3} s before its due time", due - at);
        assert!(at - due <= BOUND, "{id} arrived {:.3} s late (bound {BOUND} s)\n{}", at - due, server.output());
    }
}

#[test]
fn script_pushed_jobs_arrive_within_the_bound_across_subscription_cuts() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(PUSH).query(&mut conn).expect("SCRIPT LOAD");
    let server = start(&redis);
    let topics: Vec<String> = (0..6).map(|i| format!("t{i}")).collect();
    let seen = watch(&redis, topics.clone());
    let mut dues = HashMap::new();
    for i in 0..36u64 {
        // Topics come new along the way (t4 and t5 first appear late), delays
        // 0..700 ms in a fixed spread, so announcements lower the heads.
        let topic = &topics[((i as usize * 7) % 6).min(i as usize / 4)];
        let (id, delay) = (format!("j{i}"), (i * 389) % 700);
        let due = match i % 6 {
            // Cut together with the push: this announcement is lost.
            0 => push_while_cut(&mut conn, &sha, topic, &id, delay),
            3 => {
                let _: redis::Value =
                    redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("pubsub").query(&mut conn).unwrap();
                push(&mut conn, &sha, topic, &id, delay)
            }
            _ => push(&mut conn, &sha, topic, &id, delay),
        };
        dues.insert(id, due);
        std::thread::sleep(Duration::from_millis(60));
    }
    let all = wait_until(DEADLINE, || {
        let n: usize = topics.iter().map(|t| conn.llen::<_, usize>(keys().ready(t)).unwrap_or(0)).sum();
        n == dues.len()
    });
    seen.done.store(true, Ordering::SeqCst);
    let seen = seen.seen.join().expect("watcher");
    assert!(all, "not every job arrived\n{}", server.output());
    assert_on_time(&dues, &seen, &server);
    // The server, not the pusher, made the topics known.
    let known: Vec<String> = conn.smembers(keys().topics()).expect("SMEMBERS");
    assert!(topics.iter().all(|t| known.contains(t)), "{known:?}");
}

#[test]
fn a_new_topic_pushed_while_the_subscription_is_down_is_found_by_the_rescan() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(PUSH).query(&mut conn).expect("SCRIPT LOAD");
    let server = start(&redis);
    // A later job of another topic keeps the server busy with nothing due.
    push(&mut conn, &sha, "old", "o1", 3_600_000);
    let seen = watch(&redis, vec!["fresh".into()]);
    let due = push_while_cut(&mut conn, &sha, "fresh", "f1", 300);
    let numsub: (String, u64) = redis::cmd("PUBSUB").arg("NUMSUB").arg(keys().wake()).query(&mut conn).expect("NUMSUB");
    assert!(
        wait_until(DEADLINE, || conn.llen::<_, u64>(keys().ready("fresh")).unwrap_or(0) == 1),
        "never arrived (subscribers right after the push: {})\n{}",
        numsub.1,
        server.output()
    );
    seen.done.store(true, Ordering::SeqCst);
    let seen = seen.seen.join().expect("watcher");
    assert_on_time(&HashMap::from([("f1".to_string(), due)]), &seen, &server);
    assert!(conn.sismember::<_, _, bool>(keys().topics(), "fresh").expect("SISMEMBER"), "{}", server.output());
    let pending: u64 = conn.zcard(keys().pool("old")).expect("ZCARD");
    assert_eq!(pending, 1, "the later job still waits");
}

/// Redis Cluster: a script's PUBLISH on any master reaches the server's one
/// subscription (every node hears every PUBLISH), and after a cut the
/// rescan scans every master. A long timer_interval: only an announcement,
/// or the rescan after a cut, makes these jobs on time.
#[test]
fn on_a_cluster_announcements_from_every_master_reach_the_server() {
    let cluster = testkit::cluster::Cluster::start();
    let conf = format!("[delayer]\ntimer_interval = 60000\nlayout = topic\n\n{}", cluster.redis_section());
    let server = DelayerProcess::start(BIN, &conf);
    assert!(server.wait_for_output(|o| o.contains("listening for wake-ups")), "{}", server.output());
    let topics: Vec<String> = (0..9).map(|i| format!("c{i}")).collect();
    let mut conns: Vec<redis::Connection> =
        topics.iter().map(|t| cluster.connection(cluster.master_for(&keys().pool(t)))).collect();
    let masters: std::collections::BTreeSet<u16> = topics.iter().map(|t| cluster.master_for(&keys().pool(t))).collect();
    assert!(masters.len() > 1, "the topics span several masters");
    let mut dues = HashMap::new();
    for (i, (topic, conn)) in topics.iter().zip(conns.iter_mut()).enumerate() {
        let sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(PUSH).query(conn).expect("SCRIPT LOAD");
        if i % 3 == 2 {
            // Cut on every node first: this announcement may be lost.
            for port in cluster.ports() {
                let _: redis::RedisResult<redis::Value> =
                    redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("pubsub").query(&mut cluster.connection(port));
            }
        }
        dues.insert(topic.clone(), push(conn, &sha, topic, topic, 300));
    }
    let mut seen: HashMap<String, f64> = HashMap::new();
    let started = Instant::now();
    while seen.len() < topics.len() && started.elapsed() < DEADLINE {
        for (topic, conn) in topics.iter().zip(conns.iter_mut()) {
            let (len, (s, us)): (u64, (u64, u64)) =
                redis::pipe().llen(keys().ready(topic)).cmd("TIME").query(conn).expect("LLEN");
            if len > 0 {
                seen.entry(topic.clone()).or_insert(s as f64 + us as f64 / 1e6);
            }
        }
        std::thread::sleep(Duration::from_millis(3));
    }
    assert_on_time(&dues, &seen, &server);
}

/// `<prefix>topics` of the wrong type refuses the server's SADD: said once,
/// naming the key, and the announced job is moved all the same (its index
/// entry is written beside the refused SADD).
#[test]
fn a_refused_index_write_is_said_once_and_moves_on() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let _: () = conn.set(keys().topics(), "not a set").expect("SET");
    let sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(PUSH).query(&mut conn).expect("SCRIPT LOAD");
    let server = start(&redis);
    let seen = watch(&redis, vec!["a".into(), "b".into()]);
    let dues = HashMap::from([
        ("a1".to_string(), push(&mut conn, &sha, "a", "a1", 200)),
        ("b1".to_string(), push(&mut conn, &sha, "b", "b1", 250)),
    ]);
    let arrived = wait_until(DEADLINE, || {
        conn.llen::<_, u64>(keys().ready("a")).unwrap_or(0) + conn.llen::<_, u64>(keys().ready("b")).unwrap_or(0) == 2
    });
    seen.done.store(true, Ordering::SeqCst);
    let seen = seen.seen.join().expect("watcher");
    assert!(arrived, "{}", server.output());
    assert_on_time(&dues, &seen, &server);
    let named = server.output().lines().filter(|l| l.contains("delayer:topics") && l.contains("WARN")).count();
    assert_eq!(named, 1, "{}", server.output());
    assert!(server.output().contains("delayer:topics"), "{}", server.output());
}

/// Announcements are input: topics that have no job (junk published on the
/// channel, or a job gone meanwhile) add nothing to the index, and a
/// malformed message is ignored; a real push published after them still
/// arrives on time.
#[test]
fn announced_topics_without_jobs_are_not_indexed() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(PUSH).query(&mut conn).expect("SCRIPT LOAD");
    let server = start(&redis);
    let (s, _): (u64, u64) = redis::cmd("TIME").query(&mut conn).expect("TIME");
    for i in 0..50 {
        let _: () = conn.publish(keys().wake(), format!("{s}.000 junk{i}")).expect("PUBLISH");
    }
    for junk in ["", "abc", "1e300 x", "12 {braced}"] {
        let _: () = conn.publish(keys().wake(), junk).expect("PUBLISH");
    }
    let seen = watch(&redis, vec!["real".into()]);
    let dues = HashMap::from([("r1".to_string(), push(&mut conn, &sha, "real", "r1", 200))]);
    let arrived = wait_until(DEADLINE, || conn.llen::<_, u64>(keys().ready("real")).unwrap_or(0) == 1);
    seen.done.store(true, Ordering::SeqCst);
    let seen = seen.seen.join().expect("watcher");
    assert!(arrived, "{}", server.output());
    assert_on_time(&dues, &seen, &server);
    let known: Vec<String> = conn.smembers(keys().topics()).expect("SMEMBERS");
    assert_eq!(known, ["real"], "{}", server.output());
    let indexed: Vec<String> = conn.zrange(keys().due(), 0, -1).expect("ZRANGE");
    assert!(indexed.iter().all(|t| t == "real"), "{indexed:?}");
    assert!(server.output().contains("ignored"), "the junk is said: {}", server.output());
}
