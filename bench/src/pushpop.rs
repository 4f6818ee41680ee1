//! Push and pop throughput of each SDK, one client, one operation at a time
//! (push_many: one call for the whole batch, pipelined by the SDK).
//!
//! Every SDK does the same four steps: `push` n jobs (delay 0) to topic A,
//! `push_many` n jobs (delay 0) to topic B, move them all to the ready queues
//! with move.lua (not timed), then `pop` n from A and `bpop` n from B.

use crate::redisx;
use delayer::{Delayer, Job};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use testkit::RedisServer;

/// ops/s of each operation of one SDK, or why it was skipped.
pub struct SdkRates {
    pub sdk: &'static str,
    pub ops: u64,
    pub bulk_ops: u64,
    pub result: Result<Rates, String>,
    pub limits: Option<Limits>,
}

/// What bounds the Rust numbers: a bare round trip, and Redis's own time
/// per pushed job.
#[derive(Default)]
pub struct Limits {
    /// Sequential PINGs on one connection, per second: the most any
    /// one-round-trip operation can do from one client.
    pub ping_rate: f64,
    /// Redis's time per pushed job during push_many (commandstats: EVALSHA
    /// time over jobs pushed; push_many.lua takes 100 jobs a call), us.
    pub push_usec: f64,
}

#[derive(Default)]
pub struct Rates {
    pub push: f64,
    pub push_many: f64,
    pub pop: f64,
    pub bpop: f64,
}

pub fn rust(redis: &RedisServer, ops: u64, bulk_ops: u64) -> SdkRates {
    let mut conn = redis.connection();
    redisx::reset(&mut conn);
    let d = Delayer::open(&redis.url()).expect("client");
    // Warm up: connect and load the scripts.
    d.push("warm", "warm-1", Duration::from_secs(3600)).expect("push");
    let _ = d.pop("warm").expect("pop");

    let t = Instant::now();
    for i in 0..ops {
        d.push_job(&Job::new("rs_a", format!("rs-a-{i}"), Duration::ZERO).body(redisx::BODY)).expect("push");
    }
    let push = ops as f64 / t.elapsed().as_secs_f64();

    let mut raw = redis.connection();
    let t = Instant::now();
    for _ in 0..ops {
        redis::cmd("PING").query::<String>(&mut raw).expect("PING");
    }
    let ping_rate = ops as f64 / t.elapsed().as_secs_f64();

    let jobs: Vec<Job> =
        (0..bulk_ops).map(|i| Job::new("rs_b", format!("rs-b-{i}"), Duration::ZERO).body(redisx::BODY)).collect();
    redisx::resetstat(&mut conn);
    let t = Instant::now();
    d.push_many(&jobs).expect("push_many");
    let push_many = bulk_ops as f64 / t.elapsed().as_secs_f64();
    let evalsha = redisx::commandstats(&mut conn).get("evalsha").copied().unwrap_or_default();
    let push_usec = evalsha.usec as f64 / bulk_ops.max(1) as f64;

    let (moved, _, _) = redisx::bare_move_all(&mut conn);
    assert_eq!(moved, ops + bulk_ops, "moved {moved}");

    let t = Instant::now();
    for _ in 0..ops {
        d.pop("rs_a").expect("pop").expect("a ready job");
    }
    let pop = ops as f64 / t.elapsed().as_secs_f64();

    let t = Instant::now();
    for _ in 0..ops {
        d.bpop("rs_b", Duration::from_secs(1)).expect("bpop").expect("a ready job");
    }
    let bpop = ops as f64 / t.elapsed().as_secs_f64();
    SdkRates {
        sdk: "Rust",
        ops,
        bulk_ops,
        result: Ok(Rates { push, push_many, pop, bpop }),
        limits: Some(Limits { ping_rate, push_usec }),
    }
}

/// Runs `bench/sdk_bench.py` or `bench/sdk_bench.php` and reads its JSON.
pub fn script(redis: &RedisServer, root: &Path, sdk: &'static str, ops: u64) -> SdkRates {
    let mut conn = redis.connection();
    redisx::reset(&mut conn);
    let move_lua = root.join("lua/move.lua");
    let (program, script) = match sdk {
        "Python" => (root.join(".venv/bin/python"), root.join("bench/sdk_bench.py")),
        _ => ("php".into(), root.join("bench/sdk_bench.php")),
    };
    let mut cmd = Command::new(&program);
    cmd.arg(&script).arg(redis.url()).arg(ops.to_string()).arg(&move_lua);
    if sdk == "PHP" {
        cmd.arg(root.join("sdk-php/vendor/autoload.php"));
    }
    let result = match cmd.output() {
        Err(e) => Err(format!("cannot run {}: {e}", program.display())),
        Ok(out) if !out.status.success() => {
            let err = String::from_utf8_lossy(&out.stderr);
            Err(format!("{} failed: {}", script.display(), err.lines().last().unwrap_or("").trim()))
        }
        Ok(out) => parse_json(&String::from_utf8_lossy(&out.stdout)),
    };
    SdkRates { sdk, ops, bulk_ops: ops, result, limits: None }
}

/// The scripts print one flat JSON object of numbers:
/// {"push": 1234.5, "push_many": ..., "pop": ..., "bpop": ...} (ops/s).
fn parse_json(text: &str) -> Result<Rates, String> {
    let line = text.lines().rev().find(|l| l.trim_start().starts_with('{')).ok_or("no JSON in the output")?;
    let body = line.trim().trim_start_matches('{').trim_end_matches('}');
    let mut r = Rates::default();
    for pair in body.split(',') {
        let (k, v) = pair.split_once(':').ok_or_else(|| format!("bad JSON pair {pair:?}"))?;
        let v: f64 = v.trim().parse().map_err(|_| format!("bad number {v:?}"))?;
        match k.trim().trim_matches('"') {
            "push" => r.push = v,
            "push_many" => r.push_many = v,
            "pop" => r.pop = v,
            "bpop" => r.bpop = v,
            _ => {}
        }
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_flat_json() {
        let r = super::parse_json("noise\n{\"push\": 10.5, \"push_many\": 20, \"pop\": 3, \"bpop\": 4.25}\n").unwrap();
        assert_eq!((r.push, r.push_many, r.pop, r.bpop), (10.5, 20.0, 3.0, 4.25));
    }
}
