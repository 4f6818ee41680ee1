//! The Workers (threads and tokio), each behaviour checked on both kinds
//! against a real redis-server: acks in batches, failures released with
//! their error, dead letters, touches and extend, at most once, graceful
//! stop, a Redis restart, fairness across topics, waiting in breserve.

mod worker_kit;

use delayer::{Backoff, Error, Job};
use std::time::Duration;
use testkit::{wait_until, RedisServer, DEADLINE};
use worker_kit::*;

fn ok() -> Behaviour {
    behaviour(|_| Plan::default())
}

fn script_calls(redis: &RedisServer) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(&mut redis.connection()).expect("INFO");
    info.lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| l.split("calls=").nth(1)?.split(',').next()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn acks_what_succeeds_with_the_next_fetch_in_few_script_calls() {
    for kind in KINDS {
        let redis = RedisServer::start();
        ready(&redis, &jobs("t", "j", 300));
        let before = script_calls(&redis);
        let w = start(kind, &redis.url(), Options { concurrency: 20, ..Options::default() }, ok());
        assert!(w.wait_for("acked", 300), "{kind:?}: {:?}", w.events().iter().rev().take(5).collect::<Vec<_>>());
        assert!((0..300).all(|i| !exists(&redis, &format!("j{i}"))), "{kind:?}: every job deleted");
        assert_eq!(w.count("notheld"), 0);
        // One reserve.lua call acks the finished jobs and takes the next
        // batch: far fewer calls than two per job.
        let calls = script_calls(&redis) - before;
        assert!(calls < 150, "{kind:?}: {calls} script calls for 300 jobs");
    }
}

#[test]
fn a_failing_handler_releases_with_its_backoff_and_error_then_dead_letters() {
    for kind in KINDS {
        let redis = RedisServer::start();
        let fast = Backoff::fixed(Duration::from_secs(60));
        ready(&redis, &[Job::new("t", "f1", Duration::ZERO).max_attempts(2).backoff(fast)]);
        let plan = behaviour(|d| Plan { fail: Some(format!("bad order in {}", d.id)), ..Plan::default() });
        let w = start(kind, &redis.url(), Options::default(), plan);
        assert!(w.wait_for("failed f1: bad order in f1", 1));
        assert!(wait_until(DEADLINE, || score(&redis, "delayer:job_pool", "f1").is_some()), "{kind:?}: retried later");
        let due = score(&redis, "delayer:job_pool", "f1").expect("due");
        assert!(due > now_secs() + 30.0, "{kind:?}: after its 60 s backoff, not at once: {due}");
        assert_eq!(field(&redis, "f1", "last_error").as_deref(), Some("bad order in f1"));
        assert_eq!(field(&redis, "f1", "attempts").as_deref(), Some("1"));

        // Its last attempt fails: a dead letter that says why.
        let _: () = redis::cmd("ZREM").arg("delayer:job_pool").arg("f1").query(&mut redis.connection()).expect("zrem");
        let _: () =
            redis::cmd("LPUSH").arg("delayer:ready_queue:t").arg("f1").query(&mut redis.connection()).expect("lpush");
        let d = delayer::Delayer::open(&redis.url()).expect("client");
        assert!(wait_until(DEADLINE, || d.dead_letters("t", 0, 10).expect("dead").iter().any(|l| l.id == "f1")));
        let letter = d.dead_letters("t", 0, 10).expect("dead").remove(0);
        assert_eq!((letter.reason.as_str(), letter.attempts), ("max_attempts", 2), "{kind:?}");
        assert_eq!(field(&redis, "f1", "last_error").as_deref(), Some("bad order in f1"));
    }
}

#[test]
fn a_panicking_handler_is_a_failure_and_the_worker_carries_on() {
    for kind in KINDS {
        let redis = RedisServer::start();
        ready(&redis, &[Job::new("t", "p1", Duration::ZERO).max_attempts(1), Job::new("t", "p2", Duration::ZERO)]);
        let plan = behaviour(|d| Plan { panic: d.id == "p1", ..Plan::default() });
        let w = start(kind, &redis.url(), Options { concurrency: 1, ..Options::default() }, plan);
        assert!(w.wait_for("acked p2", 1), "{kind:?}: {:?}", w.events());
        let d = delayer::Delayer::open(&redis.url()).expect("client");
        assert!(wait_until(DEADLINE, || !d.dead_letters("t", 0, 10).expect("dead").is_empty()));
        let error = field(&redis, "p1", "last_error").unwrap_or_default();
        assert!(error.starts_with("handler panicked: boom"), "{kind:?}: {error}");
    }
}

