//! `delayer webhook` against real parts: a redis-server, the `delayer`
//! server moving due jobs (on the same file, whose webhook sections it
//! ignores), the webhook process itself, and a real HTTP receiver on
//! 127.0.0.1 started here, which answers as each test tells it: 2xx, errors,
//! slowly, or not at all.

use delayer::{Backoff, Delayer, Job};
use hmac::{Hmac, KeyInit, Mac};
use redis::Commands;
use sha2::Sha256;
use std::collections::HashMap;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use testkit::{free_port, server_conf, temp_dir, wait_until, DelayerProcess, RedisServer, DEADLINE};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");
const SECRET: &str = "whsec-7Hq2-do-not-log";
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

// ---- the receiver --------------------------------------------------------

/// A request as the receiver read it.
#[derive(Debug, Clone)]
struct Request {
    path: String,
    /// Header names in lower case.
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

impl Request {
    fn header(&self, name: &str) -> &str {
        self.headers.get(name).map(String::as_str).unwrap_or("")
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

/// How the receiver answers one request.
#[derive(Debug, Clone, Copy)]
enum Answer {
    Status(u16),
    /// Waits, then answers with the status.
    After(Duration, u16),
    /// Closes the connection without a word.
    HangUp,
    /// Says nothing until the sender gives up and closes.
    Silent,
}

type Rule = dyn Fn(&Request, usize) -> Answer + Send + Sync;

/// An HTTP/1.1 server on 127.0.0.1 that records every request and answers
/// as `rule` says (given the request and how many came before it on the
/// same path). Stopped on drop.
struct Receiver {
    port: u16,
    requests: Arc<Mutex<Vec<Request>>>,
    stop: Arc<AtomicBool>,
}

impl Receiver {
    fn start(rule: impl Fn(&Request, usize) -> Answer + Send + Sync + 'static) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the receiver");
        let port = listener.local_addr().expect("address").port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let rule: Arc<Rule> = Arc::new(rule);
        let (seen, stopped) = (requests.clone(), stop.clone());
        thread::spawn(move || {
            for conn in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (seen, rule, stopped) = (seen.clone(), rule.clone(), stopped.clone());
                thread::spawn(move || serve(conn, &seen, &*rule, &stopped));
            }
        });
        Receiver { port, requests, stop }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn requests(&self) -> Vec<Request> {
        self.requests.lock().expect("requests").clone()
    }

    fn on(&self, path: &str) -> Vec<Request> {
        self.requests().into_iter().filter(|r| r.path == path).collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Serves the requests of one connection (keep-alive) until it closes.
fn serve(conn: TcpStream, seen: &Mutex<Vec<Request>>, rule: &Rule, stopped: &AtomicBool) {
    let mut reader = BufReader::new(conn.try_clone().expect("clone the connection"));
    let mut writer = conn;
    loop {
        let Some(request) = read_request(&mut reader) else { return };
        let before = {
            let mut seen = seen.lock().expect("requests");
            let before = seen.iter().filter(|r| r.path == request.path).count();
            seen.push(request.clone());
            before
        };
        let status = match rule(&request, before) {
            Answer::Status(code) => code,
            Answer::After(wait, code) => {
                thread::sleep(wait);
                code
            }
            Answer::HangUp => {
                let _ = writer.shutdown(Shutdown::Both);
                return;
            }
            Answer::Silent => {
                // Until the sender hangs up (its timeout), or the test ends.
                let _ = reader.get_ref().set_read_timeout(Some(Duration::from_millis(200)));
                let mut buf = [0u8; 1024];
                while !stopped.load(Ordering::SeqCst) {
                    match reader.read(&mut buf) {
                        Ok(0) => return,
                        Ok(_) => {}
                        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                        }
                        Err(_) => return,
                    }
                }
                return;
            }
        };
        let answer = format!("HTTP/1.1 {status} Whatever\r\ncontent-length: 2\r\ncontent-type: text/plain\r\n\r\nok");
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let path = line.split_whitespace().nth(1)?.to_string();
    let mut headers = HashMap::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':')?;
        headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
    }
    let length: usize = headers.get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Request { path, headers, body })
}

// ---- the processes -------------------------------------------------------

/// The file the server and the webhook process share: `[delayer]`,
/// `[redis]`, then `sections`.
fn conf(redis: &RedisServer, sections: &str) -> String {
    format!("{}\n{sections}", server_conf(redis.port(), 50, ""))
}

fn section(topic: &str, url: &str, extra: &str) -> String {
    format!("[webhook.{topic}]\nurl = {url}\nsecret = {SECRET}\n{extra}\n")
}

/// A running `delayer webhook -c <file>`, killed on drop.
struct Webhook {
    child: Option<Child>,
    dir: PathBuf,
}

impl Webhook {
    fn start(conf: &str) -> Webhook {
        let dir = temp_dir("webhook");
        fs::write(dir.join("delayer.conf"), conf).expect("write delayer.conf");
        let child = webhook_command(&dir.join("delayer.conf"))
            .stdout(fs::File::create(dir.join("out.log")).expect("out.log"))
            .stderr(fs::File::create(dir.join("err.log")).expect("err.log"))
            .spawn()
            .expect("start delayer webhook");
        let hook = Webhook { child: Some(child), dir };
        assert!(hook.wait_for(|o| o.contains("starting")), "{}", hook.output());
        hook
    }

