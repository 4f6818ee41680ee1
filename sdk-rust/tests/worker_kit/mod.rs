//! Runs a worker of either kind (threads or tokio) in the background
//! against a real redis-server, with handlers whose behaviour a test
//! describes once for both kinds, and records the worker's events.

#![allow(dead_code)] // each test file uses its own part

use delayer::worker::{self, Delivery, Event, Stopper};
use delayer::{Delayer, Job};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};
use testkit::{wait_until, RedisServer, DEADLINE};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Sync,
    Async,
}

pub const KINDS: [Kind; 2] = [Kind::Sync, Kind::Async];

/// What a handler does with a job.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub extend: Option<Duration>,
    pub sleep: Duration,
    pub panic: bool,
    pub fail: Option<String>,
}

pub type Behaviour = Arc<dyn Fn(&Delivery) -> Plan + Send + Sync>;

pub fn behaviour(f: impl Fn(&Delivery) -> Plan + Send + Sync + 'static) -> Behaviour {
    Arc::new(f)
}

#[derive(Clone)]
pub struct Options {
    pub topics: Vec<&'static str>,
    pub concurrency: usize,
    pub ttr: Duration,
    pub grace: Duration,
    pub at_most_once: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            topics: vec!["t"],
            concurrency: 4,
            ttr: Duration::from_secs(30),
            grace: Duration::from_secs(30),
            at_most_once: false,
        }
    }
}

/// A worker running on a thread of its own; stopped (and waited for) on drop.
pub struct Running {
    stopper: Stopper,
    handle: Option<JoinHandle<delayer::Result<()>>>,
    pub events: Arc<Mutex<Vec<String>>>,
}

impl Running {
    pub fn stop(&self) {
        self.stopper.stop();
    }

    /// How `run` ended, waiting up to `deadline`; `None` if it has not.
    pub fn join(&mut self, deadline: Duration) -> Option<delayer::Result<()>> {
        let handle = self.handle.as_ref()?;
        if !wait_until(deadline, || handle.is_finished()) {
            return None;
        }
        self.handle.take().map(|h| h.join().expect("the worker thread panicked"))
    }

    pub fn events(&self) -> Vec<String> {
        self.events.lock().expect("events").clone()
    }

    /// How many events start with `prefix`.
    pub fn count(&self, prefix: &str) -> usize {
        self.events().iter().filter(|e| e.starts_with(prefix)).count()
    }

