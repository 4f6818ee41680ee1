//! `log_format` and the movers' info line, against the real binary and a
//! real redis-server: JSON lines stay valid whatever topic names hold, on
//! every destination, for the server, its panics and `delayer webhook`; an
//! unknown format is refused at start; the per-batch "moved" line is a
//! periodic summary at info and a line per batch at debug.

use delayer::Delayer;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use testkit::{server_conf, temp_dir, wait_until, DelayerProcess, RedisServer, DEADLINE};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");

/// The summary's period in these tests (debug builds only).
const SUMMARY_MS: &str = "300";

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_default()
}

/// Every line of `text` as a JSON log line: an object with `ts` (RFC 3339,
/// UTC, ms), `level`, `target` and `msg`. Panics naming the line otherwise.
fn json_lines(text: &str, whence: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|line| {
            let v: serde_json::Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("{whence}: not JSON ({e}): {line:?}"));
            let ts = v["ts"].as_str().unwrap_or_default();
            let shape = ts.len() == 24 && ts.ends_with('Z') && ts.as_bytes()[10] == b'T' && ts.as_bytes()[19] == b'.';
            assert!(shape, "{whence}: ts {ts:?} is not RFC 3339 UTC with ms: {line}");
            assert!(["error", "warn", "info", "debug", "trace"].contains(&v["level"].as_str().unwrap_or("")), "{line}");
            assert!(v["msg"].is_string() && v["target"].is_string(), "{whence}: {line}");
            v
        })
        .collect()
}

/// The summary lines (info, with `batches`) among `lines`.
fn summaries(lines: &[serde_json::Value]) -> Vec<&serde_json::Value> {
    lines.iter().filter(|v| v["level"] == "info" && v["batches"].is_u64()).collect()
}

#[test]
fn json_lines_hold_whatever_the_topic_names_hold() {
    let redis = RedisServer::start();
    let hostile = ["quote\"d", "new\nline", "back\\slash\u{1}\t", "</script>\u{2028}"];
    let d = Delayer::open(&redis.url()).expect("client");
    for (i, topic) in hostile.iter().enumerate() {
        d.push(topic, &format!("j{i}"), Duration::ZERO).expect("push");
    }
    // A topic that is not UTF-8, written raw as a 1.x client would.
    let mut conn = redis.connection();
    redis::cmd("HSET")
        .arg("delayer:job_bucket:raw")
        .arg("topic")
        .arg(b"bad\xff\xfe")
        .arg("body")
        .arg("x")
        .exec(&mut conn)
        .expect("hset");
    redis::cmd("ZADD").arg("delayer:job_pool").arg(0).arg("raw").exec(&mut conn).expect("zadd");
    let lossy = "bad\u{fffd}\u{fffd}";

    // A 1.x key in [redis] is warned about: a line for the error log.
    let conf = format!(
        "{}timeout = 3\n",
        server_conf(
            redis.port(),
            50,
            "log_format = json\nlog_level = debug\naccess_log = access.log\nerror_log = error.log"
        )
    );
    let server = DelayerProcess::start_with_env(BIN, &conf, &[("DELAYER_TEST_SUMMARY_MS", SUMMARY_MS)]);
    let access = server.dir.join("access.log");
    let all_summed = wait_until(DEADLINE, || {
        let lines = json_lines(&read(&access), "access.log");
        let named: Vec<String> = summaries(&lines)
            .iter()
            .flat_map(|s| s["per_topic"].as_object().into_iter().flat_map(|o| o.keys().cloned()))
            .collect();
        hostile.iter().chain([&lossy]).all(|t| named.iter().any(|n| n == t))
    });
    assert!(all_summed, "no summary named every topic: {}", read(&access));

    let access_lines = json_lines(&read(&access), "access.log");
    let errors = json_lines(&read(&server.dir.join("error.log")), "error.log");
    json_lines(&read(&server.dir.join("stdout.log")), "stdout");
    json_lines(&read(&server.dir.join("stderr.log")), "stderr");
    assert!(
        errors.iter().any(|v| v["level"] == "warn" && v["msg"].as_str().is_some_and(|m| m.contains("timeout"))),
        "{errors:?}"
    );
    // Each batch at debug, with its fields.
    let batches: Vec<&serde_json::Value> =
        access_lines.iter().filter(|v| v["level"] == "debug" && v["per_topic"].is_object()).collect();
    let moved: u64 = batches.iter().filter_map(|v| v["moved"].as_u64()).sum();
    assert_eq!(moved, 5, "{batches:?}");
    assert!(batches.iter().all(|v| v["late_ms"].is_u64() && v["target"] == "delayer::mover"), "{batches:?}");
    let summed: u64 = summaries(&access_lines).iter().filter_map(|v| v["moved"].as_u64()).sum();
    assert_eq!(summed, 5, "{access_lines:?}");
}

