//! The at-least-once mode through the real `delayer` binary: reservations
//! that run out are delivered again, out of attempts they become dead
//! letters, and operators see and handle them with `delayer stats` and
//! `delayer dead`.

use delayer::{Backoff, Delayer, Job};
use redis::Commands;
use std::process::Command;
use std::time::Duration;
use testkit::{server_conf, wait_until, DelayerProcess, RedisServer, DEADLINE};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");

fn start_server(redis: &RedisServer) -> DelayerProcess {
    DelayerProcess::start(BIN, &server_conf(redis.port(), 100, ""))
}

/// Runs `delayer -c <server's conf> args...`; returns stdout, or panics with
/// what it printed when it fails.
fn delayer_cli(server: &DelayerProcess, args: &[&str]) -> String {
    let out =
        Command::new(BIN).arg("-c").arg(server.dir.join("delayer.conf")).args(args).output().expect("run delayer");
    assert!(out.status.success(), "delayer {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stats(server: &DelayerProcess) -> serde_json::Value {
    serde_json::from_str(&delayer_cli(server, &["stats", "--json"])).expect("stats JSON")
}

#[test]
fn a_reservation_that_runs_out_is_delivered_again() {
    let redis = RedisServer::start();
    let server = start_server(&redis);
    let d = Delayer::open(&redis.url()).expect("client");
    let fast = Backoff::fixed(Duration::from_millis(50));
    d.push_job(&Job::new("t", "j", Duration::ZERO).body("b").backoff(fast)).expect("push");

    let ttr = Duration::from_millis(400);
    let first = d.breserve("t", ttr, DEADLINE).expect("breserve").expect("delivered");
    assert_eq!(first.attempts, 1);
    let reserved = stats(&server);
    assert_eq!(reserved["reserved"], 1, "{reserved}");
    // The worker "dies": no ack. The server hands the job out again.
    let second = d.breserve("t", ttr, DEADLINE).expect("breserve").expect("delivered again");
    assert_eq!((second.id.as_str(), second.attempts), ("j", 2));
    assert_ne!(first.receipt, second.receipt);
    assert!(!d.ack(&first).expect("late ack"), "the first worker no longer holds it");
    assert!(d.ack(&second).expect("ack"));
    let mut conn = redis.connection();
    assert!(!conn.exists::<_, bool>("delayer:job_bucket:j").expect("exists"));
    assert!(server.wait_for_output(|o| o.contains("expired 1 reservation(s): retried=1")), "{}", server.output());
}

#[test]
fn out_of_attempts_jobs_become_dead_letters_that_operators_handle() {
    let redis = RedisServer::start();
    let server = start_server(&redis);
    let d = Delayer::open(&redis.url()).expect("client");
    let fast = Backoff::fixed(Duration::from_millis(50));
    for id in ["a", "b", "c"] {
        d.push_job(&Job::new("mail", id, Duration::ZERO).body(format!("body {id}")).max_attempts(2).backoff(fast))
            .expect("push");
    }
    // Every attempt runs out: two reservations each, then dead letters.
    let ttr = Duration::from_millis(200);
    let mut reservations = 0;
    let mut conn = redis.connection();
    let all_dead = wait_until(DEADLINE, || {
        while let Ok(Some(_)) = d.reserve("mail", ttr) {
            reservations += 1;
        }
        conn.llen::<_, u64>("delayer:dead:mail").unwrap_or(0) == 3
    });
    assert!(all_dead, "dead letters: {:?}", d.dead_letters("mail", 0, 10));
    assert_eq!(reservations, 6, "max_attempts 2 for 3 jobs");
    let s = stats(&server);
    assert_eq!((s["dead"]["mail"].as_u64(), s["reserved"].as_u64()), (Some(3), Some(0)), "{s}");
    // The per-topic table's row: scheduled, ready, reserved, dead.
    let text = delayer_cli(&server, &["stats"]);
    let row: Vec<&str> =
        text.lines().find(|l| l.split_whitespace().next() == Some("mail")).unwrap_or("").split_whitespace().collect();
    assert_eq!(row.last().copied(), Some("3"), "{text}");

    let listed: serde_json::Value =
        serde_json::from_str(&delayer_cli(&server, &["dead", "list", "mail", "--json"])).expect("JSON");
    let reasons: Vec<(&str, &str, u64)> = listed
        .as_array()
        .expect("list")
        .iter()
        .map(|e| {
            (e["id"].as_str().unwrap_or(""), e["reason"].as_str().unwrap_or(""), e["attempts"].as_u64().unwrap_or(0))
        })
        .collect();
    assert_eq!(reasons.len(), 3);
    assert!(reasons.iter().all(|(_, reason, attempts)| *reason == "max_attempts" && *attempts == 2), "{reasons:?}");

    assert!(delayer_cli(&server, &["dead", "purge", "mail", "a"]).contains("purged 1"));
    assert!(delayer_cli(&server, &["dead", "requeue", "mail", "--all"]).contains("re-queued 2"));
    // Re-queued jobs come back with their attempts reset.
    let again = d.breserve("mail", Duration::from_secs(30), DEADLINE).expect("breserve").expect("job");
    assert_eq!(again.attempts, 1);
    assert!(d.ack(&again).expect("ack"));
    assert!(!conn.exists::<_, bool>("delayer:job_bucket:a").expect("exists"), "purged for good");
}

#[test]
fn a_reserved_job_removed_or_pushed_again_is_left_alone_by_expiry() {
    let redis = RedisServer::start();
    let server = start_server(&redis);
    let d = Delayer::open(&redis.url()).expect("client");
    for id in ["removed", "repushed"] {
        d.push("t", id, Duration::ZERO).expect("push");
    }
    let ttr = Duration::from_millis(200);
    let one = d.breserve("t", ttr, DEADLINE).expect("breserve").expect("job");
    let two = d.breserve("t", ttr, DEADLINE).expect("breserve").expect("job");
    let (removed, repushed) = if one.id == "removed" { (one, two) } else { (two, one) };
    assert!(d.remove(&removed.id).expect("remove"));
    d.push("t", &repushed.id, Duration::from_secs(60)).expect("push again");

    let mut conn = redis.connection();
    assert!(wait_until(DEADLINE, || conn.zcard::<_, u64>("delayer:reserved").unwrap_or(1) == 0));
    assert!(!conn.exists::<_, bool>("delayer:job_bucket:removed").expect("exists"), "removed stays removed");
    let score: Option<f64> = conn.zscore("delayer:job_pool", "repushed").expect("zscore");
    let (now, _): (u64, u64) = redis::cmd("TIME").query(&mut conn).expect("TIME");
    let now = now as f64;
    assert!(score.is_some_and(|s| s > now + 50.0), "the new push keeps its own due time: {score:?}");
    assert!(!d.ack(&repushed).expect("ack"), "the old reservation is gone");
    assert!(server.wait_for_output(|o| o.contains("dropped=2") || o.contains("dropped=1")), "{}", server.output());
}

#[test]
fn an_expiry_that_cannot_be_written_parks_that_job_only() {
    let redis = RedisServer::start();
    let server = start_server(&redis);
    let d = Delayer::open(&redis.url()).expect("client");
    let mut conn = redis.connection();
    // Topic p's dead-letter list is not a list: p's job cannot die there.
    let _: () = conn.set("delayer:dead:p", "not a list").expect("set");
    d.push_job(&Job::new("p", "poison", Duration::ZERO).max_attempts(1)).expect("push");
    let ttr = Duration::from_millis(200);
    d.breserve("p", ttr, DEADLINE).expect("breserve").expect("poison");
    d.push_job(&Job::new("f", "fine", Duration::ZERO).max_attempts(1)).expect("push");
    d.breserve("f", ttr, DEADLINE).expect("breserve").expect("fine");

    // The first to expire is the poison; the one after it is still ended.
    let ended = wait_until(DEADLINE, || conn.zcard::<_, u64>("delayer:reserved").unwrap_or(1) == 0);
    assert!(ended, "expiry is stuck: {}", server.output());
    let dead: Vec<String> = conn.lrange("delayer:dead:f", 0, -1).expect("lrange");
    assert_eq!(dead, ["fine"]);
    let parked: Vec<String> = conn.lrange("delayer:malformed", 0, -1).expect("lrange");
    assert_eq!(parked, ["poison"]);
    assert!(conn.exists::<_, bool>("delayer:job_bucket:poison").expect("exists"), "its data is kept");
    let logged = server.wait_for_output(|o| o.contains("could not be ended") && o.contains("poison"));
    assert!(logged, "{}", server.output());
}
