//! The tokio worker: handlers run as tasks (at most `concurrency` at once),
//! the loop calls Redis with the async client, and blocking waits run as
//! tasks of their own. Decisions are the engine's.

use super::engine::{panic_text, Action, Core, Fetch, Fetched, Start, WAIT};
use super::{fetch, settings_builder, task_type, worker_type};
use crate::aio::Delayer;
use crate::Result;
use delayer_protocol::replies::FlowWait;
use std::collections::HashMap;
use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio::task::{Id, JoinSet};

type Outcome = std::result::Result<(), String>;
type Handler = Arc<dyn Fn(Task) -> Pin<Box<dyn Future<Output = Outcome> + Send>> + Send + Sync>;

task_type! {
    /// A job in a handler's hands: the [`Delivery`] (by `Deref`), and
    /// [`Task::extend`]. Cheap to clone.
    #[derive(Clone)]
    struct Task(Delayer);
    /// As [`crate::worker::Task::extend`]: the reservation now ends `ttr`
    /// from now; `false` when it was no longer held, and at most once.
    fn extend async await;
}

/// Resolves on the first SIGTERM or SIGINT: give it to
/// [`Worker::run_until`]. If the handlers cannot be set, it never resolves
/// (and says so on stderr): the process is then stopped the default way.
#[cfg(unix)]
pub async fn shutdown_signal() {
    match super::stop::Signals::new() {
        Ok(mut signals) => signals.recv().await,
        Err(e) => {
            eprintln!("delayer worker: cannot listen for SIGTERM/SIGINT: {e}");
            std::future::pending::<()>().await
        }
    }
}

worker_type! {
    /// A worker of tokio tasks, with the async client.
    ///
    /// ```no_run
    /// use delayer::worker::aio::{shutdown_signal, Task, Worker};
    ///
    /// # async fn run() -> delayer::Result<()> {
    /// let delayer = delayer::aio::Delayer::open("redis://127.0.0.1:6379/0")?;
    /// Worker::new(delayer)
    ///     .concurrency(20)
    ///     .handle("sms", |task: Task| async move {
    ///         let text = task.body_str().filter(|t| !t.is_empty()).ok_or("no text")?;
    ///         println!("sent {}: {text}", task.id);
    ///         Ok::<(), &str>(())
    ///     })
    ///     .run_until(shutdown_signal())
    ///     .await
    /// # }
    /// ```
    struct Worker(Delayer, Handler) as "aio::Worker";
}

enum Msg {
    Fetched(Fetch, Result<Fetched>),
    Waited(String, Result<bool>),
    Stop,
}

impl Worker {
    /// Runs `handler` for the jobs of `topic` (replacing an earlier one).
    /// `Ok` acks the job; `Err` releases it with its backoff, its `Display`
    /// becoming the job's last error.
    pub fn handle<F, Fut, E>(mut self, topic: &str, handler: F) -> Worker
    where
        F: Fn(Task) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: Display + Send + 'static,
    {
        let handler: Handler = Arc::new(move |task: Task| {
            // In its consumer span (feature opentelemetry).
            let delivery = task.delivery.clone();
            Box::pin(crate::trace::future_in_span(&delivery, || {
                let run = handler(task);
                async move { run.await.map_err(|e| e.to_string()) }
            }))
        });
        self.handlers.insert(topic.to_string(), handler);
        self
    }

    settings_builder!();

    /// Runs until `shutdown` resolves (e.g. [`shutdown_signal`]) or the
    /// stopper is stopped; then as [`Worker::run`].
    pub async fn run_until(self, shutdown: impl Future<Output = ()> + Send) -> Result<()> {
        let stopper = self.stopper.clone();
        let run = self.run();
        tokio::pin!(run);
        tokio::select! {
            done = &mut run => return done,
            _ = shutdown => stopper.stop(),
        }
        run.await
    }

    /// Runs until stopped (see [`Worker::stopper`]): then takes no more
    /// jobs, waits up to the grace period for running handlers, releases
    /// the reservations of those still running (aborting their tasks) and
    /// returns. Lost connections and errors Redis answers are reported and
    /// retried for ever (`Err` only for bad settings). Call it inside a
    /// tokio runtime.
    pub async fn run(self) -> Result<()> {
        let mut topics: Vec<String> = self.handlers.keys().cloned().collect();
        topics.sort();
        self.settings.check(&topics)?;
        let (events, mut inbox) = mpsc::unbounded_channel();
        let stop_events = events.clone();
        self.stopper.on_stop(move || {
            let _ = stop_events.send(Msg::Stop);
        });
        let mut core = Core::new(self.settings.clone(), topics);
        let mut run = Loop { worker: &self, core: &mut core, events, tasks: JoinSet::new(), slots: HashMap::new() };
        run.run(&mut inbox).await;
        core.finish()
    }
}

