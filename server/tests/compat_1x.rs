//! The command line and configuration file of Delayer 1.x, on the real
//! binary: every flag spelling Go's `flag` package took (`-daemon`,
//! `-configuration=FILE`, `--c FILE`, `-help`, `-version`), and the
//! `delayer.conf` of each 1.x layout, which starts the server, the keys it
//! does not use logged with their file and line.

use redis::Commands;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use testkit::{delayer_1x_push, wait_until, DelayerProcess, RedisServer, DEADLINE};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");

/// Runs `delayer args...` in `dir`, waiting at most [`DEADLINE`].
fn run(dir: &Path, args: &[&str]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run delayer");
    let exited = wait_until(DEADLINE, || matches!(child.try_wait(), Ok(Some(_))));
    if !exited {
        let _ = child.kill();
    }
    let out = child.wait_with_output().expect("output of delayer");
    assert!(exited, "delayer {args:?} did not return: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Every spelling of "the configuration file is F" reaches the file: one
/// that is refused (line 2), so the refusal naming it proves it was read.
#[test]
fn every_1x_spelling_of_the_configuration_flag_reads_the_file() {
    let dir = testkit::temp_dir("flags-configuration");
    std::fs::write(dir.join("bad.conf"), "[delayer]\ntimer_interval = soon\n").expect("conf");
    let file = dir.join("bad.conf").display().to_string();
    let with_eq = |flag: &str| format!("{flag}={file}");
    let spellings: Vec<Vec<String>> = vec![
        vec!["-c".into(), file.clone()],
        vec!["--c".into(), file.clone()],
        vec![with_eq("-c")],
        vec![with_eq("--c")],
        vec!["-configuration".into(), file.clone()],
        vec![with_eq("-configuration")],
        vec!["--configuration".into(), file.clone()],
        vec![with_eq("--configuration")],
    ];
    for args in spellings {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(&dir, &args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(&format!("{file}:2: [delayer] timer_interval:")), "{args:?}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// `-daemon` and its spellings run the server as a daemon: one that cannot
/// reach Redis refuses to start, where the foreground server would wait.
#[test]
fn every_1x_spelling_of_the_daemon_flag_means_daemon() {
    let dir = testkit::temp_dir("flags-daemon");
    let unreachable = testkit::server_conf(testkit::free_port(), 100, "");
    std::fs::write(dir.join("delayer.conf"), unreachable).expect("conf");
    for flag in ["-d", "--d", "-daemon", "--daemon", "-daemon=true", "-d=1"] {
        let out = run(&dir, &[flag, "-configuration", "delayer.conf"]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{flag}: {stderr}");
        assert!(stderr.contains("not starting the daemon"), "{flag}: {stderr}");
    }
    // A value that is no boolean is refused, as Go's flag package did.
    let out = run(&dir, &["-d=maybe", "-c", "delayer.conf"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let _ = std::fs::remove_dir_all(dir);
}

/// `-daemon -configuration=FILE`, as a 1.x init script wrote it, starts a
/// daemon that moves jobs and stops on SIGTERM.
#[test]
fn a_daemon_started_with_the_1x_spellings_runs() {
    let redis = RedisServer::start();
    let dir = testkit::temp_dir("flags-daemon-runs");
    let conf = testkit::server_conf(redis.port(), 100, "pid = run/delayer.pid\nerror_log = logs/error.log");
    std::fs::write(dir.join("delayer.conf"), conf).expect("conf");
    let out = run(&dir, &["-daemon", "-configuration=delayer.conf"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let pid_file = dir.join("run/delayer.pid");
    let pid = std::fs::read_to_string(&pid_file).expect("pid file written once -daemon returns");
    let pid = pid.trim().to_string();
    let alive = || std::path::Path::new(&format!("/proc/{pid}")).exists() && pid_file.exists();
    let mut conn = redis.connection();
    delayer_1x_push(&mut conn, "d-1", "t", "b", 0);
    let moved = wait_until(DEADLINE, || conn.llen::<_, u64>("delayer:ready_queue:t").unwrap_or(0) == 1);
    let _ = Command::new("kill").arg("-TERM").arg(&pid).status();
    assert!(
        moved,
        "the daemon did not move the job: {}",
        std::fs::read_to_string(dir.join("logs/error.log")).unwrap_or_default()
    );
    assert!(wait_until(DEADLINE, || !alive()), "daemon {pid} still runs after SIGTERM");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn every_1x_spelling_of_help_and_version_prints_and_exits() {
    let dir = testkit::temp_dir("flags-help");
    for flag in ["-h", "--h", "-help", "--help"] {
        let out = run(&dir, &[flag]);
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{flag}: {}", text(&out.stderr));
        assert!(stdout.contains("Usage") && stdout.contains("--configuration"), "{flag}: {stdout}");
    }
    for flag in ["-v", "--v", "-version", "--version"] {
        let out = run(&dir, &[flag]);
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{flag}: {}", text(&out.stderr));
        assert!(stdout.contains(env!("CARGO_PKG_VERSION")), "{flag}: {stdout}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// The operator commands take the 1.x spellings of -c too, and their own
/// flags still work.
#[test]
fn the_commands_take_the_1x_spellings_too() {
    let redis = RedisServer::start();
    let dir = testkit::temp_dir("flags-commands");
    std::fs::write(dir.join("delayer.conf"), testkit::server_conf(redis.port(), 100, "")).expect("conf");
    let mut conn = redis.connection();
    delayer_1x_push(&mut conn, "j1", "t", "b", 3600);
    for args in [&["-configuration=delayer.conf", "stats", "--json"][..], &["--c", "delayer.conf", "stats", "-json"]] {
        let out = run(&dir, args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        let stats: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stats JSON");
        assert_eq!(stats["pool_size"], 1, "{args:?}: {stats}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// The first 1.0 layout of delayer.conf ([delayerd], [redis] timeout):
/// the server starts, says what it ignores and where, and moves 1.x jobs.
#[test]
fn the_server_runs_on_the_first_1x_layout_and_logs_what_it_ignores() {
    let redis = RedisServer::start();
    let conf = format!(
        "[delayerd]\ninterval = 1000                 ; ms\naccess_log = logs/access.log    ; log\n\
         error_log = logs/error.log      ; log\n\n[redis]\nhost = 127.0.0.1                ; address\n\
         port = {}\ndatabase = 0\npassword =                      ; none\ntimeout = 3\nmax_idle = 2\n\
         max_active = 20\n",
        redis.port()
    );
    let server = DelayerProcess::start(BIN, &conf);
    let file: PathBuf = server.dir.join("delayer.conf");
    assert!(server.wait_for_output(|o| o.contains("starting")), "{}", server.output());
    for (line, at) in [(2, "[delayerd] interval"), (3, "[delayerd] access_log"), (11, "[redis] timeout")] {
        let said = format!("{}:{line}: {at}: ignored: ", file.display());
        assert!(server.output().contains(&said), "no {said:?} in {}", server.output());
    }
    let mut conn = redis.connection();
    delayer_1x_push(&mut conn, "old-1", "order", "body-1", 0);
    assert!(
        wait_until(DEADLINE, || conn.llen::<_, u64>("delayer:ready_queue:order").unwrap_or(0) == 1),
        "{}",
        server.output()
    );
}
