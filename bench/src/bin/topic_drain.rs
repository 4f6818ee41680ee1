//! `topic-drain`: the per-topic layout's drain script against the bare limit.
//!
//! Issue 12's target for the per-topic layout: a drain at >= 0.7x a bare
//! script that only moves ids from a topic's ZSET to its LIST (no per-job
//! lookup), and >= 1 M jobs/s on this machine. This fills `--topics` topics'
//! pools (`<prefix>{<topic>}:pool`, every job already due) on a redis-server
//! of its own, then drains them topic by topic, batch by batch, from one
//! connection: once with the bare script, once with lua/move_topic.lua,
//! then the real `delayer` server (`--delayer-bin`, release build, started
//! once with `layout = topic` and `batch_size` = `--batch`) drains the same
//! fill, for `--rounds` rounds (even rounds in the reverse order); it prints
//! each rate, its ratio to the bare script of the same round, and the median
//! ratios.
//!
//! The server's clock runs from the index write that tells it about the
//! topics (as a client's push would, PROTOCOL.md "Operations in the
//! per-topic layout", with the wake message) until every id is in its ready
//! list, polled every millisecond: its start-up is not counted, its tick,
//! expiry pass and index writes are.
//!
//! usage: topic-drain [--jobs N] [--topics N] [--batch N] [--rounds N] [--delayer-bin FILE]

use redis::{Script, Value};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use testkit::{DelayerProcess, RedisServer};

const PREFIX: &str = "delayer:";

/// The limit: ZRANGEBYSCORE, LPUSH, ZREMRANGEBYRANK, nothing else.
const BARE: &str = r"
local t = redis.call('TIME')
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', t[1], 'LIMIT', 0, tonumber(ARGV[1]))
if #ids > 0 then
  redis.call('LPUSH', KEYS[2], unpack(ids))
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, #ids - 1)
end
return #ids
";

struct Options {
    jobs: u64,
    topics: u64,
    batch: u64,
    rounds: u64,
    delayer_bin: PathBuf,
}

fn options() -> Result<Options, String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let delayer_bin = root.join("target/release/delayer");
    let mut o = Options { jobs: 1_000_000, topics: 10, batch: 1000, rounds: 2, delayer_bin };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> Result<u64, String> {
            args.next()
                .and_then(|v| v.replace('_', "").parse().ok())
                .filter(|n| *n > 0)
                .ok_or(format!("{name} needs a positive number"))
        };
        match a.as_str() {
            "--jobs" => o.jobs = num("--jobs")?,
            "--topics" => o.topics = num("--topics")?,
            "--batch" => o.batch = num("--batch")?,
            "--rounds" => o.rounds = num("--rounds")?,
            "--delayer-bin" => o.delayer_bin = args.next().ok_or("--delayer-bin needs a file")?.into(),
            "-h" | "--help" => {
                println!("usage: topic-drain [--jobs N] [--topics N] [--batch N] [--rounds N] [--delayer-bin FILE]");
                std::process::exit(0);
            }
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    Ok(o)
}

fn pool(topic: &str) -> String {
    format!("{PREFIX}{{{topic}}}:pool")
}

fn ready(topic: &str) -> String {
    format!("{PREFIX}{{{topic}}}:ready")
}

fn topics(o: &Options) -> Vec<String> {
    (0..o.topics).map(|i| format!("t{i}")).collect()
}

/// Every job due a minute ago, ids `<topic>-<n>`, 1000 per ZADD.
fn fill(conn: &mut redis::Connection, o: &Options) {
    redis::cmd("FLUSHALL").query::<()>(conn).expect("FLUSHALL");
    let (now, _): (u64, u64) = redis::cmd("TIME").query(conn).expect("TIME");
    let per_topic = o.jobs / o.topics;
    for topic in topics(o) {
        let mut n = 0;
        while n < per_topic {
            let mut cmd = redis::cmd("ZADD");
            cmd.arg(pool(&topic));
            for i in n..(n + 1000).min(per_topic) {
                cmd.arg(now - 60).arg(format!("{topic}-{i}"));
            }
            cmd.query::<u64>(conn).expect("ZADD");
            n += 1000;
        }
    }
}

