//! Reaching Redis in every supported way: TLS with a private CA, an ACL user
//! limited to the delayer keys, a unix socket. Server and SDK read the same
//! delayer.conf; passwords never reach the logs.

use delayer::Delayer;
use std::process::Command;
use std::time::Duration;
use testkit::sentinel::make_certificates;
use testkit::{wait_until, DelayerProcess, RedisServer, DEADLINE};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");

/// Starts the server on `conf`, pushes a job through an SDK client made from
/// the same file, and waits for the server to deliver it.
fn round_trip(conf: &str) -> DelayerProcess {
    let server = DelayerProcess::start(BIN, conf);
    let client = Delayer::from_conf(server.dir.join("delayer.conf")).expect("client from the same conf");
    client.push("t", "via-conf", Duration::from_millis(50)).expect("push");
    let got = client.bpop("t", DEADLINE).expect("bpop");
    assert_eq!(got.map(|m| m.id), Some("via-conf".into()), "{}", server.output());
    server
}

#[test]
fn tls_with_a_private_ca() {
    let certs = testkit::temp_dir("certs");
    let (cert, key, ca) = make_certificates(&certs);
    let redis = RedisServer::start_tls(&cert, &key, &ca);
    let conf = format!(
        "[delayer]\ntimer_interval = 50\nlog_level = debug\n[redis]\nurl = rediss://127.0.0.1:{}/0\ntls_ca_file = {}\n",
        redis.port(),
        ca.display()
    );
    let server = round_trip(&conf);
    assert!(wait_until(DEADLINE, || server.output().contains("moved 1")), "{}", server.output());

    // Without the CA, the certificate is not trusted: a clear error, no hang.
    let untrusted = format!("[redis]\nurl = rediss://127.0.0.1:{}/0\n", redis.port());
    let mut server = DelayerProcess::start(BIN, &untrusted);
    assert!(
        wait_until(DEADLINE, || server.output().contains("not reachable yet") || !server.is_running()),
        "{}",
        server.output()
    );
    let _ = std::fs::remove_dir_all(certs);
}

#[test]
fn an_acl_user_limited_to_the_delayer_keys() {
    let redis = RedisServer::start_with(&[
        "--save",
        "",
        "--user",
        "default",
        "off",
        "--user",
        "delayer",
        "on",
        ">acl-secret-pw",
        "~delayer:*",
        "+@all",
        "-@admin",
        "-@dangerous",
    ]);
    let conf = format!(
        "[delayer]\ntimer_interval = 50\n[redis]\nport = {}\nusername = delayer\npassword = acl-secret-pw\n",
        redis.port()
    );
    let server = round_trip(&conf);
    assert!(!server.output().contains("acl-secret-pw"), "password logged: {}", server.output());

    // The user really is limited: a key outside delayer:* is refused.
    let mut conn = redis::Client::open(format!("redis://delayer:acl-secret-pw@127.0.0.1:{}/", redis.port()))
        .and_then(|c| c.get_connection())
        .expect("connect as delayer");
    let denied: redis::RedisResult<()> = redis::cmd("SET").arg("other:key").arg(1).query(&mut conn);
    let denied = denied.expect_err("a key outside delayer:* must be refused");
    assert!(denied.to_string().contains("NOPERM") || denied.code() == Some("NOPERM"), "{denied:?}");

    // A wrong password for the user: exit 1 with a clear message, not a hang.
    let wrong = conf.replace("acl-secret-pw", "not-the-pw");
    let mut server = DelayerProcess::start(BIN, &wrong);
    let status = server.wait_exit(DEADLINE).expect("exits");
    assert_eq!(status.code(), Some(1), "{}", server.output());
    assert!(server.output().contains("refused our credentials"));
    assert!(!server.output().contains("not-the-pw"));
}

#[test]
fn a_unix_socket() {
    let dir = testkit::temp_dir("sock");
    let socket = dir.join("redis.sock");
    let redis = RedisServer::start_with(&[
        "--save",
        "",
        "--unixsocket",
        &socket.display().to_string(),
        "--unixsocketperm",
        "700",
    ]);
    assert!(wait_until(DEADLINE, || socket.exists()));
    let conf = format!("[delayer]\ntimer_interval = 50\n[redis]\nurl = unix://{}\n", socket.display());
    let server = round_trip(&conf);
    assert!(server.output().contains(&socket.display().to_string()), "{}", server.output());
    drop(redis);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn url_and_host_together_is_a_config_error() {
    let dir = testkit::temp_dir("both");
    std::fs::write(dir.join("delayer.conf"), "[redis]\nurl = redis://127.0.0.1:1/\nport = 6380\n").expect("conf");
    let out = Command::new(BIN).arg("-c").arg(dir.join("delayer.conf")).output().expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("[redis] port") && stderr.contains(":3:"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}
