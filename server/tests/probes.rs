//! The probes against the real binary and a real redis-server: liveness
//! (`/healthz`, `/v1/health`) stays 200 while the process serves; readiness
//! (`/readyz`, `/v1/ready`) follows Redis, the mover's ticks and the
//! eviction policy, naming what fails.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use testkit::{free_port, server_conf, wait_until, DelayerProcess, RedisServer, DEADLINE};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");
const TOKEN: &str = "probes-token-0123456789";

/// Status and body of `GET path` on 127.0.0.1:`port`, without a token.
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes()).ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some((status, body.to_string()))
}

fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

/// A server with both listeners (the API behind a token).
struct Probed {
    server: DelayerProcess,
    metrics: u16,
    http: u16,
}

impl Probed {
    fn start(redis_port: u16, extra: &str, env: &[(&str, &str)]) -> Probed {
        let (metrics, http) = (free_port(), free_port());
        let extra =
            format!("metrics_addr = 127.0.0.1:{metrics}\nhttp_addr = 127.0.0.1:{http}\nhttp_token = {TOKEN}\n{extra}");
        let server = DelayerProcess::start_with_env(BIN, &server_conf(redis_port, 50, &extra), env);
        Probed { server, metrics, http }
    }

    /// Waits until both readiness probes answer `status`; the last body of
    /// `/readyz`.
    fn wait_ready(&self, status: u16, what: &str) -> serde_json::Value {
        let mut last = None;
        let both = wait_until(DEADLINE, || {
            let metrics = get(self.metrics, "/readyz");
            let http = get(self.http, "/v1/ready");
            let done = matches!((&metrics, &http), (Some((a, _)), Some((b, _))) if *a == status && *b == status);
            last = metrics.zip(http);
            done
        });
        assert!(both, "{what}: readiness never answered {status}: {last:?}\n{}", self.server.output());
        let ((_, metrics), (_, http)) = last.expect("answered");
        let body = json(&metrics);
        assert_eq!(body["status"], json(&http)["status"], "both listeners share one verdict");
        body
    }

    /// Liveness on both listeners: 200 whatever Redis does.
    fn assert_live(&self) {
        assert_eq!(get(self.metrics, "/healthz"), Some((200, "ok\n".into())), "{}", self.server.output());
        let (status, body) = get(self.http, "/v1/health").expect("/v1/health answers");
        assert_eq!((status, json(&body)["status"].clone()), (200, serde_json::json!("ok")));
    }
}

fn failing(body: &serde_json::Value) -> Vec<String> {
    body["failing"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

#[test]
fn readiness_follows_redis_while_liveness_stays() {
    let mut redis = RedisServer::start();
    let probed = Probed::start(redis.port(), "", &[]);
    let ready = probed.wait_ready(200, "at start");
    assert_eq!(ready["status"], "ready");
    assert_eq!(ready["checks"]["eviction"]["policy"], "noeviction");
    assert_eq!(ready["checks"]["redis"]["ok"], true);
    assert!(ready.get("failing").is_none(), "{ready}");
    probed.assert_live();

    redis.stop();
    let down = probed.wait_ready(503, "redis stopped");
    assert_eq!(down["status"], "not_ready");
    assert!(failing(&down).contains(&"redis".to_string()), "{down}");
    let reason = down["reason"].as_str().unwrap_or_default();
    assert!(reason.contains(&format!("127.0.0.1:{}", redis.port())), "the reason names Redis: {reason}");
    probed.assert_live();

    redis.restart();
    let back = probed.wait_ready(200, "redis back");
    assert_eq!(back["checks"]["mover"]["ok"], true, "{back}");
    probed.assert_live();
}

#[test]
fn an_evicting_redis_is_not_ready() {
    let redis = RedisServer::start();
    let probed = Probed::start(redis.port(), "", &[]);
    probed.wait_ready(200, "at start");
    let mut conn = redis.connection();
    let set = |conn: &mut redis::Connection, policy: &str| {
        redis::cmd("CONFIG").arg("SET").arg("maxmemory-policy").arg(policy).query::<()>(conn).expect("config set")
    };
    set(&mut conn, "allkeys-lru");
    let unsafe_ = probed.wait_ready(503, "allkeys-lru");
    assert_eq!(failing(&unsafe_), ["eviction"], "{unsafe_}");
    assert_eq!(unsafe_["checks"]["eviction"]["policy"], "allkeys-lru");
    assert!(unsafe_["reason"].as_str().unwrap_or_default().contains("allkeys-lru"), "{unsafe_}");
    probed.assert_live();
    set(&mut conn, "noeviction");
    probed.wait_ready(200, "noeviction again");
}

/// A mover whose ticks fail while Redis answers: the per-topic layout's
/// index `<prefix>due` holding a string stops every tick (each fails on it).
#[test]
fn a_mover_whose_ticks_fail_is_not_ready() {
    let redis = RedisServer::start();
    // The stale bound's floor, 10 s, made 1 s (debug builds only).
    let probed = Probed::start(redis.port(), "layout = topic", &[("DELAYER_TEST_STALE_FLOOR_MS", "1000")]);
    let ready = probed.wait_ready(200, "at start");
    assert_eq!(ready["checks"]["mover"]["bound_seconds"], 1.0, "{ready}");
    let mut conn = redis.connection();
    redis::cmd("SET").arg("delayer:due").arg("not a zset").query::<()>(&mut conn).expect("set");
    let stalled = probed.wait_ready(503, "ticks failing");
    assert_eq!(failing(&stalled), ["mover"], "Redis answers, the mover does not move: {stalled}");
    assert!(stalled["reason"].as_str().unwrap_or_default().contains("last tick completed"), "{stalled}");
    redis::cmd("DEL").arg("delayer:due").query::<()>(&mut conn).expect("del");
    probed.wait_ready(200, "the index fixed");
}

/// Started while Redis is down (the foreground server waits for it): not
/// ready, no tick yet, until Redis comes.
#[test]
fn not_ready_before_the_first_tick() {
    let port = free_port();
    let probed = Probed::start(port, "", &[]);
    let waiting = probed.wait_ready(503, "no redis yet");
    let names = failing(&waiting);
    assert!(names.contains(&"redis".to_string()) && names.contains(&"mover".to_string()), "{waiting}");
    let mover = waiting["checks"]["mover"]["reason"].as_str().unwrap_or_default();
    assert!(mover.contains("not completed a tick yet"), "{waiting}");
    probed.assert_live();
    let _redis = RedisServer::start_on(port, &["--save", "", "--appendonly", "no"]);
    probed.wait_ready(200, "redis came");
}

/// A stalled Redis (SIGSTOP: connections open, no answer): readiness still
/// answers, 503 naming Redis, rather than hanging with it.
#[test]
fn a_stalled_redis_is_not_ready_and_the_probe_does_not_hang() {
    let redis = RedisServer::start();
    let probed = Probed::start(redis.port(), "", &[]);
    probed.wait_ready(200, "at start");
    redis.pause();
    // get() gives up after 5 s: a probe hanging on Redis never reads 503.
    let stalled = probed.wait_ready(503, "redis stalled");
    assert!(failing(&stalled).contains(&"redis".to_string()), "{stalled}");
    probed.assert_live();
    redis.resume();
    probed.wait_ready(200, "redis answers again");
}
