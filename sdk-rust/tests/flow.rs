//! A paused topic (by `pause`, or its flow hash written by hand:
//! docs/design/flow-control.md) hands out nothing through pop,
//! reserve, reserve_many, bpop, breserve and both Workers in both modes;
//! waits block on the topic's gate and wake at a resume; nothing is lost
//! or reordered, and a paused consumer does not spin.

mod worker_kit;

use delayer::{Delayer, Job};
use std::thread;
use std::time::{Duration, Instant};
use testkit::{wait_until, RedisServer, DEADLINE};
use worker_kit::*;

const FLOW: &str = "delayer:flow:t";
const READY: &str = "delayer:ready_queue:t";

/// A pause written by hand, as an operator (or a test) may.
fn pause_by_hand(redis: &RedisServer) {
    let _: () = redis::cmd("HSET").arg(FLOW).arg("paused").arg("1.000").query(&mut redis.connection()).expect("HSET");
}

fn pause(redis: &RedisServer) {
    assert!(Delayer::open(&redis.url()).expect("client").pause("t").expect("pause"), "the topic was running");
}

fn resume(redis: &RedisServer) {
    assert!(Delayer::open(&redis.url()).expect("client").resume("t").expect("resume"), "the topic was paused");
}

fn ready_ids(redis: &RedisServer) -> Vec<String> {
    redis::cmd("LRANGE").arg(READY).arg(0).arg(-1).query(&mut redis.connection()).expect("LRANGE")
}

