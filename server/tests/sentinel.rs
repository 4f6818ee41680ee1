//! Sentinel mode through a failover: the real `delayer` binary and the Rust
//! SDK's sync and async clients, all configured by one delayer.conf with
//! `mode = sentinel`, against 1 master, 1 replica and 3 sentinels. The
//! master is killed with SIGKILL mid-run; the replica takes over and every
//! client and the server carry on without a restart.

use delayer::{Delayer, Job};
use std::path::Path;
use std::time::Duration;
use testkit::sentinel::{make_certificates, Auth, Sentinels, FAILOVER_DEADLINE};
use testkit::{wait_until, DelayerProcess};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");

fn conf(sentinels: &Sentinels, http_port: u16) -> String {
    format!("[delayer]\ntimer_interval = 100\nhttp_addr = 127.0.0.1:{http_port}\n\n{}", sentinels.redis_section())
}

/// A push through the server's HTTP API: `Some(())` on 201, `None` on any
/// other answer (a 5xx while the failover is under way) or no answer.
fn http_push(port: u16, topic: &str, id: &str) -> delayer::Result<Option<()>> {
    use std::io::{Read, Write};
    let body = format!(r#"{{"id":"{id}","delay":0,"body":"via http"}}"#);
    let request = format!(
        "POST /v1/topics/{topic}/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return Ok(None) };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut answer = String::new();
    if stream.write_all(request.as_bytes()).is_err() || stream.read_to_string(&mut answer).is_err() {
        return Ok(None);
    }
    Ok(answer.starts_with("HTTP/1.1 201").then_some(()))
}

/// Retries `f` until it gives `Some` (errors while the failover is under way
/// included), within the failover deadline.
fn eventually<T>(what: &str, mut f: impl FnMut() -> delayer::Result<Option<T>>) -> T {
    let mut last = None;
    let mut found = None;
    let ok = wait_until(FAILOVER_DEADLINE, || match f() {
        Ok(Some(v)) => {
            found = Some(v);
            true
        }
        Ok(None) => false,
        Err(e) => {
            last = Some(e.to_string());
            std::thread::sleep(Duration::from_millis(50));
            false
        }
    });
    assert!(ok, "{what}: never happened; last error: {last:?}");
    found.expect("set when ok")
}

/// Push, pop through the server, reserve and ack, with the sync client.
fn sync_round(client: &Delayer, tag: &str) {
    let topic = format!("sync-{tag}");
    eventually("sync push", || client.push(&topic, &format!("{tag}-1"), Duration::ZERO).map(Some));
    let job = eventually("sync pop", || client.pop(&topic));
    assert_eq!(job.id, format!("{tag}-1"));
    eventually("sync push 2", || client.push_job(&Job::new(&topic, format!("{tag}-2"), Duration::ZERO)).map(Some));
    let held = eventually("sync reserve", || client.reserve(&topic, Duration::from_secs(60)));
    assert_eq!(held.id, format!("{tag}-2"));
    assert!(client.ack(&held).expect("ack"), "the reservation was held");
}

/// The same with the async client: push, pop, push, reserve, ack, and a
/// bpop that finds nothing left.
async fn async_round(client: &delayer::aio::Delayer, tag: &str) {
    let topic = format!("aio-{tag}");
    let deadline = tokio::time::Instant::now() + FAILOVER_DEADLINE;
    let mut step = 0;
    let mut held = None;
    let mut last = String::new();
    while step < 6 {
        assert!(tokio::time::Instant::now() < deadline, "async {tag}: stuck at step {step}: {last}");
        let done = match step {
            0 => client.push(&topic, &format!("{tag}-1"), Duration::ZERO).await.map(|_| true),
            1 => client.pop(&topic).await.map(|job| job.is_some_and(|j| j.id == format!("{tag}-1"))),
            2 => client.push(&topic, &format!("{tag}-2"), Duration::ZERO).await.map(|_| true),
            3 => client.reserve(&topic, Duration::from_secs(60)).await.map(|job| {
                held = job.filter(|j| j.id == format!("{tag}-2"));
                held.is_some()
            }),
            4 => match &held {
                Some(job) => client.ack(job).await.map(|acked| {
                    assert!(acked, "the reservation was held");
                    true
                }),
                None => Ok(false),
            },
            _ => client.bpop(&topic, Duration::from_secs(1)).await.map(|job| job.is_none()),
        };
        match done {
            Ok(true) => step += 1,
            Ok(false) => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(e) => {
                last = e.to_string();
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

fn both_rounds(sync: &Delayer, aio: &delayer::aio::Delayer, rt: &tokio::runtime::Runtime, tag: &str) {
    sync_round(sync, tag);
    rt.block_on(async_round(aio, tag));
}

fn run(auth: Auth) {
    let mut sentinels = Sentinels::start_with(auth);
    let http_port = testkit::free_port();
    let server = DelayerProcess::start(BIN, &conf(&sentinels, http_port));
    let path = server.dir.join("delayer.conf");
    assert!(server.wait_for_output(|out| out.contains("starting")), "{}", server.output());
    let sync = Delayer::from_conf(&path).expect("sync client");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let aio = rt.block_on(async { delayer::aio::Delayer::from_conf(Path::new(&path)) }).expect("async client");

    both_rounds(&sync, &aio, &rt, "before");
    eventually("http push before", || http_push(http_port, "web", "before"));
    let before = sentinels.master_port();
    let new_master = sentinels.kill_master();
    assert_ne!(sentinels.master_port(), before);
    both_rounds(&sync, &aio, &rt, "after");
    // The HTTP API follows the failover too: its push lands on the new master.
    eventually("http push after", || http_push(http_port, "web", "after"));
    eventually("the http push, popped", || sync.pop("web").map(|job| job.filter(|j| j.id == "after")));
    // The server moved the jobs on the new master, without a restart.
    let mut server = server;
    assert!(server.is_running(), "{}", server.output());
    let mut conn = sentinels.connection(new_master);
    let pool: usize = redis::cmd("ZCARD").arg("delayer:job_pool").query(&mut conn).expect("zcard");
    assert_eq!(pool, 0, "every job was moved");
    assert!(!server.output().contains("-secret"), "no secret in the log: {}", server.output());
}

#[test]
fn clients_and_the_server_follow_a_failover() {
    run(Auth::default());
}

/// ACL-style passwords: the master's and the sentinels' differ, and neither
/// reaches the log.
#[test]
fn with_passwords_for_the_master_and_the_sentinels() {
    run(Auth {
        redis_password: Some("master-secret".into()),
        sentinel_password: Some("sentinel-secret".into()),
        tls: None,
    });
}

/// TLS everywhere (nodes, replication, sentinels) with a private CA:
/// `tls = yes` and `tls_ca_file` take the clients and the server to the
/// sentinels and the master over TLS, through a failover.
#[test]
fn over_tls_with_a_private_ca() {
    let certs = testkit::temp_dir("sentinel-certs");
    let tls = make_certificates(&certs);
    run(Auth { tls: Some(tls), ..Auth::default() });
    let _ = std::fs::remove_dir_all(certs);
}

/// A failover asked of the sentinels leaves the old master up, demoted (the
/// sentinels close its clients' connections; one that stayed open would get
/// READONLY, which sends the call to the new master too): the clients' first
/// calls after the switch succeed, on the new master.
#[test]
fn a_demoted_master_sends_the_clients_to_the_new_one() {
    let mut sentinels = Sentinels::start();
    let server = DelayerProcess::start(BIN, &conf(&sentinels, testkit::free_port()));
    let path = server.dir.join("delayer.conf");
    let sync = Delayer::from_conf(&path).expect("sync client");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let aio = rt.block_on(async { delayer::aio::Delayer::from_conf(Path::new(&path)) }).expect("async client");
    both_rounds(&sync, &aio, &rt, "before");
    let new_master = sentinels.switch_master();
    // The pooled and shared connections still point at the demoted node:
    // the very first calls must succeed (no error, no retry by the test).
    sync.push("demoted", "sync-1", Duration::from_secs(3600)).expect("sync push after the switch");
    rt.block_on(aio.push("demoted", "aio-1", Duration::from_secs(3600))).expect("async push after the switch");
    let mut conn = sentinels.connection(new_master);
    let pool: usize = redis::cmd("ZCARD").arg("delayer:job_pool").query(&mut conn).expect("zcard");
    assert_eq!(pool, 2, "both pushes reached the new master");
    both_rounds(&sync, &aio, &rt, "after");
    drop(server);
}