/// The real server's drain of the fill: the index entries and the wake
/// message a client would write, then the time until every id is ready.
/// None when the server started before the clock did.
fn server_drain(conn: &mut redis::Connection, o: &Options, server: &DelayerProcess) -> Option<Duration> {
    let (now, _): (u64, u64) = redis::cmd("TIME").query(conn).expect("TIME");
    let due = now - 60;
    let mut index = redis::pipe();
    index.cmd("SADD").arg(format!("{PREFIX}topics")).arg(topics(o)).ignore();
    let zadd = index.cmd("ZADD").arg(format!("{PREFIX}due"));
    for topic in topics(o) {
        zadd.arg(due).arg(topic);
    }
    index.ignore().cmd("PUBLISH").arg(format!("{PREFIX}wake")).arg(due).ignore();
    let mut count = redis::pipe();
    for topic in topics(o) {
        count.llen(ready(&topic));
    }
    // Its rescan (once a minute) may have found the pools during the fill.
    let early: Vec<u64> = count.query(conn).expect("LLEN");
    if early.iter().sum::<u64>() > 0 {
        return None;
    }
    let start = Instant::now();
    index.query::<()>(conn).expect("index write");
    loop {
        let lengths: Vec<u64> = count.query(conn).expect("LLEN");
        if lengths.iter().sum::<u64>() >= o.jobs / o.topics * o.topics {
            break Some(start.elapsed());
        }
        assert!(start.elapsed() < Duration::from_secs(120), "the server's drain stalled:\n{}", server.output());
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Drains every topic with `call` (one script call per batch; it returns
/// how many ids it moved) and checks every id reached its ready queue.
fn drain(conn: &mut redis::Connection, o: &Options, call: &dyn Fn(&mut redis::Connection, &str) -> u64) -> Duration {
    let start = Instant::now();
    for topic in topics(o) {
        while call(conn, &topic) == o.batch {}
    }
    let took = start.elapsed();
    let per_topic = o.jobs / o.topics;
    for topic in topics(o) {
        let (left, moved): (u64, u64) =
            redis::pipe().zcard(pool(&topic)).llen(ready(&topic)).query(conn).expect("ZCARD / LLEN");
        assert!(
            left == 0 && moved == per_topic,
            "{topic}: {left} left in the pool, {moved} ready, expected 0 / {per_topic}"
        );
    }
    took
}

fn main() {
    let o = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("topic-drain: {e}");
            std::process::exit(2);
        }
    };
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let bare = Script::new(BARE);
    let mover = Script::new(include_str!("../../../lua/move_topic.lua"));
    let batch = o.batch;
    let bare_call = |c: &mut redis::Connection, topic: &str| -> u64 {
        bare.key(pool(topic)).key(ready(topic)).arg(batch).invoke(c).expect("bare script")
    };
    let move_call = |c: &mut redis::Connection, topic: &str| -> u64 {
        let (reserved, flow) = (format!("{PREFIX}{{{topic}}}:reserved"), format!("{PREFIX}{{{topic}}}:flow"));
        match mover
            .key(pool(topic))
            .key(ready(topic))
            .key(reserved)
            .key(flow)
            .arg(batch)
            .invoke::<Value>(c)
            .expect("move_topic.lua")
        {
            Value::Array(parts) => match parts.first() {
                Some(Value::Int(n)) => *n as u64,
                other => panic!("move_topic.lua: unexpected first element {other:?}"),
            },
            other => panic!("move_topic.lua: unexpected reply {other:?}"),
        }
    };
    let rate = |d: Duration| o.jobs as f64 / d.as_secs_f64();
    println!(
        "topic-drain: {} jobs over {} topics, batch {}, redis-server on port {}",
        o.jobs,
        o.topics,
        o.batch,
        redis.port()
    );
    let conf = format!(
        "[delayer]\nlayout = topic\nbatch_size = {}\nlog_level = warn\n\n[redis]\nhost = 127.0.0.1\nport = {}\n",
        o.batch,
        redis.port()
    );
    let server = DelayerProcess::start(&o.delayer_bin.display().to_string(), &conf);
    let (mut script_ratios, mut server_ratios) = (Vec::new(), Vec::new());
    for round in 1..=o.rounds {
        // The machine's speed drifts: even rounds run in the reverse order,
        // and the summary takes the median of the rounds' ratios.
        let bare_rate = |conn: &mut redis::Connection| {
            fill(conn, &o);
            rate(drain(conn, &o, &bare_call))
        };
        let b = if round % 2 == 1 { bare_rate(&mut conn) } else { 0.0 };
        fill(&mut conn, &o);
        let s = server_drain(&mut conn, &o, &server).map(rate);
        fill(&mut conn, &o);
        let m = rate(drain(&mut conn, &o, &move_call));
        let b = if round % 2 == 0 { bare_rate(&mut conn) } else { b };
        script_ratios.push(m / b);
        let s = match s {
            Some(s) => {
                server_ratios.push(s / b);
                format!("server {s:.0} jobs/s ({:.2}x bare)", s / b)
            }
            None => "server: not measured (it found the pools during the fill)".to_string(),
        };
        println!("round {round}: bare {b:.0} jobs/s | move_topic.lua {m:.0} jobs/s ({:.2}x bare) | {s}", m / b);
    }
    println!(
        "median over {} rounds: move_topic.lua {} bare, server {} bare",
        o.rounds,
        median(&mut script_ratios),
        median(&mut server_ratios)
    );
}

/// The middle ratio, as "0.00x" ("-" for none).
fn median(ratios: &mut [f64]) -> String {
    ratios.sort_by(f64::total_cmp);
    match ratios.len() {
        0 => "-".to_string(),
        n if n % 2 == 1 => format!("{:.2}x", ratios[n / 2]),
        n => format!("{:.2}x", (ratios[n / 2 - 1] + ratios[n / 2]) / 2.0),
    }
}