#[test]
fn a_long_handler_is_touched_and_can_extend_its_reservation() {
    for kind in KINDS {
        let redis = RedisServer::start();
        ready(&redis, &[Job::new("t", "long", Duration::ZERO), Job::new("t", "ext", Duration::ZERO)]);
        let plan = behaviour(|d| match d.id.as_str() {
            "long" => Plan { sleep: Duration::from_millis(3000), ..Plan::default() },
            _ => Plan { extend: Some(Duration::from_secs(600)), sleep: Duration::from_millis(1500), ..Plan::default() },
        });
        let opts = Options { ttr: Duration::from_secs(1), ..Options::default() };
        let w = start(kind, &redis.url(), opts, plan);
        assert!(wait_until(DEADLINE, || score(&redis, "delayer:reserved", "long").is_some()));
        let first = score(&redis, "delayer:reserved", "long").expect("deadline");
        // Past half its 1 s ttr, the worker touches it: the deadline moves.
        assert!(
            wait_until(DEADLINE, || score(&redis, "delayer:reserved", "long").is_some_and(|s| s > first + 0.4)),
            "{kind:?}: never touched: {:?}",
            w.events()
        );
        // The handler's own extend: 600 s from now.
        assert!(
            wait_until(DEADLINE, || score(&redis, "delayer:reserved", "ext").is_some_and(|s| s > now_secs() + 300.0)),
            "{kind:?}: not extended"
        );
        assert!(w.wait_for("acked", 2), "{kind:?}: {:?}", w.events());
        assert_eq!(w.count("notheld"), 0, "{kind:?}: the reservations were held throughout");
        assert!(w.count("touched long") >= 1, "{kind:?}: {:?}", w.events());
    }
}

#[test]
fn at_most_once_pops_and_never_retries_a_failure() {
    for kind in KINDS {
        let redis = RedisServer::start();
        ready(&redis, &[Job::new("t", "m1", Duration::ZERO), Job::new("t", "m2", Duration::ZERO)]);
        let plan = behaviour(|d| Plan { fail: (d.id == "m1").then(|| "no".to_string()), ..Plan::default() });
        let w = start(kind, &redis.url(), Options { at_most_once: true, ..Options::default() }, plan);
        assert!(w.wait_for("failed m1", 1) && w.wait_for("succeeded m2", 1), "{kind:?}: {:?}", w.events());
        assert!(!exists(&redis, "m1") && !exists(&redis, "m2"), "{kind:?}: popped jobs are gone");
        assert_eq!(score(&redis, "delayer:job_pool", "m1"), None, "{kind:?}: no retry");
        assert_eq!(w.count("acked"), 0);
    }
}

#[test]
fn a_stop_lets_running_handlers_finish_within_the_grace_period() {
    for kind in KINDS {
        let redis = RedisServer::start();
        ready(&redis, &[Job::new("t", "g1", Duration::ZERO)]);
        let plan = behaviour(|_| Plan { sleep: Duration::from_millis(800), ..Plan::default() });
        let mut w = start(kind, &redis.url(), Options::default(), plan);
        assert!(w.wait_for("started g1", 1));
        w.stop();
        let ended = w.join(DEADLINE).expect("run returned");
        assert!(ended.is_ok(), "{kind:?}: {ended:?}");
        assert!(!exists(&redis, "g1"), "{kind:?}: finished and acked before run returned");
        let events = w.events();
        assert_eq!(events.last().map(String::as_str), Some("stopped"), "{kind:?}: {events:?}");
        assert!(events.contains(&"acked g1".to_string()));
    }
}