    fn output(&self) -> String {
        let read = |name: &str| fs::read_to_string(self.dir.join(name)).unwrap_or_default();
        format!("{}{}", read("out.log"), read("err.log"))
    }

    fn wait_for(&self, mut check: impl FnMut(&str) -> bool) -> bool {
        wait_until(DEADLINE, || check(&self.output()))
    }

    fn signal(&self, name: &str) {
        if let Some(child) = &self.child {
            let _ = Command::new("kill").arg(format!("-{name}")).arg(child.id().to_string()).status();
        }
    }

    fn wait_exit(&mut self, deadline: Duration) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        let mut status = None;
        wait_until(deadline, || {
            status = child.try_wait().ok().flatten();
            status.is_some()
        });
        status
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// `delayer webhook -c <path>`, with no proxy from the environment between
/// it and the receiver.
fn webhook_command(path: &Path) -> Command {
    let mut command = Command::new(BIN);
    command.arg("webhook").arg("-c").arg(path).stdin(Stdio::null());
    for var in ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"] {
        command.env_remove(var);
    }
    command
}

/// A job due now that retries quickly.
fn job(topic: &str, id: &str, body: &[u8], max_attempts: u32) -> Job {
    Job::new(topic, id, Duration::ZERO)
        .body(body.to_vec())
        .max_attempts(max_attempts)
        .backoff(Backoff::fixed(Duration::from_millis(100)))
}

fn bucket(redis: &RedisServer, id: &str) -> HashMap<String, String> {
    redis.connection().hgetall(format!("delayer:job_bucket:{id}")).expect("HGETALL")
}

fn dead(redis: &RedisServer, topic: &str) -> Vec<String> {
    redis.connection().lrange(format!("delayer:dead:{topic}"), 0, -1).expect("LRANGE")
}

fn gone(redis: &RedisServer, id: &str) -> bool {
    !redis.connection().exists::<_, bool>(format!("delayer:job_bucket:{id}")).expect("EXISTS")
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs()
}

fn signature(secret: &str, timestamp: &str, body: &[u8]) -> Hmac<Sha256> {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).expect("any key");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// Whether `request` carries a valid signature of its body by `secret`
/// (compared in constant time, as a receiver must).
fn signed_by(request: &Request, secret: &str) -> bool {
    let Some(hex) = request.header("x-delayer-signature").strip_prefix("sha256=") else { return false };
    let Some(bytes) = (0..hex.len())
        .step_by(2)
        .map(|i| hex.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect::<Option<Vec<u8>>>()
    else {
        return false;
    };
    signature(secret, request.header("x-delayer-timestamp"), &request.body).verify_slice(&bytes).is_ok()
}

// ---- the tests -----------------------------------------------------------

#[test]
fn jobs_are_delivered_signed_and_acked_with_their_trace_context() {
    let redis = RedisServer::start();
    let receiver = Receiver::start(|_, _| Answer::Status(204));
    let text = conf(&redis, &section("close order", &receiver.url("/hooks/close"), "concurrency = 2"));
    let _server = DelayerProcess::start(BIN, &text);
    let hook = Webhook::start(&text);
    let d = Delayer::open(&redis.url()).expect("client");
    let traced = job("close order", "order 42", "{\"order\":42,\"name\":\"é\"}".as_bytes(), 3).traceparent(TRACEPARENT);
    d.push_job(&traced).expect("push");
    d.push_job(&job("close order", "bin", &[0xff, 0x00, 0x01], 3)).expect("push");

    assert!(wait_until(DEADLINE, || gone(&redis, "order 42") && gone(&redis, "bin")), "{}", hook.output());
    let requests = receiver.on("/hooks/close");
    assert_eq!(requests.len(), 2, "one POST each: {requests:?}");
    for request in &requests {
        assert!(signed_by(request, SECRET), "signature: {request:?}");
        assert!(!signed_by(request, "another secret"));
        let sent: u64 = request.header("x-delayer-timestamp").parse().expect("Unix seconds");
        assert!(sent.abs_diff(now_secs()) < 300, "timestamp {sent}");
        assert_eq!(request.header("content-type"), "application/json");
        // The trace context pushed with the job, as the W3C header; none without.
        let traced = request.json()["id"] == "order 42";
        assert_eq!(request.headers.get("traceparent").map(String::as_str), traced.then_some(TRACEPARENT));
    }
    let by_id: HashMap<String, serde_json::Value> =
        requests.iter().map(|r| (r.json()["id"].as_str().unwrap_or("").to_string(), r.json())).collect();
    assert_eq!(
        by_id["order 42"],
        serde_json::json!({"id": "order 42", "topic": "close order", "body": "{\"order\":42,\"name\":\"é\"}", "attempts": 1})
    );
    assert_eq!(
        by_id["bin"],
        serde_json::json!({"id": "bin", "topic": "close order", "body_base64": "/wAB", "attempts": 1})
    );
    assert!(!hook.output().contains(SECRET), "{}", hook.output());
}

#[test]
fn a_paused_topic_is_not_delivered_until_it_is_resumed() {
    let redis = RedisServer::start();
    let receiver = Receiver::start(|_, _| Answer::Status(204));
    let text = conf(&redis, &section("sms", &receiver.url("/hooks/sms"), "concurrency = 2"));
    let _server = DelayerProcess::start(BIN, &text);
    let hook = Webhook::start(&text);
    let d = Delayer::open(&redis.url()).expect("client");
    d.push_job(&job("sms", "before", b"x", 3)).expect("push");
    assert!(wait_until(DEADLINE, || receiver.on("/hooks/sms").len() == 1), "{}", hook.output());
    assert!(d.pause("sms").expect("pause"));
    for i in 0..3 {
        d.push_job(&job("sms", &format!("held{i}"), b"x", 3)).expect("push");
    }
    assert!(wait_until(DEADLINE, || d.flow("sms").expect("flow").held == 3), "held: {}", hook.output());
    // The webhook is the tokio Worker: it waits on the topic's gate.
    thread::sleep(Duration::from_millis(1500));
    assert_eq!(receiver.on("/hooks/sms").len(), 1, "a paused topic's job was delivered");
    assert!(d.resume("sms").expect("resume"));
    assert!(wait_until(DEADLINE, || (0..3).all(|i| gone(&redis, &format!("held{i}")))), "{}", hook.output());
    let ids: Vec<String> =
        receiver.on("/hooks/sms").iter().map(|r| r.json()["id"].as_str().unwrap_or("").to_string()).collect();
    assert_eq!(ids.len(), 4, "each delivered once: {ids:?}");
}

#[test]
fn the_webhook_reads_the_per_topic_layout_from_its_config() {
    let redis = RedisServer::start();
    let receiver = Receiver::start(|_, _| Answer::Status(204));
    let text = format!(
        "{}\n{}",
        server_conf(redis.port(), 50, "layout = topic"),
        section("close order", &receiver.url("/hooks/close"), "")
    );
    let _server = DelayerProcess::start(BIN, &text);
    let hook = Webhook::start(&text);
    assert!(hook.output().contains("layout topic"), "{}", hook.output());
    let d = Delayer::open(&redis.url()).expect("client").with_layout(delayer::Layout::Topic).expect("layout");
    d.push_job(&job("close order", "order 7", b"{\"order\":7}", 3)).expect("push");
    let bucket = delayer_protocol::keys::TopicKeys::new("delayer:").bucket("close order", "order 7");
    let acked = wait_until(DEADLINE, || {
        !receiver.on("/hooks/close").is_empty() && !redis.connection().exists::<_, bool>(&bucket).unwrap_or(true)
    });
    assert!(acked, "delivered and acked in the per-topic layout:\n{}", hook.output());
    let requests = receiver.on("/hooks/close");
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0].json()["id"], "order 7");
}

#[test]
fn an_error_answer_retries_and_the_last_one_makes_a_dead_letter_with_the_status() {
    let redis = RedisServer::start();
    // /flaky fails once, then takes the job; /down always fails.
    let receiver = Receiver::start(|r, before| match (r.path.as_str(), before) {
        ("/flaky", 0) => Answer::Status(503),
        ("/flaky", _) => Answer::Status(200),
        _ => Answer::Status(500),
    });
    let text = conf(
        &redis,
        &(section("flaky", &receiver.url("/flaky"), "") + &section("down", &receiver.url("/down?token=t0k3n"), "")),
    );
    let _server = DelayerProcess::start(BIN, &text);
    let hook = Webhook::start(&text);
    let d = Delayer::open(&redis.url()).expect("client");
    d.push_job(&job("flaky", "f", b"x", 5)).expect("push");
    d.push_job(&job("down", "d", b"y", 3)).expect("push");

    assert!(wait_until(DEADLINE, || gone(&redis, "f")), "{}", hook.output());
    let attempts: Vec<serde_json::Value> = receiver.on("/flaky").iter().map(|r| r.json()["attempts"].clone()).collect();
    assert_eq!(attempts, [1, 2]);

    assert!(wait_until(DEADLINE, || dead(&redis, "down") == ["d"]), "{}", hook.output());
    assert_eq!(receiver.on("/down?token=t0k3n").len(), 3, "max_attempts 3");
    // Counted in Redis per topic and outcome, as every consumer's ends are.
    let outcomes: HashMap<String, String> = redis.connection().hgetall("delayer:outcomes").expect("HGETALL");
    let counted = |f: &str| outcomes.get(f).map(String::as_str);
    assert_eq!((counted("released:flaky"), counted("acked:flaky")), (Some("1"), Some("1")), "{outcomes:?}");
    assert_eq!((counted("released:down"), counted("dead_lettered:down")), (Some("2"), Some("1")), "{outcomes:?}");
    let job = bucket(&redis, "d");
    assert_eq!(job.get("dead_reason").map(String::as_str), Some("max_attempts"), "{job:?}");
    assert_eq!(job.get("last_error").map(String::as_str), Some("HTTP 500 Internal Server Error"), "{job:?}");
    // What an operator sees.
    let out = Command::new(BIN).args(["job", "down", "d", "--json", "--url", &redis.url()]).output().expect("run");
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout).expect("delayer job --json");
    assert_eq!(
        (seen["state"].as_str(), seen["last_error"].as_str()),
        (Some("dead"), Some("HTTP 500 Internal Server Error"))
    );
    // One line per failed delivery: 1 for /flaky, 3 for /down, the last
    // saying it is a dead letter; no secret, no token from the URL.
    assert!(hook.wait_for(|o| o.matches("failed after").count() == 4), "{}", hook.output());
    let out = hook.output();
    assert!(out.contains("job \"f\" attempt 1 of 5 to http://127.0.0.1:"), "{out}");
    assert!(out.contains("HTTP 503 Service Unavailable; retried after its backoff"), "{out}");
    assert!(
        out.contains("job \"d\" attempt 3 of 3")
            && out.contains("HTTP 500 Internal Server Error; moved to dead letters"),
        "{out}"
    );
    assert!(!out.contains(SECRET) && !out.contains("t0k3n"), "{out}");
}

