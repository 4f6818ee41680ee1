//! The commands as a new user tries them (issue 22): a reader that hangs up
//! early, `delayer push`, `list` without `--state`, `job --body`, refused
//! credentials, a negative delay, and `stats` saying each count once. The
//! real binary against a real redis-server.

use delayer::{Delayer, Job, Layout};
use redis::Commands;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use testkit::{move_due_classic, server_conf, temp_dir, wait_child, RedisServer};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");

fn delayer(url: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg("--url").arg(url).args(args).env_remove("DELAYER_URL");
    cmd
}

fn run(redis: &RedisServer, args: &[&str]) -> Output {
    delayer(&redis.url(), args).output().expect("run delayer")
}

fn ok(out: Output) -> String {
    assert!(out.status.success(), "{:?}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs_f64()
}

/// Jobs in every state on topic "t": scheduled a (body "hello"), ready r,
/// reserved v, dead d (each with its id as body).
fn every_state(redis: &RedisServer) -> Delayer {
    let d = Delayer::open(&redis.url()).expect("client");
    d.push_job(&Job::new("t", "a", Duration::from_secs(600)).body("hello")).expect("push");
    for id in ["d", "v", "r"] {
        d.push_job(&Job::new("t", id, Duration::ZERO).body(id)).expect("push");
    }
    move_due_classic(&mut redis.connection());
    let first = d.reserve("t", Duration::from_secs(60)).expect("reserve").expect("job");
    assert_eq!(first.id, "d");
    d.bury(&first).expect("bury");
    d.reserve("t", Duration::from_secs(60)).expect("reserve").expect("job");
    d
}

/// Every command that prints, its reader gone before it writes a byte:
/// none panics, each ends as it would have (0), saying nothing about it.
#[test]
fn a_reader_that_hangs_up_ends_no_command_badly() {
    let redis = RedisServer::start();
    every_state(&redis);
    let commands: &[&[&str]] = &[
        &["stats"],
        &["stats", "--json"],
        &["peek", "t"],
        &["peek", "t", "--json"],
        &["job", "t", "a"],
        &["job", "t", "a", "--body", "--json"],
        &["list", "t"],
        &["list", "t", "--state", "ready", "--json"],
        &["list", "t", "--state", "reserved"],
        &["list", "t", "--state", "dead"],
        &["dead", "list", "t"],
        &["dead", "list", "t", "--json"],
        &["push", "t", "p", "60", "--body", "x"],
        &["reschedule", "t", "p", "90"],
        &["remove", "t", "p"],
        &["dead", "requeue", "--all", "t"],
        &["--help"],
        &["stats", "--help"],
    ];
    for args in commands {
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let mut child = delayer(&redis.url(), args).stdout(writer).stderr(Stdio::piped()).spawn().expect("spawn");
        let status = wait_child(&mut child, Duration::from_secs(20)).expect("ends");
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr).expect("read");
        assert!(status.success() && stderr.is_empty(), "{args:?}: {status:?}: {stderr}");
    }
    // A failure still fails, its reader gone or not.
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let out = delayer(&redis.url(), &["dead", "purge", "t", "nope"]).stdout(writer).output().expect("run");
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not dead letters"));
}

#[test]
fn push_schedules_a_job_with_its_body_in_the_configured_layout() {
    let redis = RedisServer::start();
    let d = Delayer::open(&redis.url()).expect("client");
    let before = now();
    let said = ok(run(&redis, &["push", "orders", "42", "30m", "--body", "close it"]));
    assert!(said.contains("pushed job \"42\" to topic \"orders\"") && said.contains("(in 29 min"), "{said}");
    let due: f64 = redis.connection().zscore("delayer:job_pool", "42").expect("zscore");
    assert!((due - before - 1800.0).abs() < 5.0, "due {due}, pushed at {before}");
    let job = d.job("orders", "42").expect("job");
    assert_eq!((job.state.as_str(), job.body_size), ("scheduled", Some(8)));

    // Bytes from standard input, as they are; a negative delay is due now.
    let mut child = delayer(&redis.url(), &["push", "orders", "43", "--body-file", "-", "--", "-5"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), &[0xff, 0, b'x']).expect("write");
    let out = child.wait_with_output().expect("wait");
    assert!(ok(out).contains("(now)"));
    let body: Vec<u8> = redis.connection().hget("delayer:job_bucket:43", "body").expect("hget");
    assert_eq!(body, [0xff, 0, b'x']);
    let due: f64 = redis.connection().zscore("delayer:job_pool", "43").expect("zscore");
    assert!(due <= now() + 0.01, "a negative delay is due now, not later: {due}");

    // A configuration file's prefix and layout are honoured.
    let dir = temp_dir("cli-push");
    let conf = dir.join("delayer.conf");
    let text = server_conf(redis.port(), 100, "key_prefix = app:\nlayout = topic");
    std::fs::write(&conf, text).expect("write conf");
    let conf = conf.to_str().expect("path");
    let out = Command::new(BIN).args(["-c", conf, "push", "mail", "m1", "5", "--body-file"]).arg(conf).output();
    ok(out.expect("run"));
    let topic_client = Delayer::open(&redis.url()).expect("client").with_prefix("app:").with_layout(Layout::Topic);
    let job = topic_client.expect("layout").job("mail", "m1").expect("job");
    assert_eq!((job.state.as_str(), job.body_size), ("scheduled", Some(std::fs::metadata(conf).expect("conf").len())));
    let (pool, classic): (u64, u64) = (
        redis.connection().zcard("app:{mail}:pool").expect("zcard"),
        redis.connection().zcard("app:job_pool").expect("zcard"),
    );
    assert_eq!((pool, classic), (1, 0), "pushed in the per-topic layout only");

    // Refused arguments are usage errors (2); nothing is pushed.
    for args in [
        &["push", "t", "", "5"][..],
        &["push", "t", "x", "11y"],
        &["push", "t", "x", "5", "--body-file", "/nonexistent"],
    ] {
        assert_eq!(run(&redis, args).status.code(), Some(2), "{args:?}");
    }
    assert_eq!(d.job("t", "x").expect("job").state.as_str(), "unknown");
}

