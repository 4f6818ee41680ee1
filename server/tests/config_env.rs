//! 12-factor configuration against real parts: the `delayer` binary run
//! with no configuration file, or with one and `DELAYER_*` variables over
//! it, on a real redis-server; `_FILE` secrets; errors naming the variable;
//! the did-you-mean warning; `delayer config`; the CLI on the environment.
//! Secrets never reach the output.

use delayer::Delayer;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;
use testkit::{free_port, server_conf, temp_dir, wait_child, wait_until, RedisServer, DEADLINE};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");
const PASSWORD: &str = "pw-from-a-file-Zq81-do-not-log";

/// `delayer <args>` in a fresh empty directory (so no ./delayer.conf), with
/// only the `DELAYER_*` variables given, output captured to files; killed
/// on drop.
struct Run {
    child: Option<Child>,
    dir: PathBuf,
}

impl Run {
    fn start(args: &[&str], env: &[(&str, &str)]) -> Run {
        let dir = temp_dir("config-env");
        let mut command = Command::new(BIN);
        command.args(args).current_dir(&dir).stdin(Stdio::null());
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().to_ascii_uppercase().starts_with("DELAYER_") {
                command.env_remove(name);
            }
        }
        let child = command
            .envs(env.iter().copied())
            .stdout(fs::File::create(dir.join("out.log")).expect("out.log"))
            .stderr(fs::File::create(dir.join("err.log")).expect("err.log"))
            .spawn()
            .expect("start delayer");
        Run { child: Some(child), dir }
    }

    /// Runs a command to its end: its exit status, stdout and stderr.
    fn finish(args: &[&str], env: &[(&str, &str)]) -> (ExitStatus, String, String) {
        let mut run = Run::start(args, env);
        let status = run.child.as_mut().and_then(|c| wait_child(c, DEADLINE)).expect("exits");
        run.child = None;
        (status, run.read("out.log"), run.read("err.log"))
    }

    fn read(&self, name: &str) -> String {
        fs::read_to_string(self.dir.join(name)).unwrap_or_default()
    }

    fn output(&self) -> String {
        format!("{}{}", self.read("out.log"), self.read("err.log"))
    }

    fn wait_for(&self, mut check: impl FnMut(&str) -> bool) -> bool {
        wait_until(DEADLINE, || check(&self.output()))
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Pushes a job due now to topic "t" and waits until the server moves it.
fn moves_a_job(url: &str, id: &str) -> bool {
    let d = Delayer::open(url).expect("client");
    d.push("t", id, Duration::ZERO).expect("push");
    let mut conn = redis::Client::open(url).and_then(|c| c.get_connection()).expect("connect");
    wait_until(DEADLINE, || {
        let ready: Vec<String> =
            redis::cmd("LRANGE").arg("delayer:ready_queue:t").arg(0).arg(-1).query(&mut conn).unwrap_or_default();
        ready.iter().any(|r| r == id)
    })
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, text).expect("write");
    path
}

#[test]
fn the_server_runs_on_the_environment_alone() {
    let redis = RedisServer::start();
    let metrics = free_port();
    let metrics_addr = format!("127.0.0.1:{metrics}");
    let server = Run::start(
        &[],
        &[
            ("DELAYER_REDIS_URL", &redis.url()),
            ("DELAYER_TIMER_INTERVAL", "50"),
            ("DELAYER_METRICS_ADDR", &metrics_addr),
            ("DELAYER_HTTP_ADR", "127.0.0.1:1"),
            ("DELAYER_URL", "redis://127.0.0.1:1/"),
        ],
    );
    assert!(moves_a_job(&redis.url(), "env-only"), "{}", server.output());
    assert!(server.wait_for(|o| o.contains("no configuration file")), "{}", server.output());
    assert!(wait_until(DEADLINE, || testkit::scrape_metrics(metrics).is_some()), "{}", server.output());
    let log = server.output();
    assert_eq!(log.matches("running on the defaults and DELAYER_* environment variables").count(), 1, "{log}");
    // A near miss is warned about; DELAYER_URL (the CLI's) is not.
    assert!(
        log.contains("DELAYER_HTTP_ADR is not a Delayer setting and is ignored (did you mean DELAYER_HTTP_ADDR?)"),
        "{log}"
    );
    assert!(!log.contains("DELAYER_URL"), "{log}");
}