/// Script calls and blocking commands Redis has run (INFO commandstats).
fn calls(redis: &RedisServer) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(&mut redis.connection()).expect("INFO");
    let counted = ["evalsha", "eval", "brpop", "blmove", "brpoplpush"];
    info.lines()
        .filter(|l| counted.iter().any(|c| l.starts_with(&format!("cmdstat_{c}:"))))
        .filter_map(|l| l.split("calls=").nth(1)?.split(',').next()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn a_paused_topic_hands_out_nothing_and_keeps_its_ready_list_as_it_was() {
    let redis = RedisServer::start();
    ready(&redis, &jobs("t", "j", 3));
    pause_by_hand(&redis);
    let before = ready_ids(&redis);
    let d = Delayer::open(&redis.url()).expect("client");
    assert!(d.pop("t").expect("pop").is_none());
    assert!(d.reserve("t", Duration::from_secs(30)).expect("reserve").is_none());
    let (_, jobs) = d.reserve_many("t", Duration::from_secs(30), 10, &[]).expect("reserve_many");
    assert!(jobs.is_empty());
    let started = Instant::now();
    assert!(d.bpop("t", Duration::from_millis(600)).expect("bpop").is_none());
    assert!(d.breserve("t", Duration::from_secs(30), Duration::from_millis(600)).expect("breserve").is_none());
    assert!(started.elapsed() >= Duration::from_millis(1100), "each wait lasted its timeout");
    assert_eq!(ready_ids(&redis), before, "the same ids, in the same order");
    resume(&redis);
    assert_eq!(d.pop("t").expect("pop").expect("a job").id, "j0");
    assert_eq!(d.reserve("t", Duration::from_secs(30)).expect("reserve").expect("a job").id, "j1");
}

#[test]
fn bpop_and_breserve_wait_across_a_pause_and_wake_at_the_resume() {
    for reserve in [false, true] {
        let redis = RedisServer::start();
        pause(&redis);
        ready(&redis, &[Job::new("t", "x", Duration::ZERO)]);
        let url = redis.url();
        let waiter = thread::spawn(move || {
            let d = Delayer::open(&url).expect("client");
            let got = if reserve {
                d.breserve("t", Duration::from_secs(30), Duration::from_secs(30)).expect("breserve").map(|j| j.id)
            } else {
                d.bpop("t", Duration::from_secs(30)).expect("bpop").map(|m| m.id)
            };
            (got, Instant::now())
        });
        assert!(wait_until(DEADLINE, || blocked_on(&redis, "brpoplpush") == 1), "reserve {reserve}: on the gate");
        // Still paused a while later: the waiter stays on the gate, quietly.
        let before = calls(&redis);
        thread::sleep(Duration::from_millis(800));
        assert_eq!(blocked_on(&redis, "brpoplpush"), 1);
        assert!(calls(&redis) - before <= 2, "reserve {reserve}: no busy loop while paused");
        assert_eq!(ready_ids(&redis), ["x"]);
        let resumed = Instant::now();
        resume(&redis);
        let (got, at) = waiter.join().expect("waiter");
        assert_eq!(got.as_deref(), Some("x"), "reserve {reserve}");
        let woke = at.duration_since(resumed);
        assert!(woke < Duration::from_secs(2), "reserve {reserve}: woken by the gate, not the recheck: {woke:?}");
    }
}

#[test]
fn a_bpop_blocked_when_the_pause_lands_puts_the_id_back_and_waits_on_the_gate() {
    let redis = RedisServer::start();
    let url = redis.url();
    let waiter = thread::spawn(move || Delayer::open(&url).expect("client").bpop("t", Duration::from_secs(30)));
    assert!(wait_until(DEADLINE, || blocked_on(&redis, "brpop") == 1));
    pause(&redis);
    // The server makes a job ready: the blocked BRPOP takes it, take.lua
    // finds the topic paused and puts it back.
    ready(&redis, &[Job::new("t", "y", Duration::ZERO)]);
    assert!(wait_until(DEADLINE, || blocked_on(&redis, "brpoplpush") == 1), "the wait moved to the gate");
    assert_eq!(ready_ids(&redis), ["y"], "nothing handed out, nothing lost");
    assert!(Delayer::open(&redis.url()).expect("client").pop("t").expect("pop").is_none());
    resume(&redis);
    let got = waiter.join().expect("waiter").expect("bpop").expect("the job");
    assert_eq!((got.id.as_str(), got.body.as_slice()), ("y", &b""[..]));
}

#[test]
fn workers_start_nothing_while_paused_and_everything_once_after() {
    for kind in KINDS {
        for at_most_once in [false, true] {
            let what = format!("{kind:?}, at most once {at_most_once}");
            let redis = RedisServer::start();
            pause(&redis);
            ready(&redis, &jobs("t", "w", 20));
            let opts = Options { at_most_once, ..Options::default() };
            let w = start(kind, &redis.url(), opts, behaviour(|_| Plan::default()));
            assert!(wait_until(DEADLINE, || blocked_on(&redis, "brpoplpush") == 1), "{what}: waits on the gate");
            let before = calls(&redis);
            thread::sleep(Duration::from_secs(2));
            assert_eq!(w.count("started"), 0, "{what}: {:?}", w.events());
            let spent = calls(&redis) - before;
            assert!(spent <= 8, "{what}: {spent} calls in 2 s while paused");
            assert_eq!(ready_ids(&redis).len(), 20);
            resume(&redis);
            assert!(w.wait_for("succeeded", 20), "{what}: {:?}", w.events());
            assert_eq!(w.count("started"), 20, "{what}: each once");
            if !at_most_once {
                assert!(w.wait_for("acked", 20), "{what}");
            }
        }
    }
}

#[test]
fn pause_resume_and_flow_say_what_changed_in_both_layouts() {
    use delayer::Layout;
    let redis = RedisServer::start();
    for layout in [Layout::Classic, Layout::Topic] {
        let d = Delayer::open(&redis.url()).expect("client").with_prefix("api:").with_layout(layout).expect("layout");
        assert!(!d.is_paused("t").expect("is_paused"));
        assert!(!d.resume("t").expect("resume"), "a running topic: nothing to resume");
        let mut conn = redis.connection();
        let flow_key = if layout == Layout::Topic { "api:{t}:flow" } else { "api:flow:t" };
        let exists: bool = redis::cmd("EXISTS").arg(flow_key).query(&mut conn).expect("EXISTS");
        assert!(!exists, "a resume of a running topic writes nothing");
        d.push("t", "due", Duration::ZERO).expect("push");
        assert!(d.pause("t").expect("pause"));
        assert!(!d.pause("t").expect("pause again"), "already paused");
        assert!(d.is_paused("t").expect("is_paused"));
        let state = d.flow("t").expect("flow");
        assert!(state.paused_since.is_some_and(|s| s <= state.at));
        if layout == Layout::Topic {
            assert_eq!(state.held, 1, "its due job, held in its pool");
        } else {
            // The classic server sets due jobs aside; here by hand.
            let listed: bool =
                redis::cmd("SISMEMBER").arg("api:flow_topics").arg("t").query(&mut conn).expect("SISMEMBER");
            assert!(listed, "a classic pause lists the topic for the server");
            let _: () = redis::cmd("ZADD").arg("api:flow_pool:t").arg(1).arg("x").query(&mut conn).expect("ZADD");
            assert_eq!(d.flow("t").expect("flow").held, 1);
        }
        let mut sub = redis.connection();
        let mut pubsub = sub.as_pubsub();
        pubsub.subscribe("api:wake").expect("SUBSCRIBE");
        pubsub.set_read_timeout(Some(DEADLINE)).expect("timeout");
        assert!(d.resume("t").expect("resume"));
        let said: String = pubsub.get_message().expect("the resume's announcement").get_payload().expect("text");
        assert!(said.ends_with(" t"), "{said:?}");
        assert!(!d.is_paused("t").expect("is_paused"));
        assert_eq!(d.flow("t").expect("flow").paused_since, None);
    }
}

#[test]
fn a_flow_hash_of_the_wrong_type_is_an_error_naming_it() {
    let redis = RedisServer::start();
    let _: () = redis::cmd("SET").arg(FLOW).arg("junk").query(&mut redis.connection()).expect("SET");
    let d = Delayer::open(&redis.url()).expect("client");
    for result in [d.pause("t"), d.resume("t"), d.is_paused("t")] {
        let err = result.expect_err("a string is no flow hash").to_string();
        assert!(err.contains(FLOW), "{err}");
    }
    let kind: String = redis::cmd("TYPE").arg(FLOW).query(&mut redis.connection()).expect("TYPE");
    assert_eq!(kind, "string", "nothing written");
}

#[test]
fn pause_and_resume_work_in_a_redis_out_of_memory() {
    // Each call's first write is a removal (DEL gate, HDEL paused): Redis
    // checks memory only at a script's first write, so a full Redis still
    // takes a pause (to hold a topic while memory is being freed, say).
    let redis = RedisServer::start();
    let d = Delayer::open(&redis.url()).expect("client");
    d.push("t", "j", Duration::from_secs(60)).expect("push");
    let mut conn = redis.connection();
    let _: () = redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg(1).query(&mut conn).expect("maxmemory");
    let refused = d.push("t", "k", Duration::from_secs(60)).expect_err("a push is refused: Redis is full");
    assert!(refused.to_string().contains("OOM"), "{refused}");
    assert!(d.pause("t").expect("pause"));
    assert!(d.is_paused("t").expect("is_paused"));
    assert!(d.resume("t").expect("resume"));
    let _: () = redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg(0).query(&mut conn).expect("maxmemory");
}