#[test]
fn list_shows_scheduled_jobs_unless_told_otherwise() {
    let redis = RedisServer::start();
    every_state(&redis);
    let listed = ok(run(&redis, &["list", "t"]));
    assert!(listed.starts_with("a  due "), "{listed}");
    assert_eq!(listed.lines().count(), 1, "{listed}");
    let help = ok(run(&redis, &["list", "--help"]));
    assert!(help.contains("[default: scheduled]"), "{help}");
}

#[test]
fn job_body_shows_the_body_as_text_escaped_and_cut() {
    let redis = RedisServer::start();
    let d = every_state(&redis);
    let text = ok(run(&redis, &["job", "t", "a", "--body"]));
    assert!(text.contains("body content\n    hello\n"), "{text}");
    assert!(!ok(run(&redis, &["job", "t", "a"])).contains("hello"), "the body only when asked");
    let v: serde_json::Value =
        serde_json::from_str(&ok(run(&redis, &["job", "t", "d", "--body", "--json"]))).expect("json");
    assert_eq!((v["state"].as_str(), v["body"].as_str()), (Some("dead"), Some("d")), "{v}");

    d.push_job(&Job::new("t", "bin", Duration::from_secs(60)).body(vec![b'o', b'k', 0xff, 0x1b, b'\n'])).expect("push");
    let text = ok(run(&redis, &["job", "t", "bin", "--body"]));
    assert!(text.contains("ok\\xff\\u{1b}") && text.contains("not UTF-8"), "{text}");
    let big = "x".repeat(200_000);
    d.push_job(&Job::new("t", "big", Duration::from_secs(60)).body(big.as_str())).expect("push");
    let text = ok(run(&redis, &["job", "t", "big", "--body"]));
    assert!(text.len() < 70_000 && text.contains("first 65536 of 200000 bytes"), "{}", &text[text.len() - 200..]);
    let v: serde_json::Value =
        serde_json::from_str(&ok(run(&redis, &["job", "t", "big", "--body", "--json"]))).expect("json");
    assert_eq!(v["body"].as_str().map(str::len), Some(200_000));
    // Another topic's job shows nothing of it.
    assert!(!ok(run(&redis, &["job", "other", "a", "--body"])).contains("hello"));
}

/// Every command, given a wrong password, says so as the server does and
/// names what to change: the URL, or the file's keys and their variables.
#[test]
fn refused_credentials_are_named_with_what_to_change() {
    let redis = RedisServer::start_with(&["--save", "", "--requirepass", "the-secret"]);
    let wrong = format!("redis://:wrong@127.0.0.1:{}/0", redis.port());
    let none = format!("redis://127.0.0.1:{}/0", redis.port());
    let dir = temp_dir("cli-auth");
    let conf = dir.join("delayer.conf");
    std::fs::write(&conf, server_conf(redis.port(), 100, "").replace("password =", "password = wrong")).expect("conf");
    let commands: &[&[&str]] = &[
        &["stats"],
        &["peek", "t"],
        &["job", "t", "a"],
        &["list", "t"],
        &["dead", "list", "t"],
        &["push", "t", "a", "5"],
    ];
    for args in commands {
        for url in [&wrong, &none] {
            let out = delayer(url, args).output().expect("run");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
            assert!(
                stderr.contains("refused our credentials") && stderr.contains("URL of --url"),
                "{args:?}: {stderr}"
            );
            assert!(!stderr.contains("wrong@"), "the URL holds a password: never echoed: {stderr}");
        }
        let out = Command::new(BIN).arg("-c").arg(&conf).args(*args).env_remove("DELAYER_URL").output().expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("refused our credentials")
                && stderr.contains("[redis] password")
                && stderr.contains("DELAYER_REDIS_PASSWORD"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn a_negative_reschedule_is_due_now() {
    let redis = RedisServer::start();
    let d = Delayer::open(&redis.url()).expect("client");
    for (id, args) in [("a", &["--", "-5"][..]), ("b", &["-2.5"]), ("c", &["--", "-5m"])] {
        d.push("t", id, Duration::from_secs(3600)).expect("push");
        let mut all = vec!["reschedule", "t", id];
        all.extend(args);
        let said = ok(run(&redis, &all));
        assert!(said.contains("(now)"), "{args:?}: {said}");
        let due: f64 = redis.connection().zscore("delayer:job_pool", id).expect("zscore");
        assert!(due <= now() + 0.01, "{args:?}: due now, not {due}");
    }
    let help = ok(run(&redis, &["reschedule", "--help"]));
    assert!(help.contains("negative"), "{help}");
    // Beyond the limits either way: refused.
    assert_eq!(run(&redis, &["reschedule", "t", "a", "--", "-11y"]).status.code(), Some(2));
}

#[test]
fn stats_says_each_count_once() {
    let redis = RedisServer::start();
    every_state(&redis);
    let text = ok(run(&redis, &["stats"]));
    // Topic "t" is one row of the per-topic table: scheduled, ready, reserved, dead.
    let rows: Vec<&str> = text.lines().filter(|l| l.split_whitespace().next() == Some("t")).collect();
    assert_eq!(rows.len(), 1, "{text}");
    assert_eq!(rows[0].split_whitespace().collect::<Vec<_>>(), ["t", "1", "1", "1", "1"], "{text}");
}