#[test]
fn slow_silent_hung_up_and_refused_deliveries_fail_with_their_reason() {
    let redis = RedisServer::start();
    let receiver = Receiver::start(|r, _| match r.path.as_str() {
        "/slow" => Answer::After(Duration::from_secs(4), 200),
        "/silent" => Answer::Silent,
        _ => Answer::HangUp,
    });
    let refused = format!("http://127.0.0.1:{}/nobody", free_port());
    let timeout = "timeout = 1\nttr = 10";
    let text = conf(
        &redis,
        &[
            section("slow", &receiver.url("/slow"), timeout),
            section("silent", &receiver.url("/silent"), timeout),
            section("hangup", &receiver.url("/hangup"), timeout),
            section("refused", &refused, timeout),
        ]
        .concat(),
    );
    let _server = DelayerProcess::start(BIN, &text);
    let hook = Webhook::start(&text);
    let d = Delayer::open(&redis.url()).expect("client");
    for topic in ["slow", "silent", "hangup", "refused"] {
        d.push_job(&job(topic, topic, b"z", 2)).expect("push");
    }
    for topic in ["slow", "silent", "hangup", "refused"] {
        assert!(wait_until(DEADLINE, || dead(&redis, topic) == [topic]), "{topic}: {}", hook.output());
    }
    let reason = |id: &str| bucket(&redis, id).get("last_error").cloned().unwrap_or_default();
    assert_eq!(reason("slow"), "timeout: no answer within 1 s");
    assert_eq!(reason("silent"), "timeout: no answer within 1 s");
    let hung_up = reason("hangup");
    assert!(!hung_up.is_empty() && !hung_up.contains("timeout") && !hung_up.contains("HTTP"), "{hung_up}");
    assert!(reason("refused").to_lowercase().contains("refused"), "{}", reason("refused"));
    assert_eq!(receiver.on("/slow").len(), 2);
    assert!(hook.wait_for(|o| o.matches("failed after").count() == 8), "{}", hook.output());
}

