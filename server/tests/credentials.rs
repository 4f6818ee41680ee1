//! Credentials Redis refuses: at start the server exits 1 with a clear
//! message (retrying cannot fix them); once running, it says so once and
//! keeps retrying, so it carries on when Redis accepts it again. Secrets
//! never reach the output.

use delayer::Delayer;
use std::time::Duration;
use testkit::{server_conf, wait_until, DelayerProcess, RedisServer, DEADLINE};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");

#[test]
fn no_password_for_a_redis_that_requires_one_exits_1_at_start() {
    let redis = RedisServer::start_with(&["--save", "", "--requirepass", "the-secret"]);
    let mut server = DelayerProcess::start(BIN, &server_conf(redis.port(), 50, ""));
    let status = server.wait_exit(DEADLINE).expect("exits instead of retrying forever");
    let log = server.output();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(log.contains("refused our credentials") && log.contains("NOAUTH"), "{log}");
    assert!(!log.contains("the-secret"), "secret in the output: {log}");
}

/// `errorstat_<code>:count=N` from INFO errorstats: how often Redis refused
/// a command with `code`.
fn refusals(conn: &mut redis::Connection, code: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("errorstats").query(conn).unwrap_or_default();
    let prefix = format!("errorstat_{code}:count=");
    info.lines().find_map(|l| l.strip_prefix(&prefix)?.split(',').next()?.trim().parse().ok()).unwrap_or(0)
}

/// Whether the server has moved job `id` of topic "t" to its ready queue.
fn is_ready(conn: &mut redis::Connection, id: &str) -> bool {
    let ready: Vec<String> =
        redis::cmd("LRANGE").arg("delayer:ready_queue:t").arg(0).arg(-1).query(conn).unwrap_or_default();
    ready.iter().any(|r| r == id)
}

/// A server with `password` (none when empty) runs against a Redis that
/// accepts it; Redis comes back requiring "new-secret". The server says so
/// once, not per tick, with Redis's reason (`why`), keeps trying (Redis
/// counts the refusals: errorstat `code`), and carries on when Redis
/// accepts it again.
fn refused_later(password: &str, code: &str, why: &str) {
    let port = testkit::free_port();
    let open = RedisServer::start_on(port, &["--save", "", "--requirepass", password]);
    let conf = server_conf(port, 20, "").replace("password =", &format!("password = {password}"));
    let server = DelayerProcess::start(BIN, &conf);
    let url = |password: &str| match password {
        "" => format!("redis://127.0.0.1:{port}/"),
        _ => format!("redis://:{password}@127.0.0.1:{port}/"),
    };
    let d = Delayer::open(&url(password)).expect("client");
    d.push("t", "before", Duration::ZERO).expect("push");
    let mut conn = redis::Client::open(url(password)).and_then(|c| c.get_connection()).expect("connect");
    assert!(wait_until(DEADLINE, || is_ready(&mut conn, "before")), "{}", server.output());

    drop(open);
    let _locked = RedisServer::start_on(port, &["--save", "", "--requirepass", "new-secret"]);
    let mut admin = redis::Client::open(url("new-secret")).and_then(|c| c.get_connection()).expect("admin");
    assert!(server.wait_for_output(|o| o.contains("refused our credentials")), "{}", server.output());
    // Several more ticks refused (a tick every 0.1 to 0.5 s while failing).
    let seen = refusals(&mut admin, code);
    let retried = wait_until(Duration::from_secs(60), || refusals(&mut admin, code) >= seen + 6);
    assert!(retried, "server stopped trying: {}", server.output());
    let log = server.output();
    assert_eq!(log.matches("refused our credentials").count(), 1, "said once, not per tick: {log}");
    assert!(log.contains(why), "{log}");
    assert!(!log.contains("new-secret") && (password.is_empty() || !log.contains(password)), "secret: {log}");

    // Redis accepts the server's password again: it moves jobs again.
    let _: () = redis::cmd("CONFIG").arg("SET").arg("requirepass").arg(password).query(&mut admin).expect("config");
    let mut conn = redis::Client::open(url(password)).and_then(|c| c.get_connection()).expect("connect");
    let d = Delayer::open(&url(password)).expect("client");
    d.push("t", "after", Duration::ZERO).expect("push");
    assert!(wait_until(DEADLINE, || is_ready(&mut conn, "after")), "{}", server.output());
    assert!(server.wait_for_output(|o| o.contains("succeed again")), "{}", server.output());
}

#[test]
fn a_password_required_later_is_logged_once_and_retried() {
    refused_later("", "NOAUTH", "Authentication required");
}

#[test]
fn a_password_changed_later_is_logged_once_and_retried() {
    refused_later("old-secret", "WRONGPASS", "authentication failed");
}
