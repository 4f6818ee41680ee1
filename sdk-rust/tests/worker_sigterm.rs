//! A sync (thread) Worker stopped by SIGTERM, as systemd or Kubernetes stop
//! it: `Stopper::stop_on_signals` needs no tokio (issue 22; it used to need
//! the `aio` feature). The worker is this test binary run again as a process
//! of its own, its ignored `sigterm_worker_process` test doing the work when
//! the environment says so. SIGTERM comes while a handler runs: the handler
//! finishes, its job is acked, no new job is taken, and the process exits 0.

use delayer::worker::{Event, Task, Worker};
use delayer::{Delayer, Job};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use testkit::{move_due_classic, temp_dir, wait_child, wait_until, RedisServer, DEADLINE};

/// The worker process: handles topic "t", each job writing `<id>.started`,
/// waiting for `<id>.go`, then writing `<id>.done`; `stopping` once it
/// heard the signal.
#[test]
#[ignore = "the worker process of a_sync_worker_finishes_its_job_and_exits_0_on_sigterm"]
fn sigterm_worker_process() {
    let (Ok(url), Ok(dir)) = (std::env::var("SIGTERM_WORKER_URL"), std::env::var("SIGTERM_WORKER_DIR")) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let stopping = dir.join("stopping");
    let worker = Worker::new(Delayer::open(&url).expect("client"))
        .hooks(move |e: &Event<'_>| {
            if matches!(e, Event::Stopping) {
                std::fs::write(&stopping, b"").expect("mark");
            }
        })
        .concurrency(1)
        .grace(Duration::from_secs(30))
        .handle("t", move |task: &Task| -> Result<(), String> {
            let mark =
                |what: &str| std::fs::write(dir.join(format!("{}.{what}", task.id)), b"").map_err(|e| e.to_string());
            mark("started")?;
            if !wait_until(DEADLINE, || dir.join(format!("{}.go", task.id)).exists()) {
                return Err("never told to go on".into());
            }
            mark("done")
        });
    worker.stopper().stop_on_signals().expect("signal handlers");
    worker.run().expect("the worker ended cleanly");
}

fn exists(dir: &Path, name: &str) -> bool {
    dir.join(name).exists()
}

#[test]
fn a_sync_worker_finishes_its_job_and_exits_0_on_sigterm() {
    let redis = RedisServer::start();
    let dir = temp_dir("sigterm-worker");
    let d = Delayer::open(&redis.url()).expect("client");
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--ignored", "--exact", "sigterm_worker_process", "--nocapture"])
        .env("SIGTERM_WORKER_URL", redis.url())
        .env("SIGTERM_WORKER_DIR", &dir)
        .stdout(Stdio::null())
        .spawn()
        .expect("start the worker");
    d.push_job(&Job::new("t", "first", Duration::ZERO)).expect("push");
    move_due_classic(&mut redis.connection());
    assert!(wait_until(DEADLINE, || exists(&dir, "first.started")), "the handler never started");

    let killed = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill");
    assert!(killed.success());
    // A job that comes due after the signal is left for another worker.
    d.push_job(&Job::new("t", "second", Duration::ZERO)).expect("push");
    move_due_classic(&mut redis.connection());
    assert!(wait_until(DEADLINE, || exists(&dir, "stopping")), "the worker never heard SIGTERM");
    std::fs::write(dir.join("first.go"), b"").expect("go");

    let status = wait_child(&mut child, DEADLINE).expect("the worker exits after SIGTERM");
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(exists(&dir, "first.done"), "the job in flight was finished");
    assert_eq!(d.job("t", "first").expect("job").state.as_str(), "unknown", "and acked");
    assert!(!exists(&dir, "second.started"), "no job taken after the signal");
    assert_eq!(d.job("t", "second").expect("job").state.as_str(), "ready");
}