    /// Waits until `count(prefix) >= n`.
    pub fn wait_for(&self, prefix: &str, n: usize) -> bool {
        wait_until(DEADLINE, || self.count(prefix) >= n)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stopper.stop();
        if let Some(h) = self.handle.take() {
            let end = Instant::now() + DEADLINE;
            while !h.is_finished() && Instant::now() < end {
                thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

fn describe(e: &Event<'_>) -> String {
    match e {
        Event::Started { delivery } => format!("started {}", delivery.id),
        Event::Succeeded { delivery, .. } => format!("succeeded {}", delivery.id),
        Event::Failed { delivery, error, .. } => format!("failed {}: {error}", delivery.id),
        Event::Acked { delivery } => format!("acked {}", delivery.id),
        Event::NotHeld { delivery } => format!("notheld {}", delivery.id),
        Event::Touched { delivery } => format!("touched {}", delivery.id),
        Event::ReleasedAtStop { delivery } => format!("released_at_stop {}", delivery.id),
        Event::ConnectionLost { error, .. } => format!("connection_lost {error}"),
        Event::Reconnected => "reconnected".into(),
        Event::UnsafeEviction { policy, .. } => format!("unsafe_eviction {policy}"),
        Event::Error { error } => format!("error {error}"),
        Event::Stopping => "stopping".into(),
        Event::Stopped => "stopped".into(),
        other => format!("other {other:?}"),
    }
}

/// Starts a worker of `kind` on `url` whose handlers follow `plan`.
pub fn start(kind: Kind, url: &str, opts: Options, plan: Behaviour) -> Running {
    let stopper = Stopper::new();
    let events = Arc::new(Mutex::new(Vec::new()));
    let (url, stop, seen) = (url.to_string(), stopper.clone(), events.clone());
    let hooks = move |e: &Event<'_>| seen.lock().expect("events").push(describe(e));
    let handle = thread::spawn(move || match kind {
        Kind::Sync => {
            let mut w = worker::Worker::new(Delayer::open(&url)?);
            for topic in &opts.topics {
                let plan = plan.clone();
                w = w.handle(topic, move |task: &worker::Task| {
                    let p = plan(task.delivery());
                    if let Some(ttr) = p.extend {
                        task.extend(ttr).map_err(|e| e.to_string())?;
                    }
                    thread::sleep(p.sleep);
                    assert!(!p.panic, "boom");
                    p.fail.map_or(Ok(()), Err)
                });
            }
            configure_sync(w, &opts).hooks(hooks).with_stopper(stop).run()
        }
        Kind::Async => {
            let rt =
                tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
            rt.block_on(async move {
                let mut w = worker::aio::Worker::new(delayer::aio::Delayer::open(&url)?);
                for topic in &opts.topics {
                    let plan = plan.clone();
                    w = w.handle(topic, move |task: worker::aio::Task| {
                        let p = plan(task.delivery());
                        async move {
                            if let Some(ttr) = p.extend {
                                task.extend(ttr).await.map_err(|e| e.to_string())?;
                            }
                            tokio::time::sleep(p.sleep).await;
                            assert!(!p.panic, "boom");
                            p.fail.map_or(Ok(()), Err)
                        }
                    });
                }
                configure_async(w, &opts).hooks(hooks).with_stopper(stop).run().await
            })
        }
    });
    Running { stopper, handle: Some(handle), events }
}

fn configure_sync(w: worker::Worker, o: &Options) -> worker::Worker {
    let w = w.concurrency(o.concurrency).ttr(o.ttr).grace(o.grace);
    if o.at_most_once {
        w.at_most_once()
    } else {
        w
    }
}

fn configure_async(w: worker::aio::Worker, o: &Options) -> worker::aio::Worker {
    let w = w.concurrency(o.concurrency).ttr(o.ttr).grace(o.grace);
    if o.at_most_once {
        w.at_most_once()
    } else {
        w
    }
}

/// Pushes `jobs` and makes them ready at once, as the server would.
pub fn ready(redis: &RedisServer, jobs: &[Job]) {
    Delayer::open(&redis.url()).expect("client").push_many(jobs).expect("push_many");
    let mut pipe = redis::pipe();
    for job in jobs {
        pipe.cmd("ZREM").arg("delayer:job_pool").arg(&job.id).ignore();
        pipe.cmd("LPUSH").arg(format!("delayer:ready_queue:{}", job.topic)).arg(&job.id).ignore();
    }
    let _: () = pipe.query(&mut redis.connection()).expect("make ready");
}

/// `n` jobs `<prefix>0..` of `topic`, due now.
pub fn jobs(topic: &str, prefix: &str, n: usize) -> Vec<Job> {
    (0..n).map(|i| Job::new(topic, format!("{prefix}{i}"), Duration::ZERO).body(format!("body {i}"))).collect()
}

pub fn field(redis: &RedisServer, id: &str, name: &str) -> Option<String> {
    redis::cmd("HGET").arg(format!("delayer:job_bucket:{id}")).arg(name).query(&mut redis.connection()).expect("hget")
}

pub fn exists(redis: &RedisServer, id: &str) -> bool {
    redis::cmd("EXISTS").arg(format!("delayer:job_bucket:{id}")).query(&mut redis.connection()).expect("exists")
}

pub fn score(redis: &RedisServer, key: &str, id: &str) -> Option<f64> {
    redis::cmd("ZSCORE").arg(key).arg(id).query(&mut redis.connection()).expect("zscore")
}

/// How many clients are blocked in Redis on `cmd` (brpop, blmove).
pub fn blocked_on(redis: &RedisServer, cmd: &str) -> usize {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut redis.connection()).expect("CLIENT LIST");
    list.lines().filter(|l| l.contains(" flags=b ") && l.contains(&format!(" cmd={cmd} "))).count()
}

pub fn now_secs() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs_f64()
}
