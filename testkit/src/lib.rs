//! Test harness shared by the workspace's integration tests.
//!
//! Delayer's tests run against real parts only: a real `redis-server` started
//! here on a free loopback port (never 6379) and stopped on drop, and the real
//! `delayer` binary. This crate owns the starting, waiting and cleaning up, so
//! each test reads as what it checks.

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

pub mod cluster;
pub mod cluster_tls;
mod names;
pub mod sentinel;

pub use names::LayoutNames;

/// How long anything in a test may take to come up or happen.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Polls `check` every few milliseconds until it returns true or `deadline`
/// passes; returns whether it became true.
pub fn wait_until(deadline: Duration, mut check: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + deadline;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// Waits up to `deadline` for `child` to exit; kills (and reaps) it when it
/// does not. Its exit status, if it exited by itself.
pub fn wait_child(child: &mut Child, deadline: Duration) -> Option<ExitStatus> {
    let mut status = None;
    wait_until(deadline, || {
        status = child.try_wait().ok().flatten();
        status.is_some()
    });
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    status
}

/// A loopback port nobody listens on right now, and one this test process
/// has not handed out before.
///
/// The port is free only until someone binds it, and the kernel may offer
/// the same one to the next `bind(0)`: two tests running side by side could
/// then be given one port (a Redis and a metrics endpoint on the same
/// number, and one of them fails to start). Remembering the ports already
/// handed out rules that out within the process.
pub fn free_port() -> u16 {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().expect("local addr").port();
        if GIVEN.lock().unwrap_or_else(|e| e.into_inner()).insert(port) {
            return port;
        }
    }
}

/// A fresh directory under the system temp dir, removed by its owner.
pub fn temp_dir(tag: &str) -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("delayer-{tag}-{}-{n}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

/// A real `redis-server` on 127.0.0.1 and a free port, killed on drop.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    args: Vec<String>,
    /// Only TLS on the port: readiness is a TCP connect, not a PING.
    tls: bool,
}

impl RedisServer {
    /// Starts a redis-server with persistence off.
    pub fn start() -> Self {
        Self::start_with(&["--save", "", "--appendonly", "no"])
    }

    /// Starts a redis-server with extra command-line arguments
    /// (for example `["--appendonly", "yes"]` or `["--requirepass", "pw"]`).
    pub fn start_with(extra: &[&str]) -> Self {
        Self::start_on(free_port(), extra)
    }

    /// Starts a redis-server on a given port (one a test reserved earlier).
    pub fn start_on(port: u16, extra: &[&str]) -> Self {
        let dir = temp_dir("redis");
        let mut server =
            RedisServer { child: None, port, dir, args: extra.iter().map(|s| s.to_string()).collect(), tls: false };
        server.spawn();
        server
    }

    /// Starts a redis-server that speaks only TLS on its port, with the
    /// given PEM files (server certificate, its key, the CA of clients).
    pub fn start_tls(cert: &Path, key: &Path, ca: &Path) -> Self {
        Self::start_tls_with(cert, key, ca, &[])
    }