#[test]
fn a_job_that_comes_after_the_stop_is_left_for_other_workers() {
    for kind in KINDS {
        let redis = RedisServer::start();
        ready(&redis, &[Job::new("t", "busy", Duration::ZERO)]);
        let plan = behaviour(|_| Plan { sleep: Duration::from_millis(1500), ..Plan::default() });
        let mut w = start(kind, &redis.url(), Options::default(), plan);
        assert!(w.wait_for("started busy", 1));
        // A free slot and an empty queue: the worker waits for a job.
        assert!(wait_until(DEADLINE, || blocked_on(&redis, "blmove") > 0), "{kind:?}");
        w.stop();
        assert!(w.wait_for("stopping", 1));
        ready(&redis, &[Job::new("t", "late", Duration::ZERO)]);
        assert!(w.join(DEADLINE).expect("run returned").is_ok());
        let events = w.events();
        assert!(!events.iter().any(|e| e.ends_with(" late")), "{kind:?}: the late job was taken: {events:?}");
        assert!(events.contains(&"acked busy".to_string()), "{kind:?}: {events:?}");
        let queued: Vec<String> = redis::cmd("LRANGE")
            .arg("delayer:ready_queue:t")
            .arg(0)
            .arg(-1)
            .query(&mut redis.connection())
            .expect("lrange");
        assert_eq!(queued, ["late"], "{kind:?}: still ready, not reserved");
        assert_eq!(field(&redis, "late", "attempts"), None, "{kind:?}: never reserved");
    }
}

#[test]
fn a_stop_releases_what_is_still_running_when_the_grace_period_ends() {
    for kind in KINDS {
        let redis = RedisServer::start();
        ready(&redis, &[Job::new("t", "s1", Duration::ZERO)]);
        let plan = behaviour(|_| Plan { sleep: Duration::from_secs(20), ..Plan::default() });
        let opts = Options { grace: Duration::from_millis(300), ..Options::default() };
        let mut w = start(kind, &redis.url(), opts, plan);
        assert!(w.wait_for("started s1", 1));
        w.stop();
        assert!(w.join(Duration::from_secs(10)).expect("run returned within the grace period").is_ok());
        assert!(w.events().contains(&"released_at_stop s1".to_string()));
        let due = score(&redis, "delayer:job_pool", "s1").expect("back in the pool");
        assert!(due < now_secs() + 5.0, "{kind:?}: due at once, not after a backoff");
        assert_eq!(
            field(&redis, "s1", "last_error").as_deref(),
            Some("WorkerStopped: the worker stopped before the handler finished")
        );
        assert_eq!(score(&redis, "delayer:reserved", "s1"), None);
    }
}

#[test]
fn the_worker_rides_out_a_redis_restart() {
    for kind in KINDS {
        let mut redis = RedisServer::start();
        ready(&redis, &jobs("t", "a", 5));
        let w = start(kind, &redis.url(), Options::default(), ok());
        assert!(w.wait_for("acked", 5));
        assert!(wait_until(DEADLINE, || blocked_on(&redis, "blmove") > 0), "{kind:?}: waiting in breserve");
        redis.restart();
        ready(&redis, &jobs("t", "b", 5));
        assert!(w.wait_for("acked b", 5), "{kind:?}: {:?}", w.events());
        assert!((0..5).all(|i| !exists(&redis, &format!("b{i}"))));
    }
}

#[test]
fn a_lost_connection_is_retried_with_backoff_and_reported() {
    for kind in KINDS {
        let mut redis = RedisServer::start();
        let w = start(kind, &redis.url(), Options::default(), ok());
        assert!(wait_until(DEADLINE, || blocked_on(&redis, "blmove") > 0));
        redis.stop();
        assert!(w.wait_for("connection_lost", 2), "{kind:?}: {:?}", w.events());
        redis.restart();
        assert!(w.wait_for("reconnected", 1), "{kind:?}: {:?}", w.events());
        ready(&redis, &jobs("t", "c", 3));
        assert!(w.wait_for("acked c", 3), "{kind:?}: {:?}", w.events());
    }
}

/// A Redis that may evict keys (and jobs with them) is reported at start
/// and again after every reconnect; one that never evicts is not.
#[test]
fn an_evicting_redis_is_reported_at_start_and_after_a_reconnect() {
    for kind in KINDS {
        let mut redis = RedisServer::start_with(&["--save", "", "--maxmemory-policy", "volatile-lru"]);
        let w = start(kind, &redis.url(), Options::default(), ok());
        assert!(w.wait_for("unsafe_eviction volatile-lru", 1), "{kind:?}: {:?}", w.events());
        assert!(wait_until(DEADLINE, || blocked_on(&redis, "blmove") > 0));
        redis.stop();
        assert!(w.wait_for("connection_lost", 1), "{kind:?}: {:?}", w.events());
        redis.restart();
        assert!(w.wait_for("reconnected", 1), "{kind:?}: {:?}", w.events());
        assert!(w.wait_for("unsafe_eviction volatile-lru", 2), "{kind:?}: {:?}", w.events());
        let safe = RedisServer::start();
        ready(&safe, &jobs("t", "s", 1));
        let quiet = start(kind, &safe.url(), Options::default(), ok());
        assert!(quiet.wait_for("acked s", 1), "{kind:?}: {:?}", quiet.events());
        assert_eq!(quiet.count("unsafe_eviction"), 0, "{kind:?}: {:?}", quiet.events());
    }
}

