//! The thread worker: handlers run on a pool of `concurrency` threads, the
//! loop calls Redis with the blocking client, and blocking waits run on
//! threads of their own. Decisions are the engine's.

use super::engine::{panic_text, Action, Core, Fetch, Fetched, Start, IN_FLIGHT, WAIT};
use super::{fetch, settings_builder, task_type, worker_type};
use crate::{Delayer, Result};
use delayer_protocol::replies::FlowWait;
use std::fmt::Display;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

type Handler = Arc<dyn Fn(&Task) -> std::result::Result<(), String> + Send + Sync>;

task_type! {
    /// A job in a handler's hands: the [`Delivery`] (by `Deref`), and
    /// [`Task::extend`].
    struct Task(Delayer);
    /// Still working: the reservation now ends `ttr` from now (the worker's
    /// own touches then keep it up by `ttr` at a time). `false` when it was
    /// no longer held, and at most once (nothing to extend).
    fn extend;
}

worker_type! {
    /// A worker on threads, with the blocking client.
    ///
    /// ```no_run
    /// use delayer::worker::{Task, Worker};
    ///
    /// # fn main() -> delayer::Result<()> {
    /// let worker = delayer::worker::Worker::new(delayer::Delayer::open("redis://127.0.0.1:6379/0")?)
    ///     .concurrency(4)
    ///     .handle("sms", |task: &Task| match task.body_str() {
    ///         Some(text) if !text.is_empty() => Ok(println!("sent {}: {text}", task.id)),
    ///         _ => Err("no text"),
    ///     });
    /// worker.stopper().stop_on_signals()?;
    /// worker.run()
    /// # }
    /// ```
    struct Worker(Delayer, Handler) as "Worker";
}

enum Msg {
    Done(u64, std::result::Result<(), String>),
    Fetched(Fetch, Result<Fetched>),
    Waited(String, Result<bool>),
    Stop,
}

impl Worker {
    /// Runs `handler` for the jobs of `topic` (replacing an earlier one).
    /// `Ok` acks the job; `Err` releases it with its backoff, its `Display`
    /// becoming the job's last error.
    pub fn handle<F, E>(mut self, topic: &str, handler: F) -> Worker
    where
        F: Fn(&Task) -> std::result::Result<(), E> + Send + Sync + 'static,
        E: Display,
    {
        let handler: Handler = Arc::new(move |task: &Task| {
            crate::trace::run_in_span(task.delivery(), || handler(task).map_err(|e| e.to_string()))
        });
        self.handlers.insert(topic.to_string(), handler);
        self
    }

    settings_builder!();

    /// Runs until stopped (see [`Worker::stopper`]): then takes no more
    /// jobs, waits up to the grace period for running handlers, releases
    /// the reservations of those still running (their threads are left to
    /// finish on their own) and returns. Lost connections and errors Redis
    /// answers are reported and retried for ever (`Err` only for bad
    /// settings).
    pub fn run(self) -> Result<()> {
        let mut topics: Vec<String> = self.handlers.keys().cloned().collect();
        topics.sort();
        self.settings.check(&topics)?;
        let (events, inbox) = mpsc::channel();
        let stop_events = events.clone();
        self.stopper.on_stop(move || {
            let _ = stop_events.send(Msg::Stop);
        });
        let jobs = self.start_threads(&events)?;
        let fetches = self.start_fetchers(&events)?;
        let mut core = Core::new(self.settings.clone(), topics);
        let mut run = Loop { worker: &self, core: &mut core, events, jobs, fetches };
        run.run(&inbox);
        core.finish()
    }

    /// The handler threads, taking jobs from one queue.
    fn start_threads(&self, events: &Sender<Msg>) -> Result<Sender<(u64, Task, Handler)>> {
        pool("delayer-worker", self.settings.concurrency, events, |(slot, task, handler): (u64, Task, Handler)| {
            let outcome = catch_unwind(AssertUnwindSafe(|| handler(&task))).unwrap_or_else(|p| Err(panic_text(p)));
            Msg::Done(slot, outcome)
        })
    }

    /// The threads that send fetches, so the loop goes on starting and
    /// acking jobs while Redis answers (the engine has up to two out).
    fn start_fetchers(&self, events: &Sender<Msg>) -> Result<Sender<Fetch>> {
        let (client, settings) = (self.client.clone(), self.settings.clone());
        pool("delayer-fetch", IN_FLIGHT, events, move |f: Fetch| {
            let result = fetch!(client, settings, f);
            Msg::Fetched(f, result)
        })
    }
}

