//! Daemon mode as operators use it: `delayer -d -c delayer.conf` from the
//! directory holding the file, relative log and pid paths, logrotate's
//! rename and SIGHUP, SIGTERM; and a daemon that cannot run is refused by
//! the launching command, with the reason on its stderr.

use delayer::Delayer;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;
use testkit::{wait_until, RedisServer, DEADLINE};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");
/// An environment variable naming the test's directory, which each daemon
/// inherits: how a test finds the daemons it started.
const TAG: &str = "DELAYER_TEST_DIR";

/// Runs `delayer -d -c delayer.conf` in `dir`, waiting at most [`DEADLINE`]
/// for the launching process to exit (it must not wait for the daemon).
fn launch_daemon(dir: &Path) -> Output {
    let mut child = Command::new(BIN)
        .args(["-d", "-c", "delayer.conf"])
        .current_dir(dir)
        .env(TAG, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run delayer -d");
    let exited = wait_until(DEADLINE, || matches!(child.try_wait(), Ok(Some(_))));
    if !exited {
        let _ = child.kill();
    }
    let out = child.wait_with_output().expect("output of delayer -d");
    assert!(exited, "delayer -d did not return: {}", String::from_utf8_lossy(&out.stderr));
    out
}

/// Whether process `pid` still runs (a zombie nobody reaped has exited).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit_once(") ").map(|(_, rest)| rest.chars().next()))
        .flatten()
        .is_some_and(|state| state != 'Z' && state != 'X')
}

/// The pids of running processes launched from `dir` by [`launch_daemon`].
fn daemons_launched_from(dir: &Path) -> Vec<u32> {
    let tag = format!("{TAG}={}\0", dir.display());
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            String::from_utf8_lossy(&environ).contains(&tag) && alive(*pid)
        })
        .collect()
}

/// Stops a daemon the test started, whatever the test's outcome.
struct Daemon(u32);

impl Drop for Daemon {
    fn drop(&mut self) {
        if alive(self.0) {
            let _ = Command::new("kill").arg("-KILL").arg(self.0.to_string()).status();
        }
    }
}

fn conf(redis_port: u16, delayer_extra: &str, redis_extra: &str) -> String {
    format!(
        "[delayer]\ntimer_interval = 50\n{delayer_extra}\n\n[redis]\nhost = 127.0.0.1\nport = {redis_port}\n{redis_extra}\n"
    )
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn a_daemon_started_from_a_relative_path_rotates_its_logs_and_cleans_up_on_sigterm() {
    let redis = RedisServer::start();
    let dir = testkit::temp_dir("daemon-relative");
    // At debug, each batch has a line ("moved 1 [t=1]"): one to look for after the rotation.
    let extra = "pid = run/delayer.pid\naccess_log = logs/access.log\nerror_log = logs/error.log\nlog_level = debug";
    std::fs::write(dir.join("delayer.conf"), conf(redis.port(), extra, "")).expect("conf");

    let out = launch_daemon(&dir);
    assert!(out.status.success(), "delayer -d: {:?} {}", out.status, String::from_utf8_lossy(&out.stderr));
    let pid_path = dir.join("run/delayer.pid");
    let pid: u32 = read(&pid_path).trim().parse().expect("the pid file holds the daemon's pid once -d returns");
    let _daemon = Daemon(pid);
    assert!(alive(pid), "daemon {pid} runs");

    // A second daemon on the same pid file is refused at the terminal.
    let second = launch_daemon(&dir);
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("another delayer") && stderr.contains(&pid.to_string()), "{stderr}");

    // logrotate renames the files, then sends SIGHUP.
    let (access, error) = (dir.join("logs/access.log"), dir.join("logs/error.log"));
    let rotated = dir.join("logs/access.log.1");
    assert!(wait_until(DEADLINE, || read(&access).contains("starting")), "{}", read(&access));
    std::fs::rename(&access, &rotated).expect("rotate");
    let _ = Command::new("kill").arg("-HUP").arg(pid.to_string()).status();
    assert!(
        wait_until(DEADLINE, || read(&access).contains("log files reopened")),
        "access log: {}\nerror log: {}",
        read(&access),
        read(&error)
    );
    let d = Delayer::open(&redis.url()).expect("client");
    d.push("t", "after-rotate", Duration::ZERO).expect("push");
    assert!(wait_until(DEADLINE, || read(&access).contains("moved 1")), "{}", read(&access));
    assert!(!read(&rotated).contains("moved 1"), "wrote to the rotated file after SIGHUP");
    assert!(!read(&error).contains("cannot reopen"), "{}", read(&error));

    // SIGTERM: a clean stop, and the pid file goes with the daemon.
    let _ = Command::new("kill").arg("-TERM").arg(pid.to_string()).status();
    assert!(wait_until(DEADLINE, || !alive(pid)), "daemon {pid} still runs after SIGTERM");
    assert!(!pid_path.exists(), "pid file left behind after SIGTERM");
    assert!(read(&access).contains("stopped"), "{}", read(&access));
    let _ = std::fs::remove_dir_all(dir);
}

/// `delayer -d` that cannot run: non-zero exit, the reason on stderr, no
/// daemon and no pid file left.
fn assert_refused(dir: &Path, expected_code: i32, reason: &str) -> String {
    let out = launch_daemon(dir);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(expected_code), "{stderr}");
    assert!(stderr.contains(reason), "stderr: {stderr:?}");
    assert!(
        wait_until(DEADLINE, || daemons_launched_from(dir).is_empty()),
        "a daemon was left: {:?}",
        daemons_launched_from(dir)
    );
    assert!(!dir.join("run/delayer.pid").exists(), "pid file left behind");
    stderr
}

#[test]
fn a_daemon_redis_refuses_is_refused_at_the_terminal() {
    let redis = RedisServer::start_with(&["--save", "", "--requirepass", "right-secret"]);
    let dir = testkit::temp_dir("daemon-refused");
    // No log files: the reason must still reach the operator.
    let wrong = conf(redis.port(), "pid = run/delayer.pid", "password = wrong-secret");
    std::fs::write(dir.join("delayer.conf"), wrong).expect("conf");
    let stderr = assert_refused(&dir, 1, "refused our credentials");
    assert!(!stderr.contains("wrong-secret") && !stderr.contains("right-secret"), "secret on stderr: {stderr}");

    let missing = conf(redis.port(), "pid = run/delayer.pid", "");
    std::fs::write(dir.join("delayer.conf"), missing).expect("conf");
    assert_refused(&dir, 1, "refused our credentials");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_daemon_without_redis_or_with_a_bad_file_is_refused_at_the_terminal() {
    let dir = testkit::temp_dir("daemon-unreachable");
    let down = conf(testkit::free_port(), "pid = run/delayer.pid\nerror_log = logs/error.log", "");
    std::fs::write(dir.join("delayer.conf"), down).expect("conf");
    assert_refused(&dir, 1, "cannot reach redis");

    std::fs::write(dir.join("delayer.conf"), "[delayer]\ntimer_interval = soon\n").expect("conf");
    let stderr = assert_refused(&dir, 2, "timer_interval");
    let absolute: PathBuf = dir.join("delayer.conf");
    assert!(stderr.contains(&absolute.display().to_string()), "names the file by its full path: {stderr}");
    let _ = std::fs::remove_dir_all(dir);
}