    /// As [`RedisServer::start_tls`], with extra arguments (`--replicaof`,
    /// `--tls-replication yes`, ...).
    pub fn start_tls_with(cert: &Path, key: &Path, ca: &Path, extra: &[&str]) -> Self {
        let port = free_port();
        let mut server = RedisServer {
            child: None,
            port,
            dir: temp_dir("redis-tls"),
            args: ["--save", "", "--port", "0", "--tls-port", &port.to_string(), "--tls-auth-clients", "no"]
                .iter()
                .map(|s| s.to_string())
                .chain(
                    ["--tls-cert-file", "--tls-key-file", "--tls-ca-cert-file"]
                        .iter()
                        .zip([cert, key, ca])
                        .flat_map(|(flag, path)| [flag.to_string(), path.display().to_string()]),
                )
                .chain(extra.iter().map(|s| s.to_string()))
                .collect(),
            tls: true,
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--dir", &self.dir.display().to_string()])
            .args(["--logfile", "redis.log"])
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (apt-get install redis-server)");
        self.child = Some(child);
        let port = self.port;
        let tls = self.tls;
        let up = wait_until(DEADLINE, || {
            TcpStream::connect(("127.0.0.1", port)).is_ok_and(|mut s| {
                if tls {
                    return true;
                }
                let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
                let mut buf = [0u8; 64];
                s.write_all(b"PING\r\n").is_ok()
                    && std::io::Read::read(&mut s, &mut buf).is_ok_and(|n| {
                        // +PONG, or -NOAUTH when a password is set: either way it is up
                        n > 0 && (buf.starts_with(b"+PONG") || buf.starts_with(b"-NOAUTH"))
                    })
            })
        });
        assert!(up, "redis-server on port {port} did not come up");
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>/`
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The server's data directory (for RDB / AOF files).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A new plain connection, for the test's own raw commands.
    pub fn connection(&self) -> redis::Connection {
        redis::Client::open(self.url()).and_then(|c| c.get_connection()).expect("connect to test redis")
    }

    /// Stops the server; with persistence on, it saves first (SHUTDOWN).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGTERM makes redis-server save (when persistence is on) and exit.
            let _ = Command::new("kill").arg(child.id().to_string()).status();
            let _ = wait_until(DEADLINE, || matches!(child.try_wait(), Ok(Some(_))));
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port and directory.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// Stops the server with SIGSTOP: it holds its connections open and
    /// answers nothing (a stalled Redis) until [`RedisServer::resume`].
    pub fn pause(&self) {
        self.signal("STOP");
    }

    /// Lets a paused server go on (SIGCONT).
    pub fn resume(&self) {
        self.signal("CONT");
    }

    fn signal(&self, name: &str) {
        if let Some(child) = &self.child {
            let status = Command::new("kill").arg(format!("-{name}")).arg(child.id().to_string()).status();
            assert!(status.is_ok_and(|s| s.success()), "kill -{name} redis-server");
        }
    }

    /// Kills the server with SIGKILL and leaves it down (a failover test's
    /// dead master).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the server with SIGKILL (no save, no goodbye), then starts it
    /// again on the same port and directory: it comes back with what its
    /// AOF or RDB file holds.
    pub fn crash_and_restart(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.spawn();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A running `delayer` server process, killed on drop.
pub struct DelayerProcess {
    child: Option<Child>,
    pub dir: PathBuf,
}

impl DelayerProcess {
    /// Writes `conf` to a fresh directory as `delayer.conf` and starts
    /// `bin -c <that file>` there, with stdout/stderr captured to files.
    pub fn start(bin: &str, conf: &str) -> Self {
        Self::start_with_env(bin, conf, &[])
    }

    /// As [`DelayerProcess::start`], with extra environment variables.
    pub fn start_with_env(bin: &str, conf: &str, env: &[(&str, &str)]) -> Self {
        let dir = temp_dir("server");
        let conf_path = dir.join("delayer.conf");
        fs::write(&conf_path, conf).expect("write delayer.conf");
        let stdout = fs::File::create(dir.join("stdout.log")).expect("stdout.log");
        let stderr = fs::File::create(dir.join("stderr.log")).expect("stderr.log");
        let child = Command::new(bin)
            .arg("-c")
            .arg(&conf_path)
            .current_dir(&dir)
            .envs(env.iter().copied())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .expect("start delayer");
        DelayerProcess { child: Some(child), dir }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    /// What the process wrote to stdout and stderr so far.
    pub fn output(&self) -> String {
        let out = fs::read_to_string(self.dir.join("stdout.log")).unwrap_or_default();
        let err = fs::read_to_string(self.dir.join("stderr.log")).unwrap_or_default();
        format!("{out}{err}")
    }

    /// Waits until the output so far satisfies `check`, up to [`DEADLINE`].
    ///
    /// The server logs a step after doing it, so a test that has just seen
    /// the step's effect in Redis must wait for the line too.
    pub fn wait_for_output(&self, mut check: impl FnMut(&str) -> bool) -> bool {
        wait_until(DEADLINE, || check(&self.output()))
    }

    /// Sends a signal by name (`TERM`, `INT`, `KILL`).
    pub fn signal(&self, name: &str) {
        let _ = Command::new("kill").arg(format!("-{name}")).arg(self.pid().to_string()).status();
    }

    /// Waits for the process to exit, up to `deadline`.
    pub fn wait_exit(&mut self, deadline: Duration) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        let mut status = None;
        wait_until(deadline, || {
            status = child.try_wait().ok().flatten();
            status.is_some()
        });
        if status.is_some() {
            self.child = None;
        }
        status
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }
}

impl Drop for DelayerProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A minimal delayer.conf for tests: foreground logging, the given Redis port
/// and timer interval, plus `extra` lines appended to `[delayer]`.
pub fn server_conf(redis_port: u16, timer_interval_ms: u64, extra: &str) -> String {
    format!(
        "[delayer]\ntimer_interval = {timer_interval_ms}\n{extra}\n\n[redis]\nhost = 127.0.0.1\nport = {redis_port}\ndatabase = 0\npassword =\n"
    )
}

/// Does what the server does for the classic layout with the default
/// prefix, once: move.lua moves every due job to its ready queue.
pub fn move_due_classic(conn: &mut redis::Connection) {
    let _: redis::Value = redis::Script::new(include_str!("../../lua/move.lua"))
        .key("delayer:job_pool")
        .key("delayer:malformed")
        .key("delayer:scheduled_count")
        .key("delayer:topics")
        .key("delayer:reserved")
        .arg("delayer:job_bucket:")
        .arg("delayer:ready_queue:")
        .arg(1000)
        .arg("0")
        .arg(0)
        .invoke(conn)
        .expect("move.lua");
}

/// Pushes a job exactly as a Delayer 1.x client does (mix/delayer-client):
/// MULTI; HMSET bucket topic body; EXPIRE bucket delay+lifetime; ZADD pool
/// <whole seconds> id; EXEC. Returns the due time written, Unix seconds.
pub fn delayer_1x_push(conn: &mut redis::Connection, id: &str, topic: &str, body: &str, delay_secs: u64) -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs();
    let bucket = format!("delayer:job_bucket:{id}");
    let _: () = redis::pipe()
        .atomic()
        .cmd("HMSET")
        .arg(&bucket)
        .arg("topic")
        .arg(topic)
        .arg("body")
        .arg(body)
        .cmd("EXPIRE")
        .arg(&bucket)
        .arg(delay_secs + 604_800)
        .cmd("ZADD")
        .arg("delayer:job_pool")
        .arg(now + delay_secs)
        .arg(id)
        .query(conn)
        .expect("Delayer 1.x push");
    now + delay_secs
}

/// GET `http://127.0.0.1:<port>/metrics`: the body, once the server answers.
pub fn scrape_metrics(port: u16) -> Option<String> {
    use std::io::Read;
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.").then(|| body.to_string())
}

/// The value of the sample whose name and labels are exactly `series`, in
/// a scraped body.
pub fn metric(body: &str, series: &str) -> Option<f64> {
    body.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}