/// `n` threads named `<name>-<k>` taking work from one queue, each turning
/// it into a message for the loop. They end when the loop drops the sender
/// or stops listening.
fn pool<T: Send + 'static>(
    name: &str,
    n: usize,
    events: &Sender<Msg>,
    work: impl Fn(T) -> Msg + Clone + Send + 'static,
) -> Result<Sender<T>> {
    let (sender, queue) = mpsc::channel::<T>();
    let queue = Arc::new(Mutex::new(queue));
    for k in 0..n {
        let (queue, events, work) = (queue.clone(), events.clone(), work.clone());
        thread::Builder::new()
            .name(format!("{name}-{k}"))
            .spawn(move || loop {
                let next = queue.lock().unwrap_or_else(|e| e.into_inner()).recv();
                let Ok(item) = next else { return };
                if events.send(work(item)).is_err() {
                    return;
                }
            })
            .map_err(|e| crate::Error::InvalidArgument(format!("cannot start a worker thread: {e}")))?;
    }
    Ok(sender)
}

/// One run of the loop.
struct Loop<'a> {
    worker: &'a Worker,
    core: &'a mut Core,
    events: Sender<Msg>,
    jobs: Sender<(u64, Task, Handler)>,
    fetches: Sender<Fetch>,
}

impl Loop<'_> {
    fn run(&mut self, inbox: &Receiver<Msg>) {
        let client = &self.worker.client;
        loop {
            while let Ok(msg) = inbox.try_recv() {
                self.take(msg);
            }
            match self.core.next(Instant::now()) {
                Action::Fetch(f) => {
                    if let Err(mpsc::SendError(f)) = self.fetches.send(f) {
                        let error = crate::Error::Connection("the worker's fetch threads are gone".into());
                        self.take(Msg::Fetched(f, Err(error)));
                    }
                }
                Action::Release { delivery, error, now } => {
                    let delay = now.then_some(Duration::ZERO);
                    let result = client.release_with_error(delivery.job_ref(), delay, &error);
                    self.core.released(delivery, error, now, result, Instant::now());
                }
                Action::Touch { slot, delivery, ttr } => {
                    let result = client.touch(delivery.job_ref(), ttr).map(|d| d.is_some());
                    self.core.touched(slot, result, Instant::now());
                }
                Action::CheckEviction => self.core.eviction(client.eviction_policy()),
                Action::Wait { topic, gate } => self.wait(topic, gate),
                Action::Abort => {}
                Action::Idle { until } => {
                    let msg = match until {
                        Some(at) => inbox.recv_timeout(at.saturating_duration_since(Instant::now())),
                        None => inbox.recv().map_err(|_| RecvTimeoutError::Disconnected),
                    };
                    if let Ok(msg) = msg {
                        self.take(msg);
                    }
                }
                Action::Done => return,
            }
        }
    }

    fn take(&mut self, msg: Msg) {
        let now = Instant::now();
        match msg {
            Msg::Done(slot, outcome) => self.core.done(slot, outcome, now),
            Msg::Fetched(f, result) => {
                for start in self.core.fetched(f, result, now) {
                    self.dispatch(start);
                }
            }
            Msg::Waited(topic, result) => self.core.waited(&topic, result, now),
            Msg::Stop => self.core.stop(now),
        }
    }

    /// A blocking wait until the topic has a ready job (taking nothing), or
    /// on its gate while it is paused,
    /// on a thread of its own, so finished jobs are acked meanwhile. Left
    /// to end by itself at a stop.
    fn wait(&mut self, topic: String, gate: Option<FlowWait>) {
        let (client, events) = (self.worker.client.clone(), self.events.clone());
        let name = topic.clone();
        let waiter = thread::Builder::new().name("delayer-wait".into()).spawn(move || {
            let result = match gate {
                Some(flow) => client.wait_gate(&flow, WAIT),
                None => client.wait_ready(&topic, WAIT),
            };
            let _ = events.send(Msg::Waited(topic, result));
        });
        if let Err(e) = waiter {
            let error = crate::Error::Connection(format!("cannot start a waiting thread: {e}"));
            let _ = self.events.send(Msg::Waited(name, Err(error)));
        }
    }

    fn dispatch(&mut self, start: Start) {
        let Start { slot, delivery, lease } = start;
        let handler = self.worker.handlers.get(&delivery.topic).cloned();
        let Some(handler) = handler else {
            // Only topics with a handler are fetched; a foreign job in a
            // queue names another topic: it fails, to be seen.
            let error = format!("no handler for topic {:?}", delivery.topic);
            self.core.done(slot, Err(error), Instant::now());
            return;
        };
        let task = Task { delivery, lease, client: self.worker.client.clone() };
        if self.jobs.send((slot, task, handler)).is_err() {
            self.core.done(slot, Err("the worker's threads are gone".into()), Instant::now());
        }
    }
}