#[test]
fn a_redis_that_cannot_serve_yet_is_waited_out() {
    for kind in KINDS {
        let redis = RedisServer::start();
        ready(&redis, &jobs("t", "r", 3));
        // A replica of a master that is not there: it keeps its data, and
        // refuses writes with READONLY, as during a failover.
        let nobody = testkit::free_port();
        let replica = |on: bool| {
            let mut cmd = redis::cmd("REPLICAOF");
            if on {
                cmd.arg("127.0.0.1").arg(nobody)
            } else {
                cmd.arg("NO").arg("ONE")
            };
            cmd.query::<()>(&mut redis.connection()).expect("REPLICAOF");
        };
        replica(true);
        let mut w = start(kind, &redis.url(), Options::default(), ok());
        assert!(w.wait_for("connection_lost", 2), "{kind:?}: {:?}", w.events());
        assert!(w.join(Duration::from_millis(300)).is_none(), "{kind:?}: run gave up: {:?}", w.events());
        replica(false);
        assert!(w.wait_for("acked r", 3), "{kind:?}: {:?}", w.events());
    }
}

#[test]
fn topics_take_turns() {
    for kind in KINDS {
        let redis = RedisServer::start();
        ready(&redis, &jobs("a", "a", 200));
        ready(&redis, &jobs("b", "b", 10));
        let plan = behaviour(|_| Plan { sleep: Duration::from_millis(5), ..Plan::default() });
        let opts = Options { topics: vec!["a", "b"], concurrency: 2, ..Options::default() };
        let w = start(kind, &redis.url(), opts, plan);
        assert!(w.wait_for("succeeded b", 10), "{kind:?}");
        let done: Vec<String> = w.events().into_iter().filter(|e| e.starts_with("succeeded")).collect();
        let a_before = done.iter().filter(|e| e.starts_with("succeeded a")).count();
        assert!(a_before < 60, "{kind:?}: topic b waited for {a_before} jobs of a");
    }
}

#[test]
fn an_idle_worker_waits_in_breserve_and_wakes_for_a_job() {
    for kind in KINDS {
        let redis = RedisServer::start();
        let w = start(kind, &redis.url(), Options::default(), ok());
        assert!(wait_until(DEADLINE, || blocked_on(&redis, "blmove") > 0), "{kind:?}");
        ready(&redis, &[Job::new("t", "late", Duration::ZERO)]);
        assert!(w.wait_for("acked late", 1), "{kind:?}");
    }
}

#[test]
fn bad_settings_end_run_with_the_error_and_a_reply_error_is_reported_and_tried_again() {
    for kind in KINDS {
        let redis = RedisServer::start();
        let mut w = start(kind, &redis.url(), Options { concurrency: 0, ..Options::default() }, ok());
        let ended = w.join(DEADLINE).expect("returned");
        assert!(matches!(ended, Err(Error::InvalidArgument(ref m)) if m.contains("concurrency")), "{ended:?}");
        let mut w = start(kind, &redis.url(), Options { topics: vec![], ..Options::default() }, ok());
        assert!(matches!(w.join(DEADLINE).expect("returned"), Err(Error::InvalidArgument(_))));

        // A ready queue that is not a list: Redis refuses; the worker says
        // so and tries again after its backoff, as every SDK's Worker does,
        // and works once the key is fixed.
        let _: () =
            redis::cmd("SET").arg("delayer:ready_queue:t").arg("x").query(&mut redis.connection()).expect("set");
        let mut w = start(kind, &redis.url(), Options::default(), ok());
        let refused = || w.events().iter().filter(|e| e.starts_with("error") && e.contains("WRONGTYPE")).count();
        assert!(wait_until(DEADLINE, || refused() >= 2), "{kind:?}: {:?}", w.events());
        let _: () = redis::cmd("DEL").arg("delayer:ready_queue:t").query(&mut redis.connection()).expect("del");
        ready(&redis, &[Job::new("t", "fixed", Duration::ZERO)]);
        assert!(w.wait_for("acked fixed", 1), "{kind:?}: {:?}", w.events());
        w.stop();
        assert!(w.join(DEADLINE).expect("returned").is_ok(), "{kind:?}");
    }
}
