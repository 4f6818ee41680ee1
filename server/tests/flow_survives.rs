//! A pause and a rate limit survive what production does to them (issue
//! 23): the server is killed with SIGKILL and Redis crashes and comes back
//! from its AOF while a topic is paused and another limited, with due jobs
//! held. The new server moves none of the paused topic's until the resume
//! and no more of the limited one's than its bucket allows, then every one
//! exactly once, in both layouts.

use delayer::{Delayer, Layout};
use std::collections::BTreeSet;
use std::time::Duration;
use testkit::{server_conf, wait_until, DelayerProcess, RedisServer, DEADLINE};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");

fn server(redis: &RedisServer, layout: &str) -> DelayerProcess {
    let server = DelayerProcess::start(BIN, &server_conf(redis.port(), 100, &format!("layout = {layout}")));
    assert!(server.wait_for_output(|o| o.contains("listening for wake-ups")), "{}", server.output());
    server
}

fn ready(redis: &RedisServer, layout: Layout) -> usize {
    ready_of(redis, layout, "sms")
}

fn ready_of(redis: &RedisServer, layout: Layout, topic: &str) -> usize {
    let key = if layout == Layout::Topic {
        format!("delayer:{{{topic}}}:ready")
    } else {
        format!("delayer:ready_queue:{topic}")
    };
    redis::cmd("LLEN").arg(key).query(&mut redis.connection()).expect("LLEN")
}

#[test]
fn a_pause_survives_a_killed_server_and_a_crashed_redis() {
    for (layout, name) in [(Layout::Classic, "classic"), (Layout::Topic, "topic")] {
        let mut redis = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
        let first = server(&redis, name);
        let url = redis.url();
        let client = || Delayer::open(&url).expect("client").with_layout(layout).expect("layout");
        let d = client();
        assert!(d.pause("sms").expect("pause"));
        for i in 0..50 {
            d.push("sms", &format!("s{i}"), Duration::ZERO).expect("push");
        }
        // One a day, burst 1: one job goes now, the other four wait.
        d.set_rate_limit("pay", 1.0 / 86400.0, Some(1)).expect("limit");
        for i in 0..5 {
            d.push("pay", &format!("p{i}"), Duration::ZERO).expect("push");
        }
        assert!(wait_until(DEADLINE, || d.flow("pay").expect("flow").held == 4), "{name}: {}", first.output());
        assert_eq!(ready_of(&redis, layout, "pay"), 1, "{name}: the limit's burst is one job");
        // Held: set aside by the server (classic), or due in the pool (per topic).
        assert!(wait_until(DEADLINE, || d.flow("sms").expect("flow").held == 50), "{name}: {}", first.output());
        assert_eq!(ready(&redis, layout), 0, "{name}: a paused topic's job was made ready");

        first.signal("KILL");
        redis.crash_and_restart();
        let second = server(&redis, name);
        let d = client();
        assert!(d.is_paused("sms").expect("is_paused"), "{name}: the pause was lost");
        // The new server has ticked many times (100 ms) and moved nothing.
        std::thread::sleep(Duration::from_millis(1500));
        assert_eq!(ready(&redis, layout), 0, "{name}: {}", second.output());
        assert_eq!(d.flow("sms").expect("flow").held, 50, "{name}: held jobs lost");
        let limit = d.flow("pay").expect("flow").rate_limit.expect("the limit was lost");
        assert_eq!((limit.per_second, limit.burst), (1.0 / 86400.0, 1), "{name}");
        assert_eq!(ready_of(&redis, layout, "pay"), 1, "{name}: the bucket was refilled by the crash");
        assert!(d.clear_rate_limit("pay").expect("clear"));
        assert!(wait_until(DEADLINE, || ready_of(&redis, layout, "pay") == 5), "{name}: {}", second.output());

        assert!(d.resume("sms").expect("resume"));
        assert!(wait_until(DEADLINE, || ready(&redis, layout) == 50), "{name}: {}", second.output());
        let mut seen = BTreeSet::new();
        while let Some(job) = d.pop("sms").expect("pop") {
            assert!(seen.insert(job.id.clone()), "{name}: {} handed out twice", job.id);
        }
        assert_eq!(seen.len(), 50, "{name}: every held job once");
    }
}