#[test]
fn sighup_reopens_the_log_and_sigterm_lets_the_delivery_in_flight_finish_and_takes_no_new_job() {
    let redis = RedisServer::start();
    let receiver = Receiver::start(|_, _| Answer::After(Duration::from_secs(2), 200));
    let text = format!(
        "{}\n{}",
        server_conf(redis.port(), 50, "access_log = access.log"),
        section("t", &receiver.url("/t"), "timeout = 20")
    );
    let _server = DelayerProcess::start(BIN, &text);
    let mut hook = Webhook::start(&text);
    // SIGHUP reopens the log file (after logrotate moved it).
    let log = hook.dir.join("access.log");
    assert!(wait_until(DEADLINE, || fs::read_to_string(&log).is_ok_and(|l| l.contains("starting"))));
    fs::rename(&log, hook.dir.join("access.log.1")).expect("rotate");
    hook.signal("HUP");
    let reopened = wait_until(DEADLINE, || fs::read_to_string(&log).is_ok_and(|l| l.contains("log files reopened")));
    assert!(reopened, "{}", hook.output());
    let d = Delayer::open(&redis.url()).expect("client");
    d.push_job(&job("t", "in flight", b"1", 3)).expect("push");
    assert!(wait_until(DEADLINE, || receiver.on("/t").len() == 1), "{}", hook.output());

    hook.signal("TERM");
    assert!(hook.wait_for(|o| o.contains("stopping: no new jobs")), "{}", hook.output());
    d.push_job(&job("t", "after stop", b"2", 3)).expect("push");
    let status = hook.wait_exit(DEADLINE).expect("exits");
    assert!(status.success(), "{status:?}: {}", hook.output());
    // The delivery in flight was answered and acked; the job pushed after
    // the signal is left for the next run.
    assert!(gone(&redis, "in flight"), "{:?}", bucket(&redis, "in flight"));
    assert_eq!(receiver.on("/t").len(), 1, "{:?}\n{}", receiver.requests(), hook.output());
    assert!(!gone(&redis, "after stop"), "{}", hook.output());
    assert!(hook.output().contains("stopped"), "{}", hook.output());
}

