//! `[redis] mode = cluster`: the real server and the Rust SDK (blocking and
//! async) on a local 6-node Redis Cluster (3 masters, 3 replicas), topics
//! spread over every master; then a master killed with SIGKILL mid-run, its
//! replica taking over, and the same server and clients carrying on.

use delayer::{Delayer, Job};
use delayer_protocol::keys::TopicKeys;
use redis::Commands;
use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};
use testkit::cluster::Cluster;
use testkit::{temp_dir, wait_until, DelayerProcess, DEADLINE};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");

fn conf(cluster: &Cluster) -> String {
    format!("[delayer]\ntimer_interval = 100\nlayout = topic\n\n{}", cluster.redis_section())
}

fn unix(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH).expect("clock").as_secs_f64()
}

fn now() -> f64 {
    unix(SystemTime::now())
}

#[test]
fn every_call_runs_on_a_cluster_and_carries_on_after_a_master_dies() {
    let mut cluster = Cluster::start();
    let dir = temp_dir("cluster-sdk");
    let path = dir.join("delayer.conf");
    std::fs::write(&path, conf(&cluster)).expect("conf");
    let server = DelayerProcess::start(BIN, &conf(&cluster));
    assert!(server.wait_for_output(|o| o.contains("layout topic")), "{}", server.output());
    let d = Delayer::from_conf(&path).expect("a cluster client");
    let keys = TopicKeys::new("delayer:");

    // Topics over every master.
    let topics: Vec<String> = (0..12).map(|i| format!("t{i}")).collect();
    let masters: BTreeSet<u16> = topics.iter().map(|t| cluster.master_for(&keys.pool(t))).collect();
    assert_eq!(masters.len(), 3, "the topics land on every master");

    // push, then bpop after the due time, never before.
    let mut due = Vec::new();
    for t in &topics {
        due.push(d.push_job(&Job::new(t, "1", Duration::from_millis(300)).body(t.as_str())).expect("push"));
    }
    for (t, due) in topics.iter().zip(&due) {
        let job = d
            .bpop(t, Duration::from_secs(20))
            .expect("bpop")
            .unwrap_or_else(|| panic!("{t}: nothing\n{}", server.output()));
        assert_eq!(job.body_str(), Some(t.as_str()));
        assert!(now() + 0.05 >= unix(*due), "{t} delivered before its due time");
    }
    // push_many over every topic, then stats see them all.
    let jobs: Vec<Job> =
        (0..600).map(|i| Job::new(&topics[i % 12], format!("m{i}"), Duration::from_secs(600))).collect();
    assert_eq!(d.push_many(&jobs).expect("push_many").len(), 600);
    let stats = d.stats().expect("stats");
    assert_eq!((stats.scheduled_total, stats.topics.len()), (600, 12), "{stats:?}");
    assert_eq!(d.job("t3", "m3").expect("lookup").state, delayer::inspect::JobState::Scheduled);
    // The operator commands reach every master's topics (they once went to
    // the first seed only: MOVED for the others).
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(BIN)
            .arg("-c")
            .arg(&path)
            .args(args)
            .env_remove("DELAYER_URL")
            .output()
            .expect("run delayer");
        assert!(out.status.success(), "delayer {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let cli_stats: serde_json::Value = serde_json::from_str(&cli(&["stats", "--json"])).expect("stats --json");
    assert_eq!(cli_stats["topics"].as_array().map(Vec::len), Some(12), "{cli_stats}");
    for (i, t) in topics.iter().enumerate().skip(5) {
        let job: serde_json::Value = serde_json::from_str(&cli(&["job", t, &format!("m{i}"), "--json"])).expect("json");
        assert_eq!(job["state"], "scheduled", "{t}: {job}");
    }
    assert!(cli(&["reschedule", "t5", "m5", "1h"]).contains("is due"));
    assert!(cli(&["remove", "t6", "m6"]).contains("removed"));
    assert!(cli(&["dead", "list", "t8"]).contains("t8"));
    let migrate = std::process::Command::new(BIN).arg("-c").arg(&path).args(["migrate", "--to", "topic"]).output();
    let migrate = migrate.expect("run delayer");
    assert_eq!(migrate.status.code(), Some(2), "a usage error: {}", String::from_utf8_lossy(&migrate.stderr));
    assert!(String::from_utf8_lossy(&migrate.stderr).contains("a cluster has the per-topic layout only"));
    assert!(d.remove_in("t3", "m3").expect("remove"));
    assert!(d.reschedule_in("t4", "m4", Duration::ZERO).expect("reschedule").is_some());
    let reserved = d.breserve("t4", Duration::from_secs(30), Duration::from_secs(20)).expect("breserve").expect("m4");
    assert_eq!(reserved.id, "m4");
    assert!(d.release(&reserved, Some(Duration::ZERO)).expect("release"));
    let again = d.breserve("t4", Duration::from_secs(30), Duration::from_secs(20)).expect("breserve").expect("again");
    assert_eq!(again.attempts, 2);
    assert!(d.ack(&again).expect("ack"));

    // Durable pushes wait on the node they wrote to only: with one master's
    // replica stopped, that master's topics are not replicated in time and
    // every other topic's durable pushes carry on (a WAIT sent to every
    // master once failed them all).
    let stalled_master = cluster.master_for(&keys.pool("t0"));
    let replica = cluster.replica_of(stalled_master).expect("a replica");
    let replica_pid = cluster.pids()[cluster.ports().iter().position(|p| *p == replica).expect("ours")];
    let elsewhere = topics.iter().find(|t| cluster.master_for(&keys.pool(t)) != stalled_master).expect("a topic");
    let signal = |name: &str| {
        let ok = std::process::Command::new("kill").arg(format!("-{name}")).arg(replica_pid.to_string()).status();
        assert!(ok.is_ok_and(|s| s.success()), "kill -{name} {replica_pid}");
    };
    let durable = d.durable(Duration::from_millis(500));
    signal("STOP");
    let stalled = durable.push("t0", "durable-stalled", Duration::from_secs(600));
    let other = durable.push(elsewhere, "durable-ok", Duration::from_secs(600));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let other_async = rt.block_on(async {
        let a = delayer::aio::Delayer::from_conf(&path).expect("an async cluster client");
        a.durable(Duration::from_millis(500)).push(elsewhere, "durable-async", Duration::from_secs(600)).await
    });
    signal("CONT");
    assert!(matches!(stalled, Err(delayer::Error::NotReplicated(_))), "t0's replica is stopped: {stalled:?}");
    assert!(other.is_ok(), "{elsewhere} is on another master: {other:?}");
    assert!(other_async.is_ok(), "async, {elsewhere}: {other_async:?}");

    // The async client.
    rt.block_on(async {
        let a = delayer::aio::Delayer::from_conf(&path).expect("an async cluster client");
        a.push_job(&Job::new("t7", "async", Duration::from_millis(100)).body("hi")).await.expect("push");
        let job = a.breserve("t7", Duration::from_secs(30), Duration::from_secs(20)).await.expect("breserve");
        let job = job.expect("the async job");
        assert_eq!(job.body_str(), Some("hi"));
        assert!(a.ack(&job).await.expect("ack"));
        assert_eq!(a.stats().await.expect("stats").topics.len(), 12);
    });

    // The index is a hint: with `<prefix>due` of another type, pushes and a
    // reserve answer their scripts' results (on a cluster the index write
    // goes command by command, apart from the script).
    let hint = TopicKeys::new("hint:");
    let _: () = cluster.connection(cluster.master_for(&hint.due())).set(hint.due(), "x").expect("SET");
    let hinted = d.clone().with_prefix("hint:");
    hinted.push("t1", "h", Duration::ZERO).expect("push, the index key of another type");
    let async_push = rt.block_on(async {
        let a = delayer::aio::Delayer::from_conf(&path).expect("an async cluster client").with_prefix("hint:");
        a.push_job(&Job::new("t1", "h2", Duration::from_secs(600))).await
    });
    assert!(async_push.is_ok(), "async push: {async_push:?}");
    let mut node = cluster.connection(cluster.master_for(&hint.pool("t1")));
    assert_eq!(node.zrem::<_, _, i64>(hint.pool("t1"), "h").expect("ZREM"), 1, "h waits in its pool");
    let _: () = node.lpush(hint.ready("t1"), "h").expect("LPUSH");
    let job = hinted.reserve("t1", Duration::from_secs(30)).expect("reserve").expect("h, reserved");
    assert_eq!(job.id, "h");

    // A master dies: its replica takes over, and the same clients and
    // server carry on (a call cut by the failover may fail: retried).
    let victim =
        topics.iter().find(|t| cluster.master_for(&keys.pool(t)) == cluster.master_for(&keys.pool("t0"))).cloned();
    let victim = victim.expect("a topic");
    let (killed, promoted) = cluster.kill_master(Some(&keys.pool(&victim)));
    assert_ne!(killed, promoted);
    let mut pushed_after = false;
    let ok = wait_until(DEADLINE, || {
        if !pushed_after {
            pushed_after = d.push(&victim, "after", Duration::ZERO).is_ok();
        }
        pushed_after && matches!(d.pop(&victim), Ok(Some(job)) if job.id == "after")
    });
    assert!(ok, "no push and pop on {victim} after the failover\n{}", server.output());
    let mut conn =
        redis::Client::open(format!("redis://127.0.0.1:{promoted}/")).expect("client").get_connection().expect("conn");
    let left: u64 = conn.zcard(keys.pool(&victim)).expect("ZCARD on the new master");
    assert!(left > 0, "the topic's waiting jobs are on the promoted replica");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn cluster_mode_on_a_redis_without_cluster_support_is_a_config_error() {
    let redis = testkit::RedisServer::start();
    let dir = temp_dir("not-a-cluster");
    let path = dir.join("delayer.conf");
    let text = format!("[delayer]\nlayout = topic\n\n[redis]\nmode = cluster\nnodes = 127.0.0.1:{}\n", redis.port());
    std::fs::write(&path, text).expect("conf");
    let mut child = std::process::Command::new(BIN)
        .arg("-c")
        .arg(&path)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.join("err.log")).expect("err.log"))
        .spawn()
        .expect("run delayer");
    let status = testkit::wait_child(&mut child, DEADLINE);
    let stderr = std::fs::read_to_string(dir.join("err.log")).unwrap_or_default();
    assert_eq!(status.and_then(|s| s.code()), Some(2), "a config error, not a wait for Redis: {stderr}");
    assert!(stderr.contains("cluster support disabled") && stderr.contains("mode = standalone"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}