#[test]
fn the_environment_beats_the_file_and_a_password_comes_from_a_file() {
    let redis = RedisServer::start_with(&["--save", "", "--requirepass", PASSWORD]);
    let dir = temp_dir("config-env-files");
    let secret = write(&dir, "redis.password", &format!("{PASSWORD}\n"));
    // The file names a port nothing listens on: the environment's wins.
    let conf = write(&dir, "delayer.conf", &server_conf(free_port(), 50, ""));
    let port = redis.port().to_string();
    let env = [("DELAYER_REDIS_PORT", port.as_str()), ("DELAYER_REDIS_PASSWORD_FILE", secret.to_str().expect("utf-8"))];
    let conf_arg = conf.to_str().expect("utf-8");
    let server = Run::start(&["-c", conf_arg], &env);
    let authed = format!("redis://:{PASSWORD}@127.0.0.1:{}/0", redis.port());
    assert!(moves_a_job(&authed, "from-env"), "{}", server.output());
    assert!(!server.output().contains(PASSWORD), "secret in the log: {}", server.output());

    let (status, out, err) = Run::finish(&["config", "-c", conf_arg], &env);
    assert!(status.success(), "{out}{err}");
    assert!(out.contains(&format!("port = {port}  ; env DELAYER_REDIS_PORT\n")), "{out}");
    assert!(out.contains("password = ****  ; env DELAYER_REDIS_PASSWORD_FILE\n"), "{out}");
    assert!(out.contains(&format!("timer_interval = 50  ; file {conf_arg}\n")), "{out}");
    assert!(out.contains("batch_size = 1000  ; default\n"), "{out}");
    let (status, json, _) = Run::finish(&["config", "-c", conf_arg, "--json"], &env);
    assert!(status.success());
    let v: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let password = v["settings"].as_array().expect("list").iter().find(|s| s["key"] == "password").expect("listed");
    assert_eq!(password["value"], "****");
    assert!(!out.contains(PASSWORD) && !err.contains(PASSWORD) && !json.contains(PASSWORD));

    // The CLI on the environment alone.
    let cli_env = [("DELAYER_REDIS_PORT", port.as_str()), ("DELAYER_REDIS_PASSWORD", PASSWORD)];
    let (status, out, err) = Run::finish(&["stats"], &cli_env);
    assert!(status.success(), "{out}{err}");
    assert!(out.contains("ready"), "{out}");
    assert!(!out.contains(PASSWORD) && !err.contains(PASSWORD), "{out}{err}");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn bad_values_and_conflicts_in_the_environment_stop_it_naming_the_variable() {
    let cases: [(&[(&str, &str)], &str); 4] = [
        (&[("DELAYER_TIMER_INTERVAL", "0")], "DELAYER_TIMER_INTERVAL: [delayer] timer_interval: 0 is out of range"),
        (&[("DELAYER_REDIS_PORT", "sixty")], "DELAYER_REDIS_PORT: [redis] port: \"sixty\" is not a port number"),
        (
            &[("DELAYER_REDIS_PASSWORD", PASSWORD), ("DELAYER_REDIS_PASSWORD_FILE", "/nonexistent/pw")],
            "DELAYER_REDIS_PASSWORD_FILE: [redis] password: DELAYER_REDIS_PASSWORD is set too",
        ),
        (
            &[("DELAYER_HTTP_TOKEN_FILE", "/nonexistent/token")],
            "DELAYER_HTTP_TOKEN_FILE: [delayer] http_token: cannot read /nonexistent/token:",
        ),
    ];
    for (env, expected) in cases {
        for args in [&[][..], &["config"][..], &["stats"][..]] {
            let (status, out, err) = Run::finish(args, env);
            assert_eq!(status.code(), Some(2), "{args:?} {env:?}: {out}{err}");
            assert!(err.contains(expected), "{args:?}: {err}");
            assert!(!err.contains(PASSWORD), "{err}");
        }
    }
}