#[test]
fn deliveries_go_on_after_a_redis_restart_and_one_in_flight_is_acked_once_redis_is_back() {
    let mut redis = RedisServer::start_with(&["--appendonly", "yes"]);
    // "slow" is answered (200) while Redis is down; its ack waits for Redis.
    let receiver = Receiver::start(|r, _| match r.json()["id"].as_str() {
        Some("slow") => Answer::After(Duration::from_secs(3), 200),
        _ => Answer::Status(200),
    });
    let text = conf(&redis, &section("t", &receiver.url("/t"), ""));
    let _server = DelayerProcess::start(BIN, &text);
    let hook = Webhook::start(&text);
    let d = Delayer::open(&redis.url()).expect("client");
    d.push_job(&job("t", "before", b"1", 3)).expect("push");
    assert!(wait_until(DEADLINE, || gone(&redis, "before")), "{}", hook.output());
    d.push_job(&job("t", "slow", b"2", 3)).expect("push");
    assert!(wait_until(DEADLINE, || receiver.on("/t").len() == 2), "{}", hook.output());

    redis.stop();
    assert!(hook.wait_for(|o| o.contains("lost redis")), "{}", hook.output());
    redis.restart();
    let d = Delayer::open(&redis.url()).expect("client");
    d.push_job(&job("t", "after", b"3", 3)).expect("push");
    assert!(wait_until(DEADLINE, || gone(&redis, "after") && gone(&redis, "slow")), "{}", hook.output());
    let ids: Vec<serde_json::Value> = receiver.on("/t").iter().map(|r| r.json()["id"].clone()).collect();
    assert_eq!(ids, ["before", "slow", "after"], "each once");
    assert!(hook.wait_for(|o| o.contains("redis answers again")), "{}", hook.output());
}

