//! BullMQ beside Delayer: the lateness scenarios run by
//! `bench/bullmq/lateness.js` (a Node Queue and a Worker at concurrency 50)
//! on the bench's own Redis, so the report can put the peer users would
//! pick instead next to each Delayer row.

use crate::lateness::{Groups, Scenario};
use crate::redisx;
use crate::stats::Summary;
use std::path::Path;
use std::process::Command;
use testkit::RedisServer;

/// What lateness.js measured, or why it did not run.
pub struct Peer {
    pub result: Result<PeerRun, String>,
}

#[derive(Debug)]
pub struct PeerRun {
    pub pushed: u64,
    pub consumed: u64,
    pub achieved_rate: f64,
    pub late: Groups,
    /// How far Node's monotonic clock drifted from the wall clock over the
    /// run (corrected for; shown so a large one is noticed), ms.
    pub clock_drift_ms: f64,
    /// Oversleep of 1 ms sleeps in this process meanwhile: machine noise.
    pub jitter_ms: Summary,
}

/// The oldest Node major version this bench runs BullMQ on (bullmq 6 needs
/// >= 14.18; 18 is the oldest still maintained when this was written).
const NODE_MIN_MAJOR: u32 = 18;

/// Why BullMQ cannot run here, if it cannot: node missing or too old, or
/// bench/bullmq/node_modules not installed (bench/run.sh runs `npm ci`).
pub fn unavailable(root: &Path) -> Option<String> {
    let version = match Command::new("node").arg("--version").output() {
        Err(e) => return Some(format!("cannot run node: {e}")),
        Ok(out) if !out.status.success() => return Some("node --version failed".into()),
        Ok(out) => String::from_utf8_lossy(&out.stdout).trim().to_string(),
    };
    let major = version.trim_start_matches('v').split('.').next().and_then(|m| m.parse::<u32>().ok());
    match major {
        Some(m) if m >= NODE_MIN_MAJOR => {}
        _ => return Some(format!("node {version} is older than {NODE_MIN_MAJOR}")),
    }
    if !root.join("bench/bullmq/node_modules/bullmq/package.json").exists() {
        return Some("bench/bullmq/node_modules missing (npm ci in bench/bullmq; bench/run.sh does it)".into());
    }
    None
}

/// Runs one scenario on BullMQ, after a FLUSHALL.
pub fn run(redis: &RedisServer, root: &Path, sc: Scenario) -> Peer {
    if let Some(why) = unavailable(root) {
        return Peer { result: Err(why) };
    }
    let mut conn = redis.connection();
    redisx::reset(&mut conn);
    let jitter = redisx::Jitter::start();
    let script = root.join("bench/bullmq/lateness.js");
    let out = Command::new("node")
        .arg(&script)
        .arg(redis.url())
        .args([sc.rate, sc.secs, sc.min_ms, sc.max_ms].map(|n| n.to_string()))
        .current_dir(root.join("bench/bullmq"))
        .output();
    let jitter_ms = Summary::of(jitter.finish());
    let result = match out {
        Err(e) => Err(format!("cannot run node: {e}")),
        Ok(out) if !out.status.success() => {
            let err = String::from_utf8_lossy(&out.stderr);
            let last = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string();
            Err(format!("{} failed: {last}", script.display()))
        }
        Ok(out) => parse(&String::from_utf8_lossy(&out.stdout)).map(|mut run| {
            run.jitter_ms = jitter_ms;
            run
        }),
    };
    Peer { result }
}

/// Reads lateness.js's one JSON line: {"pushed": n, "consumed": n,
/// "push_secs": s, "clock_drift_ms": x, "late_ms": [...], "delay_ms": [...]}
/// (a fixed, flat shape: no JSON crate needed).
fn parse(text: &str) -> Result<PeerRun, String> {
    let line = text.lines().rev().find(|l| l.trim_start().starts_with('{')).ok_or("no JSON in the output")?;
    let number = |key: &str| -> Result<f64, String> {
        let v = value(line, key)?;
        v.trim().parse().map_err(|_| format!("{key}: bad number {v:?}"))
    };
    let list = |key: &str| -> Result<Vec<f64>, String> {
        let v = value(line, key)?;
        let inner = v.trim().strip_prefix('[').and_then(|v| v.strip_suffix(']')).ok_or(format!("{key}: not a list"))?;
        inner
            .split(',')
            .filter(|x| !x.trim().is_empty())
            .map(|x| x.trim().parse().map_err(|_| format!("{key}: bad number {x:?}")))
            .collect()
    };
    let (late, delay) = (list("late_ms")?, list("delay_ms")?);
    if late.len() != delay.len() {
        return Err(format!("{} late_ms but {} delay_ms", late.len(), delay.len()));
    }
    let samples: Vec<(f64, u64)> = late.into_iter().zip(delay.into_iter().map(|d| d as u64)).collect();
    let pushed = number("pushed")?;
    Ok(PeerRun {
        pushed: pushed as u64,
        consumed: number("consumed")? as u64,
        achieved_rate: pushed / number("push_secs")?.max(1e-9),
        late: Groups::of(&samples),
        clock_drift_ms: number("clock_drift_ms")?,
        jitter_ms: Summary::default(),
    })
}

/// The text of `key`'s value in a flat JSON object: a number, or a list of
/// numbers (up to its `]`).
fn value<'a>(line: &'a str, key: &str) -> Result<&'a str, String> {
    let pat = format!("\"{key}\":");
    let start = line.find(&pat).ok_or(format!("no {key:?} in the output"))? + pat.len();
    let rest = line[start..].trim_start();
    let end = if rest.starts_with('[') { rest.find(']').map(|i| i + 1) } else { rest.find([',', '}']) }
        .ok_or(format!("{key}: unterminated value"))?;
    Ok(&rest[..end])
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_the_script_output() {
        let out = "noise\n{\"pushed\": 4, \"consumed\": 3, \"push_secs\": 2.000, \"clock_drift_ms\": -0.125, \
                   \"late_ms\": [1.5,-0.25,700], \"delay_ms\": [50,1000,0]}\n";
        let r = super::parse(out).unwrap();
        assert_eq!((r.pushed, r.consumed, r.achieved_rate, r.clock_drift_ms), (4, 3, 2.0, -0.125));
        assert_eq!((r.late.all.count, r.late.all.max, r.late.early), (3, 700.0, 1));
        assert_eq!((r.late.under_1s.count, r.late.ahead_1s.count), (2, 1));
    }

    #[test]
    fn refuses_mismatched_lists() {
        let out = "{\"pushed\": 1, \"consumed\": 1, \"push_secs\": 1, \"clock_drift_ms\": 0, \
                   \"late_ms\": [1], \"delay_ms\": []}";
        assert!(super::parse(out).unwrap_err().contains("1 late_ms but 0 delay_ms"));
        assert!(super::parse("nothing").is_err());
    }
}