/// One run of the loop.
struct Loop<'a> {
    worker: &'a Worker,
    core: &'a mut Core,
    events: UnboundedSender<Msg>,
    tasks: JoinSet<Outcome>,
    slots: HashMap<Id, u64>,
}

impl Loop<'_> {
    async fn run(&mut self, inbox: &mut UnboundedReceiver<Msg>) {
        let client = &self.worker.client;
        loop {
            while let Ok(msg) = inbox.try_recv() {
                self.take(msg);
            }
            while let Some(joined) = self.tasks.try_join_next_with_id() {
                self.joined(joined);
            }
            match self.core.next(Instant::now()) {
                Action::Fetch(f) => self.fetch(f),
                Action::Release { delivery, error, now } => {
                    let delay = now.then_some(Duration::ZERO);
                    let result = client.release_with_error(delivery.job_ref(), delay, &error).await;
                    self.core.released(delivery, error, now, result, Instant::now());
                }
                Action::Touch { slot, delivery, ttr } => {
                    let result = client.touch(delivery.job_ref(), ttr).await.map(|d| d.is_some());
                    self.core.touched(slot, result, Instant::now());
                }
                Action::CheckEviction => self.core.eviction(client.eviction_policy().await),
                Action::Wait { topic, gate } => self.wait(topic, gate),
                Action::Abort => {
                    self.tasks.abort_all();
                    self.slots.clear();
                }
                Action::Idle { until } => {
                    let sleep = async {
                        match until {
                            Some(at) => tokio::time::sleep_until(at.into()).await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        Some(msg) = inbox.recv() => self.take(msg),
                        Some(joined) = self.tasks.join_next_with_id() => self.joined(joined),
                        _ = sleep => {}
                    }
                }
                Action::Done => return,
            }
        }
    }

    fn take(&mut self, msg: Msg) {
        let now = Instant::now();
        match msg {
            Msg::Fetched(f, result) => {
                for start in self.core.fetched(f, result, now) {
                    self.dispatch(start);
                }
            }
            Msg::Waited(topic, result) => self.core.waited(&topic, result, now),
            Msg::Stop => self.core.stop(now),
        }
    }

    fn joined(&mut self, joined: std::result::Result<(Id, Outcome), tokio::task::JoinError>) {
        let (id, outcome) = match joined {
            Ok((id, outcome)) => (id, outcome),
            Err(e) => {
                let id = e.id();
                if e.is_cancelled() {
                    self.slots.remove(&id);
                    return;
                }
                (id, Err(panic_text(e.into_panic())))
            }
        };
        if let Some(slot) = self.slots.remove(&id) {
            self.core.done(slot, outcome, Instant::now());
        }
    }

    /// Sends a fetch as a task of its own: the loop goes on starting and
    /// acking jobs while Redis answers.
    fn fetch(&mut self, f: Fetch) {
        let (client, events, settings) =
            (self.worker.client.clone(), self.events.clone(), self.core.settings().clone());
        tokio::spawn(async move {
            let result = fetch!(client, settings, f, await);
            let _ = events.send(Msg::Fetched(f, result));
        });
    }

    /// A blocking wait until the topic has a ready job (taking nothing), or
    /// on its gate while it is paused,
    /// as a task of its own, so finished jobs are acked meanwhile. Left to
    /// end by itself at a stop (within [`WAIT`]).
    fn wait(&mut self, topic: String, gate: Option<FlowWait>) {
        let (client, events) = (self.worker.client.clone(), self.events.clone());
        tokio::spawn(async move {
            let result = match gate {
                Some(flow) => client.wait_gate(&flow, WAIT).await,
                None => client.wait_ready(&topic, WAIT).await,
            };
            let _ = events.send(Msg::Waited(topic, result));
        });
    }

    fn dispatch(&mut self, start: Start) {
        let Start { slot, delivery, lease } = start;
        let Some(handler) = self.worker.handlers.get(&delivery.topic).cloned() else {
            // Only topics with a handler are fetched; a foreign job in a
            // queue names another topic: it fails, to be seen.
            let error = format!("no handler for topic {:?}", delivery.topic);
            self.core.done(slot, Err(error), Instant::now());
            return;
        };
        let task = Task { delivery, lease, client: self.worker.client.clone() };
        let handle = self.tasks.spawn(handler(task));
        self.slots.insert(handle.id(), slot);
    }
}