#[test]
fn a_bad_webhook_section_stops_it_with_file_line_and_key() {
    let redis = RedisServer::start();
    let dir = temp_dir("webhook-conf");
    let cases = [
        (section("t", "ftp://example.com/", ""), "[webhook.t] url: not an http:// or https:// URL with a host"),
        ("[webhook.t]\nurl = http://127.0.0.1:1/\n".to_string(), "[webhook.t]: secret is required"),
        (
            section("t", "http://127.0.0.1:1/", "timeout = 30\nttr = 20"),
            "[webhook.t] ttr: 20 s is not longer than timeout",
        ),
        (section("t", "http://127.0.0.1:1/", "tmeout = 3"), "[webhook.t] tmeout: unknown key (did you mean timeout?)"),
        (String::new(), "no [webhook.<topic>] section"),
    ];
    for (n, (sections, expected)) in cases.iter().enumerate() {
        let path = dir.join(format!("bad{n}.conf"));
        fs::write(&path, conf(&redis, sections)).expect("write");
        let out = webhook_command(&path).output().expect("run delayer webhook");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{expected}: {stderr}");
        assert!(stderr.contains(&format!("{}:", path.display())) && stderr.contains(expected), "{expected}: {stderr}");
        assert!(!stderr.contains(SECRET), "{stderr}");
    }
    let out = Command::new(BIN).args(["webhook", "--url", "redis://127.0.0.1:1/"]).output().expect("run");
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    // Delayer 1.x's Go-style spelling of -c reaches the same check.
    let bad = dir.join("bad0.conf");
    let out = Command::new(BIN).arg("webhook").arg(format!("-configuration={}", bad.display())).output().expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(2) && stderr.contains(&format!("{}:", bad.display())), "{stderr}");
    let _ = fs::remove_dir_all(dir);
}

