//! A topic's rate limit through the SDK (issue 23): set, read and cleared in
//! both layouts, by the blocking client and its async twin, and refused by
//! flow.lua (the rules live there only) as the SDK's InvalidArgument, with
//! nothing written.

use delayer::{Delayer, Error, Layout, RateLimit};
use std::time::Duration;
use testkit::{RedisServer, DEADLINE};

fn client(redis: &RedisServer, layout: Layout) -> Delayer {
    Delayer::open(&redis.url()).expect("client").with_prefix("rl:").with_layout(layout).expect("layout")
}

fn flow_key(layout: Layout) -> &'static str {
    if layout == Layout::Topic {
        "rl:{t}:flow"
    } else {
        "rl:flow:t"
    }
}

#[test]
fn a_limit_is_set_read_changed_and_cleared_in_both_layouts() {
    let redis = RedisServer::start();
    for layout in [Layout::Classic, Layout::Topic] {
        let d = client(&redis, layout);
        assert_eq!(d.flow("t").expect("flow").rate_limit, None);
        let mut sub = redis.connection();
        let mut pubsub = sub.as_pubsub();
        pubsub.subscribe("rl:wake").expect("SUBSCRIBE");
        pubsub.set_read_timeout(Some(DEADLINE)).expect("timeout");

        let state = d.set_rate_limit("t", 50.0, Some(10)).expect("limit");
        assert_eq!(state.rate_limit, Some(RateLimit { per_second: 50.0, burst: 10 }));
        assert!(state.changed && state.paused_since.is_none(), "{state:?}");
        let said: String = pubsub.get_message().expect("the limit's announcement").get_payload().expect("text");
        assert!(said.ends_with(" t"), "every server looks at the topic now: {said:?}");
        assert_eq!(d.flow("t").expect("flow").rate_limit, state.rate_limit);
        assert!(!d.is_paused("t").expect("is_paused"), "a limit is no pause");

        let again = d.set_rate_limit("t", 50.0, Some(10)).expect("the same limit");
        assert!(!again.changed, "the same rate and burst change nothing");
        // 30/min, sent as the shortest text of 0.5 and kept as sent; the
        // default burst is one second's worth, at least one job.
        let slow = d.set_rate_limit("t", 0.5, None).expect("limit");
        assert_eq!(slow.rate_limit, Some(RateLimit { per_second: 0.5, burst: 1 }));
        let mut conn = redis.connection();
        let stored: Vec<String> =
            redis::cmd("HMGET").arg(flow_key(layout)).arg("per_second").arg("burst").query(&mut conn).expect("HMGET");
        assert_eq!(stored, ["0.5", "1"]);
        let fast = d.set_rate_limit("t", 2.5, None).expect("limit");
        assert_eq!(fast.rate_limit.map(|r| r.burst), Some(3), "ceil(2.5)");

        // Per topic, stats lists the index's topics, which the server
        // writes: here by hand.
        let _: () = redis::cmd("SADD").arg("rl:topics").arg("t").query(&mut conn).expect("SADD");
        let stats = d.stats().expect("stats");
        let topic = stats.topics.iter().find(|s| s.topic == "t").expect("the topic in stats");
        assert_eq!(topic.rate_limit, Some(RateLimit { per_second: 2.5, burst: 3 }), "{layout:?}");

        assert!(d.clear_rate_limit("t").expect("unlimit"));
        assert!(!d.clear_rate_limit("t").expect("unlimit again"), "no limit left to clear");
        assert_eq!(d.flow("t").expect("flow").rate_limit, None);
        let fields: Vec<Option<String>> = redis::cmd("HMGET")
            .arg(flow_key(layout))
            .arg(&["per_second", "burst", "tokens", "tokens_at"][..])
            .query(&mut conn)
            .expect("HMGET");
        assert!(fields.iter().all(Option::is_none), "{fields:?}");
    }
}

#[test]
fn a_limit_and_a_pause_are_told_apart_and_both_said() {
    let redis = RedisServer::start();
    let d = client(&redis, Layout::Topic);
    d.push("t", "j", Duration::from_secs(60)).expect("push");
    d.set_rate_limit("t", 5.0, None).expect("limit");
    assert_eq!(d.job("t", "j").expect("job").flow, delayer::inspect::TopicFlow::Limited);
    d.pause("t").expect("pause");
    let state = d.flow("t").expect("flow");
    assert!(state.paused_since.is_some() && state.rate_limit.is_some(), "{state:?}");
    assert_eq!(d.job("t", "j").expect("job").flow, delayer::inspect::TopicFlow::Paused, "a pause wins");
}

#[test]
fn the_script_refuses_a_bad_limit_as_an_invalid_argument_and_writes_nothing() {
    let redis = RedisServer::start();
    for layout in [Layout::Classic, Layout::Topic] {
        let d = client(&redis, layout);
        for (rate, burst, says) in [
            (0.0, None, "pause it instead"),
            (-1.0, None, "more than 0"),
            (f64::NAN, None, "finite"),
            (f64::INFINITY, None, "finite"),
            (1e-7, None, "one job a day"),
            (2_000_000.0, None, "at most 1000000"),
            (10.0, Some(0), "the burst must be a whole number of jobs from 1 to 1000000, got \"0\""),
            (1000.0, Some(1), "at least 1% of the rate"),
        ] {
            match d.set_rate_limit("t", rate, burst) {
                Err(Error::InvalidArgument(why)) => assert!(why.contains(says), "{rate} {burst:?}: {why}"),
                other => panic!("{rate} {burst:?}: expected an invalid argument, got {other:?}"),
            }
        }
        let err = d.set_rate_limit("t", 0.0, None).expect_err("0");
        assert_eq!(
            err.to_string(),
            "invalid argument: a rate of 0 would stop the topic: pause it instead (pause(topic) / delayer pause \
             <topic>)"
        );
        let written: bool = redis::cmd("EXISTS").arg(flow_key(layout)).query(&mut redis.connection()).expect("EXISTS");
        assert!(!written, "a refused limit writes nothing");
        // Other script errors stay Redis errors.
        let _: () = redis::cmd("SET").arg(flow_key(layout)).arg("junk").query(&mut redis.connection()).expect("SET");
        assert!(matches!(d.set_rate_limit("t", 5.0, None), Err(Error::Redis(_))));
        let _: () = redis::cmd("DEL").arg(flow_key(layout)).query(&mut redis.connection()).expect("DEL");
    }
    // The topic is the SDK's own check, before Redis.
    let d = client(&redis, Layout::Classic);
    assert!(matches!(d.set_rate_limit("", 5.0, None), Err(Error::InvalidArgument(_))));
}

#[tokio::test]
async fn the_async_twin_sets_clears_and_is_refused_alike() {
    let redis = RedisServer::start();
    let d = delayer::aio::Delayer::open(&redis.url()).expect("client");
    let state = d.set_rate_limit("t", 100.0, None).await.expect("limit");
    assert_eq!(state.rate_limit, Some(RateLimit { per_second: 100.0, burst: 100 }));
    assert_eq!(d.flow("t").await.expect("flow").rate_limit, state.rate_limit);
    match d.set_rate_limit("t", 0.0, Some(5)).await {
        Err(Error::InvalidArgument(why)) => assert!(why.contains("pause it instead"), "{why}"),
        other => panic!("expected an invalid argument, got {other:?}"),
    }
    assert_eq!(d.flow("t").await.expect("flow").rate_limit, state.rate_limit, "the refusal changed nothing");
    assert!(d.clear_rate_limit("t").await.expect("unlimit"));
    assert_eq!(d.flow("t").await.expect("flow").rate_limit, None);
}