/// The info line is a summary every period, only when something moved;
/// each batch is a debug line, filtered out at info. Text lines keep 1.x's
/// shape.
#[test]
fn the_moved_line_is_a_periodic_summary_at_info() {
    let redis = RedisServer::start();
    let d = Delayer::open(&redis.url()).expect("client");
    let d = d.with_layout(delayer::Layout::Topic).expect("topic layout");
    for i in 0..5 {
        d.push("a", &format!("a{i}"), Duration::ZERO).expect("push");
    }
    for i in 0..2 {
        d.push("b", &format!("b{i}"), Duration::ZERO).expect("push");
    }
    let conf = server_conf(redis.port(), 50, "layout = topic");
    let server = DelayerProcess::start_with_env(BIN, &conf, &[("DELAYER_TEST_SUMMARY_MS", SUMMARY_MS)]);
    let summary =
        |out: &str| out.lines().filter(|l| l.contains("] [INFO] moved ")).map(String::from).collect::<Vec<_>>();
    assert!(server.wait_for_output(|o| !summary(o).is_empty()), "no summary: {}", server.output());
    let first = summary(&server.output()).remove(0);
    let (stamp, rest) = first.split_once("] [INFO] ").expect("1.x shape");
    assert!(stamp.starts_with('[') && stamp.ends_with('Z') && stamp.len() == 25, "{first}");
    assert!(rest.starts_with("moved 7 job(s) in the last "), "{first}");
    assert!(rest.contains(": \"a\"=5 \"b\"=2; lateness max "), "{first}");

    // More moves: one more summary, naming only them.
    d.push("c", "c0", Duration::ZERO).expect("push");
    assert!(server.wait_for_output(|o| summary(o).len() == 2), "no second summary: {}", server.output());
    let second = summary(&server.output()).remove(1);
    assert!(second.contains("moved 1 job(s)") && second.contains(": \"c\"=1;"), "{second}");
    // Nothing moves: no summary for several periods.
    let quiet_until = Instant::now() + Duration::from_millis(4 * 300);
    let quiet =
        wait_until(Duration::from_secs(2), || summary(&server.output()).len() > 2 || Instant::now() >= quiet_until);
    assert!(quiet && summary(&server.output()).len() == 2, "a summary with nothing moved: {}", server.output());
    // At info, no per-batch line.
    assert!(!server.output().contains("oldest_late_ms"), "{}", server.output());
}

#[test]
fn an_unknown_log_format_is_refused_at_start() {
    let dir = temp_dir("log-format");
    let conf = dir.join("delayer.conf");
    let text = "[delayer]\nlog_format = xml\n\n[redis]\nhost = 127.0.0.1\nport = 1\n\n\
                [webhook.t]\nurl = http://127.0.0.1:1/\nsecret = s-0123456789\n";
    fs::write(&conf, text).expect("conf");
    for args in [&["-c"][..], &["webhook", "-c"][..]] {
        let out = Command::new(BIN).args(args).arg(&conf).stdin(Stdio::null()).output().expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("log_format") && stderr.contains("\"xml\" is not one of text, json"),
            "{args:?}: {stderr}"
        );
    }
    let _ = fs::remove_dir_all(&dir);
}

/// The panic hook's line and `delayer webhook`'s lines are JSON too.
#[test]
fn panics_and_the_webhook_write_json_lines() {
    let redis = RedisServer::start();
    let conf = server_conf(redis.port(), 50, "log_format = json");
    let mut server = DelayerProcess::start_with_env(BIN, &conf, &[("DELAYER_TEST_PANIC", "tick")]);
    let status = server.wait_exit(DEADLINE);
    assert_eq!(status.and_then(|s| s.code()), Some(101), "{}", server.output());
    let errors = json_lines(&read(&server.dir.join("stderr.log")), "stderr");
    let panic = errors.iter().find(|v| v["panic"] == true).unwrap_or_else(|| panic!("no panic line: {errors:?}"));
    assert_eq!(panic["level"], "error");
    assert!(panic["location"].as_str().is_some_and(|l| l.starts_with("server/src/")), "{panic}");
    assert!(panic["msg"].as_str().is_some_and(|m| m.contains("DELAYER_TEST_PANIC=tick")), "{panic}");

    // A server to move the job, and the webhook, whose delivery fails
    // (nothing listens on port 1): its line carries the job's fields.
    let _mover = DelayerProcess::start(BIN, &conf);
    Delayer::open(&redis.url()).expect("client").push("t", "w\"1", Duration::ZERO).expect("push");
    let dir = temp_dir("webhook-json");
    let conf = format!("{conf}\n[webhook.t]\nurl = http://127.0.0.1:1/\nsecret = s-0123456789\n");
    fs::write(dir.join("delayer.conf"), conf).expect("conf");
    let mut hook = Command::new(BIN)
        .args(["webhook", "-c"])
        .arg(dir.join("delayer.conf"))
        .stdin(Stdio::null())
        .stdout(fs::File::create(dir.join("out.log")).expect("out.log"))
        .stderr(fs::File::create(dir.join("err.log")).expect("err.log"))
        .spawn()
        .expect("delayer webhook");
    let failed = wait_until(DEADLINE, || read(&dir.join("err.log")).contains("failed after"));
    let _ = Command::new("kill").arg(hook.id().to_string()).status();
    let exited = testkit::wait_child(&mut hook, DEADLINE);
    assert!(failed, "{}{}", read(&dir.join("out.log")), read(&dir.join("err.log")));
    assert!(exited.is_some_and(|s| s.success()), "{exited:?}");
    let lines = json_lines(&read(&dir.join("out.log")), "webhook stdout");
    assert!(lines.iter().any(|v| v["msg"].as_str().is_some_and(|m| m.starts_with("delayer webhook "))), "{lines:?}");
    let errors = json_lines(&read(&dir.join("err.log")), "webhook stderr");
    let failure = errors.iter().find(|v| v["level"] == "warn" && v["id"].is_string()).expect("a delivery's line");
    assert_eq!((failure["topic"].as_str(), failure["id"].as_str()), (Some("t"), Some("w\"1")), "{failure}");
    assert!(failure["attempt"].is_u64() && failure["ms"].is_u64(), "{failure}");
    let _ = fs::remove_dir_all(&dir);
}
