//! Trace context across the delay: a traceparent given at push reaches
//! every consumer (pop, bpop, reserve, reserve_many, lookup, both Workers at
//! least and at most once), a malformed one is refused at push, and one
//! found malformed in Redis is handed out as absent, never an error.

mod worker_kit;

use delayer::{Delayer, Error, Job};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use testkit::RedisServer;
use worker_kit::*;

const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const TTR: Duration = Duration::from_secs(30);

#[test]
fn every_consumer_gets_the_traceparent_pushed() {
    let redis = RedisServer::start();
    let d = Delayer::open(&redis.url()).expect("client");
    ready(&redis, &[Job::new("t", "a", Duration::ZERO).traceparent(TP), Job::new("t", "b", Duration::ZERO)]);
    assert_eq!(field(&redis, "a", "traceparent").as_deref(), Some(TP), "push_many writes the field");
    assert_eq!(field(&redis, "b", "traceparent"), None, "absent: no field");
    assert_eq!(d.job("t", "a").expect("lookup").traceparent.as_deref(), Some(TP));
    assert_eq!(d.pop("t").expect("pop").expect("a").traceparent.as_deref(), Some(TP));
    assert_eq!(d.bpop("t", Duration::from_secs(1)).expect("bpop").expect("b").traceparent, None);

    d.push_job(&Job::new("t", "c", Duration::ZERO).traceparent(TP)).expect("push");
    assert_eq!(field(&redis, "c", "traceparent").as_deref(), Some(TP), "push writes the field");
    let _: () = redis::cmd("ZREM").arg("delayer:job_pool").arg("c").query(&mut redis.connection()).expect("zrem");
    let _: () =
        redis::cmd("LPUSH").arg("delayer:ready_queue:t").arg("c").query(&mut redis.connection()).expect("lpush");
    let job = d.reserve("t", TTR).expect("reserve").expect("c");
    assert_eq!(job.traceparent.as_deref(), Some(TP));
    assert!(d.ack(&job).expect("ack"));
    ready(&redis, &[Job::new("t", "d", Duration::ZERO).traceparent(TP)]);
    let (_, jobs) = d.reserve_many("t", TTR, 10, &[]).expect("reserve_many");
    assert_eq!(jobs.iter().map(|j| j.traceparent.as_deref()).collect::<Vec<_>>(), [Some(TP)]);
}

#[test]
fn a_malformed_traceparent_is_refused_at_push_and_nothing_is_written() {
    let redis = RedisServer::start();
    let d = Delayer::open(&redis.url()).expect("client");
    for bad in ["", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "not one"] {
        let job = Job::new("t", "x", Duration::ZERO).traceparent(bad);
        if bad.is_empty() {
            d.push_job(&job).expect("an empty traceparent is none");
            assert_eq!(field(&redis, "x", "traceparent"), None);
            continue;
        }
        assert!(matches!(d.push_job(&job), Err(Error::InvalidArgument(_))), "{bad:?}");
        assert!(matches!(d.push_many(&[job]), Err(Error::InvalidArgument(_))), "{bad:?}");
    }
    let zeros = format!("00-{}-00f067aa0ba902b7-01", "0".repeat(32));
    assert!(matches!(
        d.push_job(&Job::new("t", "y", Duration::ZERO).traceparent(zeros)),
        Err(Error::InvalidArgument(_))
    ));
    assert!(!exists(&redis, "y"));
}

#[test]
fn a_malformed_traceparent_in_redis_is_handed_out_as_absent() {
    let redis = RedisServer::start();
    let d = Delayer::open(&redis.url()).expect("client");
    let upper = TP.to_uppercase();
    let hostile: [&[u8]; 3] = [b"\xff\xfe garbage", &[b'0'; 100_000], upper.as_bytes()];
    for (i, value) in hostile.iter().enumerate() {
        let id = format!("h{i}");
        ready(&redis, &[Job::new("t", &id, Duration::ZERO)]);
        let bucket = format!("delayer:job_bucket:{id}");
        let _: () = redis::cmd("HSET")
            .arg(&bucket)
            .arg("traceparent")
            .arg(*value)
            .query(&mut redis.connection())
            .expect("hset");
        assert_eq!(d.job("t", &id).expect("lookup").traceparent, None);
        let job = if i % 2 == 0 {
            d.pop("t").expect("pop").map(|m| (m.id, m.traceparent))
        } else {
            d.reserve("t", TTR).expect("reserve").map(|r| (r.id, r.traceparent))
        };
        assert_eq!(job, Some((id, None)), "handed out, without it");
    }
}

#[test]
fn worker_handlers_get_the_traceparent() {
    for kind in KINDS {
        for at_most_once in [false, true] {
            let redis = RedisServer::start();
            ready(&redis, &[Job::new("t", "w1", Duration::ZERO).traceparent(TP), Job::new("t", "w2", Duration::ZERO)]);
            let seen = Arc::new(Mutex::new(Vec::new()));
            let record = seen.clone();
            let plan = behaviour(move |d| {
                record.lock().expect("seen").push((d.id.clone(), d.traceparent.clone()));
                Plan::default()
            });
            let w = start(kind, &redis.url(), Options { at_most_once, ..Options::default() }, plan);
            assert!(w.wait_for("succeeded", 2), "{kind:?}: {:?}", w.events());
            let mut got = seen.lock().expect("seen").clone();
            got.sort();
            assert_eq!(got, [("w1".to_string(), Some(TP.to_string())), ("w2".to_string(), None)], "{kind:?}");
        }
    }
}