/// docs/webhook-verify/: the receivers the README shows, run by their own
/// interpreters on a request this webhook process really sent.
const RECEIVERS: [(&str, &str); 3] = [("python3", "verify.py"), ("php", "verify.php"), ("node", "verify.js")];

fn verify_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/webhook-verify")
}

/// Runs one receiver script on a request; true when it says valid.
fn receiver_accepts(program: &str, script: &str, secret: &str, timestamp: &str, signature: &str, body: &[u8]) -> bool {
    let mut child = Command::new(program)
        .arg(verify_dir().join(script))
        .args([timestamp, signature])
        .env("WEBHOOK_SECRET", secret)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{program} must be installed to check {script}: {e}"));
    child.stdin.take().expect("stdin").write_all(body).expect("write the body");
    let out = child.wait_with_output().expect("run the receiver");
    let said = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(said == "valid" || said == "invalid", "{script}: {said} {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.success(), said == "valid", "{script}: exit status and answer agree");
    said == "valid"
}

#[test]
fn the_readme_receivers_verify_a_real_request_and_refuse_forged_or_old_ones() {
    let redis = RedisServer::start();
    let receiver = Receiver::start(|_, _| Answer::Status(200));
    let text = conf(&redis, &section("t", &receiver.url("/t"), ""));
    let _server = DelayerProcess::start(BIN, &text);
    let hook = Webhook::start(&text);
    let d = Delayer::open(&redis.url()).expect("client");
    d.push_job(&job("t", "order 42", "{\"total\": \"12.50 €\"}".as_bytes(), 3)).expect("push");
    assert!(wait_until(DEADLINE, || receiver.on("/t").len() == 1), "{}", hook.output());
    let request = receiver.on("/t").remove(0);
    let (timestamp, signature) = (request.header("x-delayer-timestamp"), request.header("x-delayer-signature"));

    // Ten minutes old, though correctly signed: a replay.
    let old = (now_secs() - 600).to_string();
    let old_signature: String = signature_of(SECRET, &old, &request.body);
    let mut tampered = request.body.clone();
    tampered.extend_from_slice(b" ");
    for (program, script) in RECEIVERS {
        let accepts = |secret: &str, timestamp: &str, signature: &str, body: &[u8]| {
            receiver_accepts(program, script, secret, timestamp, signature, body)
        };
        assert!(accepts(SECRET, timestamp, signature, &request.body), "{script}: the real request");
        assert!(!accepts(SECRET, timestamp, signature, &tampered), "{script}: another body");
        assert!(!accepts("another secret", timestamp, signature, &request.body), "{script}: another secret");
        assert!(!accepts(SECRET, &old, &old_signature, &request.body), "{script}: an old timestamp");
        assert!(!accepts(SECRET, timestamp, "sha256=00", &request.body), "{script}: a short signature");
    }
}

fn signature_of(secret: &str, timestamp: &str, body: &[u8]) -> String {
    let digest = signature(secret, timestamp, body).finalize().into_bytes();
    format!("sha256={}", digest.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// The README embeds each receiver verbatim: what it shows is what runs.
#[test]
fn the_readme_shows_the_tested_receivers_verbatim() {
    let readme = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).expect("README.md");
    for (_, script) in RECEIVERS {
        let code = fs::read_to_string(verify_dir().join(script)).expect("the receiver");
        assert!(readme.contains(&code), "README.md does not hold docs/webhook-verify/{script} verbatim");
    }
}

/// `secret_file` (a mounted secret) signs as `secret` does, and the
/// webhook takes its Redis from `DELAYER_REDIS_PORT` over the file's.
#[test]
fn the_secret_can_come_from_a_file_and_redis_from_the_environment() {
    let redis = RedisServer::start();
    let receiver = Receiver::start(|_, _| Answer::Status(204));
    let secrets = temp_dir("webhook-secret");
    let secret_path = secrets.join("hook.secret");
    fs::write(&secret_path, format!("{SECRET}\n")).expect("write secret");
    let hook_section =
        format!("[webhook.t]\nurl = {}\nsecret_file = {}\n", receiver.url("/hook"), secret_path.display());
    let _server = DelayerProcess::start(BIN, &conf(&redis, ""));
    // The file's [redis] names a port nothing listens on.
    let dir = temp_dir("webhook-env");
    let path = dir.join("delayer.conf");
    fs::write(&path, format!("{}\n{hook_section}", server_conf(free_port(), 50, ""))).expect("write conf");
    let mut child = webhook_command(&path)
        .env("DELAYER_REDIS_PORT", redis.port().to_string())
        .stdout(fs::File::create(dir.join("out.log")).expect("out.log"))
        .stderr(fs::File::create(dir.join("err.log")).expect("err.log"))
        .spawn()
        .expect("start delayer webhook");
    let output = || fs::read_to_string(dir.join("err.log")).unwrap_or_default();
    let d = Delayer::open(&redis.url()).expect("client");
    d.push_job(&job("t", "filed", b"{}", 3)).expect("push");
    let delivered = wait_until(DEADLINE, || gone(&redis, "filed"));
    let _ = child.kill();
    let _ = child.wait();
    assert!(delivered, "{}", output());
    let requests = receiver.on("/hook");
    assert!(!requests.is_empty() && requests.iter().all(|r| signed_by(r, SECRET)), "{requests:?}");
    assert!(!output().contains(SECRET));
    let _ = fs::remove_dir_all(&dir);
    let _ = fs::remove_dir_all(&secrets);
}

/// No file at all: Redis and the topic's section from `DELAYER_*`
/// variables (`DELAYER_WEBHOOK_<topic>_<KEY>`), the secret from a file.
#[test]
fn the_webhook_runs_on_the_environment_alone() {
    let redis = RedisServer::start();
    let receiver = Receiver::start(|_, _| Answer::Status(204));
    let dir = temp_dir("webhook-no-file");
    fs::write(dir.join("hook.secret"), format!("{SECRET}\n")).expect("write secret");
    let _server = DelayerProcess::start(BIN, &conf(&redis, ""));
    let mut command = Command::new(BIN);
    command.arg("webhook").current_dir(&dir).stdin(Stdio::null());
    for var in ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"] {
        command.env_remove(var);
    }
    let mut child = command
        .env("DELAYER_REDIS_PORT", redis.port().to_string())
        .env("DELAYER_WEBHOOK_close_order_URL", receiver.url("/hook"))
        .env("DELAYER_WEBHOOK_close_order_SECRET_FILE", "hook.secret")
        .stdout(fs::File::create(dir.join("out.log")).expect("out.log"))
        .stderr(fs::File::create(dir.join("err.log")).expect("err.log"))
        .spawn()
        .expect("start delayer webhook");
    let output = || {
        format!(
            "{}{}",
            fs::read_to_string(dir.join("out.log")).unwrap_or_default(),
            fs::read_to_string(dir.join("err.log")).unwrap_or_default()
        )
    };
    let d = Delayer::open(&redis.url()).expect("client");
    d.push_job(&job("close_order", "no-file", b"{}", 3)).expect("push");
    let delivered = wait_until(DEADLINE, || gone(&redis, "no-file"));
    let _ = child.kill();
    let _ = child.wait();
    assert!(delivered, "{}", output());
    let requests = receiver.on("/hook");
    assert!(!requests.is_empty() && requests.iter().all(|r| signed_by(r, SECRET)), "{requests:?}");
    assert!(output().contains("no configuration file"), "{}", output());
    assert!(!output().contains(SECRET));
    let _ = fs::remove_dir_all(&dir);
}
