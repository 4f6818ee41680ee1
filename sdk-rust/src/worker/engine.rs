//! The worker's decisions, without I/O, so the thread worker and the tokio
//! worker share all of them and differ only in how they call Redis, run
//! handlers and wait.
//!
//! The loop asks [`Core::next`] what to do (fetch jobs for the free slots,
//! with the finished acks riding along; release a failed job; touch a long
//! one; start a blocking wait; sleep), does it, and reports the outcome
//! back. Everything the worker knows (slots, leases, pending acks, the
//! reconnect backoff, the stop) lives here.

use super::hooks::{Event, Hooks};
use super::Delivery;
use crate::error::Error;
use delayer_protocol::replies::FlowWait;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One blocking wait for a ready job: short, so a stop is never held up.
pub(crate) const WAIT: Duration = Duration::from_secs(1);
/// The first and the longest pause before trying Redis again.
const RETRY_MIN: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(1);
/// How long a fetch waits for half the slots to be free before it fetches
/// for the few that are: one round trip then carries a batch (the Python
/// worker's GATHER too), and Redis pays its per-call cost once per batch.
const GATHER: Duration = Duration::from_millis(5);
/// Fetches out at once (one below concurrency 8, as in every SDK). With two,
/// Redis works on one batch while the loop starts and acks the other's jobs:
/// a single fetch leaves Redis idle for the client's share of every round
/// trip, and the client for Redis's.
pub(crate) const IN_FLIGHT: usize = 2;
const IN_FLIGHT_FROM: usize = 8;
/// What a reservation released at stop carries as its last error.
/// The same text in every SDK (PROTOCOL.md, "The Worker runtime").
pub(crate) const STOPPED: &str = "WorkerStopped: the worker stopped before the handler finished";

/// How jobs are taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// reserve, run, ack (release on failure).
    AtLeastOnce,
    /// pop, run: a failure is only reported.
    AtMostOnce,
}

/// A worker's settings, the same for both kinds.
#[derive(Clone)]
pub(crate) struct Settings {
    pub(crate) concurrency: usize,
    pub(crate) ttr: Duration,
    pub(crate) grace: Duration,
    pub(crate) mode: Mode,
    pub(crate) hooks: Arc<dyn Hooks>,
}

impl Settings {
    pub(crate) fn new() -> Settings {
        Settings {
            concurrency: 10,
            ttr: Duration::from_secs(60),
            grace: Duration::from_secs(25),
            mode: Mode::AtLeastOnce,
            hooks: Arc::new(super::hooks::Silent),
        }
    }

    /// Refuses settings no worker can run with, before anything starts.
    pub(crate) fn check(&self, topics: &[String]) -> crate::Result<()> {
        if topics.is_empty() {
            return Err(Error::InvalidArgument("a worker needs at least one handler".into()));
        }
        if self.concurrency == 0 {
            return Err(Error::InvalidArgument("a worker's concurrency must be at least 1".into()));
        }
        crate::validate::ttr_ms(self.ttr)?;
        topics.iter().try_for_each(|t| Ok(crate::validate::name("topic", t)?))
    }
}

/// When a running job's reservation is next touched, and for how long; the
/// handler's `extend` moves it too.
pub(crate) struct Lease {
    state: Mutex<(Duration, Instant)>,
}

impl Lease {
    fn new(ttr: Duration, now: Instant) -> Lease {
        Lease { state: Mutex::new((ttr, now + ttr / 2)) }
    }

    /// The reservation now lasts `ttr` from `now`: touch again half way.
    pub(crate) fn extended(&self, ttr: Duration, now: Instant) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = (ttr, now + ttr / 2);
    }

    fn get(&self) -> (Duration, Instant) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_next(&self, at: Instant) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).1 = at;
    }
}

/// A job to hand to a handler: its slot (to report its end with), what it
/// is, and its lease.
pub(crate) struct Start {
    pub(crate) slot: u64,
    pub(crate) delivery: Arc<Delivery>,
    pub(crate) lease: Arc<Lease>,
}

/// A fetch's answer: the ack flags, the jobs taken, and the wait
/// instruction of a paused topic.
pub(crate) type Fetched = (Vec<bool>, Vec<Delivery>, Option<FlowWait>);

/// A fetch: reserve_many (acks first, then up to `n` jobs), or at most once
/// up to `n` pops. The loop sends it without waiting for the answer (up to
/// [`IN_FLIGHT`] are out) and reports it with [`Core::fetched`].
pub(crate) struct Fetch {
    pub(crate) topic: String,
    pub(crate) n: usize,
    pub(crate) acks: Vec<Arc<Delivery>>,
}

/// What the loop does next.
pub(crate) enum Action {
    /// Send a [`Fetch`]; report its answer with [`Core::fetched`].
    Fetch(Fetch),
    /// Release a reservation: with its backoff and `error`, or (`now`) due
    /// at once; report with [`Core::released`].
    Release { delivery: Arc<Delivery>, error: String, now: bool },
    /// Touch a running job's reservation for `ttr`; report with
    /// [`Core::touched`].
    Touch { slot: u64, delivery: Arc<Delivery>, ttr: Duration },
    /// Read Redis's maxmemory-policy (at start and after a reconnect);
    /// report with [`Core::eviction`].
    CheckEviction,
    /// Start a blocking wait until `topic` has a ready job (up to [`WAIT`]),
    /// taking nothing: the fetch that follows takes a batch, and a stop
    /// meanwhile leaves the job to other workers. With `gate` (the topic is
    /// paused: its last fetch said where to wait) the wait is on the gate,
    /// for its recheck time, and a fetch follows either way. Report with
    /// [`Core::waited`].
    Wait { topic: String, gate: Option<FlowWait> },
    /// The grace period is over: stop waiting for the running handlers
    /// (their releases are queued).
    Abort,
    /// Nothing to do until an event comes, or `until`.
    Idle { until: Option<Instant> },
    /// Stopped: return [`Core::finish`].
    Done,
}

struct Topic {
    name: String,
    /// The last fetch came back short: wait rather than fetch again.
    empty: bool,
    /// A blocking wait is out for it.
    waiting: bool,
    /// The last fetch found it paused: where to wait (a ready queue that is
    /// not empty would end every wait on it at once).
    gate: Option<FlowWait>,
}

struct Running {
    delivery: Arc<Delivery>,
    lease: Arc<Lease>,
    started: Instant,
}

struct Release {
    delivery: Arc<Delivery>,
    error: String,
    now: bool,
}

/// The state of one worker.
pub(crate) struct Core {
    s: Settings,
    topics: Vec<Topic>,
    cursor: usize,
    running: HashMap<u64, Running>,
    next_slot: u64,
    acks: Vec<Arc<Delivery>>,
    /// Fetches out, and the jobs they asked for (their slots are taken).
    fetching: usize,
    asked: usize,
    releases: VecDeque<Release>,
    retry_at: Option<Instant>,
    retry_delay: Duration,
    lost: bool,
    /// Set on stop: when the grace period ends.
    stop_by: Option<Instant>,
    /// While few slots are free: when the fetch stops waiting for more.
    gather_until: Option<Instant>,
    done: bool,
    /// Read the eviction policy before the next call: at start, and after
    /// a reconnect.
    check_eviction: bool,
}

impl Core {
    pub(crate) fn new(s: Settings, topics: Vec<String>) -> Core {
        let topics = topics.into_iter().map(|name| Topic { name, empty: false, waiting: false, gate: None }).collect();
        Core {
            s,
            topics,
            cursor: 0,
            running: HashMap::new(),
            next_slot: 0,
            acks: Vec::new(),
            fetching: 0,
            asked: 0,
            releases: VecDeque::new(),
            retry_at: None,
            retry_delay: RETRY_MIN,
            lost: false,
            stop_by: None,
            gather_until: None,
            done: false,
            check_eviction: true,
        }
    }

    pub(crate) fn settings(&self) -> &Settings {
        &self.s
    }

    fn emit(&self, event: Event<'_>) {
        emit(&*self.s.hooks, &event);
    }

    fn free(&self) -> usize {
        self.s.concurrency.saturating_sub(self.running.len() + self.asked)
    }

    /// The next topic in turn that `pick` accepts (round robin: fair).
    fn rotate(&mut self, pick: impl Fn(&Topic) -> bool) -> Option<usize> {
        let n = self.topics.len();
        let ix = (0..n).map(|k| (self.cursor + k) % n).find(|&ix| pick(&self.topics[ix]))?;
        self.cursor = (ix + 1) % n;
        Some(ix)
    }

    /// What to do next, at `now`.
    pub(crate) fn next(&mut self, now: Instant) -> Action {
        if self.done {
            return Action::Done;
        }
        let stopping = self.stop_by.is_some();
        if let Some(by) = self.stop_by.filter(|by| now >= *by) {
            if !self.running.is_empty() {
                return self.abort();
            }
            if (self.nothing_to_send() && self.fetching == 0) || now >= by + RETRY_MAX {
                return self.finish_now();
            }
        }
        if let Some(at) = self.retry_at {
            if now < at {
                return Action::Idle { until: Some(self.stop_by.map_or(at, |by| by.min(at))) };
            }
            self.retry_at = None;
        }
        if std::mem::take(&mut self.check_eviction) && !stopping {
            return Action::CheckEviction;
        }
        if let Some(r) = self.releases.pop_front() {
            return Action::Release { delivery: r.delivery, error: r.error, now: r.now };
        }
        if let Some(touch) = self.due_touch(now) {
            return touch;
        }
        let free = self.free();
        let gather = !stopping && free > 0 && self.gathering(free, now);
        let can_fetch = self.fetching < if self.s.concurrency >= IN_FLIGHT_FROM { IN_FLIGHT } else { 1 };
        if !stopping && free > 0 && !gather && can_fetch {
            if let Some(ix) = self.rotate(|t| !t.empty && !t.waiting) {
                let share = self.s.concurrency.div_ceil(self.topics.len());
                let n = free.min(share).min(crate::validate::MAX_RESERVE_MANY);
                self.gather_until = None;
                return self.fetch(self.topics[ix].name.clone(), n);
            }
        }
        if !self.acks.is_empty() && !gather && can_fetch {
            return self.fetch(self.topics[self.cursor].name.clone(), 0);
        }
        // A topic found empty is waited on; one with jobs is fetched from
        // once a fetch comes back.
        if !stopping && free > 0 && !gather {
            if let Some(ix) = self.rotate(|t| t.empty && !t.waiting) {
                self.topics[ix].waiting = true;
                let t = &self.topics[ix];
                return Action::Wait { topic: t.name.clone(), gate: t.gate.clone() };
            }
        }
        // A wait still out takes nothing: it is not waited for.
        if stopping && self.running.is_empty() && self.nothing_to_send() && self.fetching == 0 {
            return self.finish_now();
        }
        let touch_at = self.running.values().filter(|r| r.delivery.receipt.is_some()).map(|r| r.lease.get().1).min();
        // Past the grace period, only unsent acks are left: look again soon
        // (they are given up RETRY_MAX after it).
        let stop_at = self.stop_by.map(|by| if by > now { by } else { now + RETRY_MIN });
        let gather_at = self.gather_until.filter(|_| gather);
        let until = [touch_at, stop_at, gather_at].into_iter().flatten().min();
        Action::Idle { until }
    }

    fn fetch(&mut self, topic: String, n: usize) -> Action {
        self.fetching += 1;
        self.asked += n;
        Action::Fetch(Fetch { topic, n, acks: std::mem::take(&mut self.acks) })
    }

    /// Whether to wait (up to [`GATHER`]) for more slots before fetching:
    /// fewer than half are free, handlers still run (each that ends frees
    /// one and wakes the loop), and a topic has jobs to fetch.
    fn gathering(&mut self, free: usize, now: Instant) -> bool {
        let few = free < self.s.concurrency.div_ceil(2) && !self.running.is_empty();
        if !few || !self.topics.iter().any(|t| !t.empty && !t.waiting) {
            self.gather_until = None;
            return false;
        }
        now < *self.gather_until.get_or_insert(now + GATHER)
    }

    fn nothing_to_send(&self) -> bool {
        self.acks.is_empty() && self.releases.is_empty()
    }

    fn finish_now(&mut self) -> Action {
        self.done = true;
        self.emit(Event::Stopped);
        Action::Done
    }

    /// The grace period is over: every running reservation is released, due
    /// now, and its handler forgotten.
    fn abort(&mut self) -> Action {
        for (_, r) in self.running.drain() {
            emit(&*self.s.hooks, &Event::ReleasedAtStop { delivery: &r.delivery });
            if r.delivery.receipt.is_some() {
                self.releases.push_back(Release { delivery: r.delivery, error: STOPPED.into(), now: true });
            }
        }
        Action::Abort
    }

    fn due_touch(&mut self, now: Instant) -> Option<Action> {
        let (slot, r) = self.running.iter().find(|(_, r)| r.delivery.receipt.is_some() && r.lease.get().1 <= now)?;
        let (ttr, _) = r.lease.get();
        // Not again before this one is answered: the answer sets the next.
        r.lease.set_next(now + ttr);
        Some(Action::Touch { slot: *slot, delivery: r.delivery.clone(), ttr })
    }

    /// Asks the worker to stop (once).
    pub(crate) fn stop(&mut self, now: Instant) {
        if self.stop_by.is_none() {
            self.stop_by = Some(now + self.s.grace);
            self.emit(Event::Stopping);
        }
    }

    fn start(&mut self, delivery: Delivery, now: Instant) -> Start {
        self.next_slot += 1;
        let delivery = Arc::new(delivery);
        let lease = Arc::new(Lease::new(self.s.ttr, now));
        self.emit(Event::Started { delivery: &delivery });
        self.running.insert(self.next_slot, Running { delivery: delivery.clone(), lease: lease.clone(), started: now });
        Start { slot: self.next_slot, delivery, lease }
    }

    /// Redis answered a call: a lost connection is back.
    fn answered(&mut self) {
        self.retry_delay = RETRY_MIN;
        if self.lost {
            self.lost = false;
            self.check_eviction = true;
            self.emit(Event::Reconnected);
        }
    }

    /// The answer to [`Action::CheckEviction`]: the policy, or why it could
    /// not be read (then nothing is said: the worker has no opinion).
    pub(crate) fn eviction(&mut self, policy: std::result::Result<String, String>) {
        if let Some(policy) = policy.ok().filter(|p| !crate::eviction::is_safe(p)) {
            self.emit(Event::UnsafeEviction { policy: &policy, warning: &crate::eviction::warning(&policy) });
        }
    }

    /// A call failed: a lost connection, or a Redis that cannot serve yet,
    /// is [`Event::ConnectionLost`]; any other error Redis answers (a key of
    /// the wrong type, a script error) is [`Event::Error`]. Either way a
    /// fetch or wait (`pause`) is tried again after the backoff, as in every
    /// SDK: the worker never stops by itself, and its other topics go on.
    fn failed(&mut self, e: Error, now: Instant, pause: bool) {
        let lost = transient(&e);
        if lost {
            self.emit(Event::ConnectionLost { error: &e, retry_in: self.retry_delay });
            self.lost = true;
        } else {
            self.emit(Event::Error { error: &e });
        }
        if lost || pause {
            self.retry_at = Some(now + self.retry_delay);
            self.retry_delay = (self.retry_delay * 2).min(RETRY_MAX);
        }
    }

    /// The answer to [`Action::Fetch`]: the ack flags and the jobs taken,
    /// or the error. Returns the jobs to start (also after a stop: they are
    /// reserved, and run in the grace period or are released at its end).
    pub(crate) fn fetched(&mut self, fetch: Fetch, result: crate::Result<Fetched>, now: Instant) -> Vec<Start> {
        let Fetch { topic, n, acks } = fetch;
        self.fetching = self.fetching.saturating_sub(1);
        self.asked = self.asked.saturating_sub(n);
        let (flags, jobs, flow) = match result {
            Ok(answer) => answer,
            Err(e) => {
                // Sent again with the next call: an ack that did land
                // answers 0 then, and a job is never run twice for it.
                self.acks.extend(acks);
                self.failed(e, now, true);
                return Vec::new();
            }
        };
        self.answered();
        for (delivery, held) in acks.iter().zip(flags) {
            if held {
                self.emit(Event::Acked { delivery });
            } else {
                self.emit(Event::NotHeld { delivery });
            }
        }
        if let Some(t) = self.topics.iter_mut().find(|t| t.name == topic) {
            t.empty = jobs.len() < n;
            // Only a fetch that asked for jobs learns whether it is paused.
            if n > 0 {
                t.gate = flow;
            }
        }
        jobs.into_iter().map(|d| self.start(d, now)).collect()
    }

    /// The answer to [`Action::Wait`]: whether the topic has a ready job
    /// (`false`: none within [`WAIT`]; the next wait starts at once), or the
    /// error.
    pub(crate) fn waited(&mut self, topic: &str, result: crate::Result<bool>, now: Instant) {
        if let Some(t) = self.topics.iter_mut().find(|t| t.name == topic) {
            t.waiting = false;
            // After a gate's wait, woken or not, a fetch asks again.
            t.empty = !matches!(result, Ok(true)) && t.gate.is_none();
        }
        match result {
            Ok(_) => self.answered(),
            Err(e) => self.failed(e, now, true),
        }
    }

    /// A handler ended: `Ok`, or its error's text.
    pub(crate) fn done(&mut self, slot: u64, outcome: Result<(), String>, now: Instant) {
        let Some(r) = self.running.remove(&slot) else {
            return; // released at the end of the grace period
        };
        let elapsed = now.saturating_duration_since(r.started);
        match outcome {
            Ok(()) => {
                self.emit(Event::Succeeded { delivery: &r.delivery, elapsed });
                if self.s.mode == Mode::AtLeastOnce {
                    self.acks.push(r.delivery);
                }
            }
            Err(error) => {
                self.emit(Event::Failed { delivery: &r.delivery, error: &error, elapsed });
                if self.s.mode == Mode::AtLeastOnce {
                    self.releases.push_back(Release { delivery: r.delivery, error, now: false });
                }
            }
        }
    }

    /// The answer to [`Action::Release`] (given back for a retry).
    pub(crate) fn released(
        &mut self,
        delivery: Arc<Delivery>,
        error: String,
        now_due: bool,
        result: crate::Result<bool>,
        now: Instant,
    ) {
        match result {
            Ok(held) => {
                self.answered();
                if !held {
                    self.emit(Event::NotHeld { delivery: &delivery });
                }
            }
            Err(e) => {
                let lost = transient(&e);
                self.failed(e, now, false);
                if lost {
                    self.releases.push_front(Release { delivery, error, now: now_due });
                }
            }
        }
    }

    /// The answer to [`Action::Touch`]: the reservation's new deadline, or
    /// `None` when it was no longer held.
    pub(crate) fn touched(&mut self, slot: u64, result: crate::Result<bool>, now: Instant) {
        let lease = self.running.get(&slot).map(|r| (r.delivery.clone(), r.lease.clone()));
        match result {
            Ok(held) => {
                self.answered();
                let Some((delivery, lease)) = lease else { return };
                if held {
                    let (ttr, _) = lease.get();
                    lease.set_next(now + ttr / 2);
                    self.emit(Event::Touched { delivery: &delivery });
                } else {
                    // Lost to the server's expiry: touching again is no use.
                    lease.set_next(now + Duration::from_secs(86_400 * 365));
                    self.emit(Event::NotHeld { delivery: &delivery });
                }
            }
            Err(e) => {
                if let Some((_, lease)) = lease {
                    lease.set_next(now + RETRY_MIN);
                }
                self.failed(e, now, false);
            }
        }
    }

    /// How `run` ends, once stopped: `Ok` (errors were reported as events).
    pub(crate) fn finish(&mut self) -> crate::Result<()> {
        Ok(())
    }
}

/// Whether `e` passes by itself: the connection is lost (the SDK's
/// [`Error::Connection`]), or Redis answers that it cannot serve yet: loading
/// its data after a restart, busy with a long script, a replica (a failover
/// under way), a cluster reconfiguring.
fn transient(e: &Error) -> bool {
    match e {
        Error::Connection(_) => true,
        Error::Redis(e) => {
            matches!(e.code(), Some("LOADING" | "BUSY" | "READONLY" | "MASTERDOWN" | "TRYAGAIN" | "CLUSTERDOWN"))
        }
        _ => false,
    }
}

/// Gives `event` to the hooks. A hook that panics is reported on stderr and
/// otherwise ignored: metrics or logging never stop the worker, nor lose
/// the job's ack (as in the Python and PHP Workers).
fn emit(hooks: &dyn Hooks, event: &Event<'_>) {
    if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hooks.event(event))) {
        // The event's name only: a job's body may hold secrets.
        eprintln!("delayer worker: a hook panicked on {}: {}", event.name(), panic_text(panic));
    }
}

/// A panicking handler's failure text.
pub(crate) fn panic_text(panic: Box<dyn std::any::Any + Send>) -> String {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into());
    format!("handler panicked: {what}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(n: usize) -> Delivery {
        Delivery {
            id: format!("j{n}"),
            topic: "t".into(),
            body: Vec::new(),
            attempts: 1,
            max_attempts: 25,
            receipt: Some(n.to_string()),
            raw_id: None,
            raw_topic: None,
            traceparent: None,
        }
    }

    fn fetch(action: Action) -> Fetch {
        match action {
            Action::Fetch(f) => f,
            _ => panic!("not a fetch"),
        }
    }

    /// Two fetches go out at once, each for the slots free when it goes
    /// (the acks riding along); no third; a stop ends the run only once
    /// both are answered, and their jobs still start.
    #[test]
    fn two_fetches_in_flight_and_a_stop_waits_for_them() {
        let mut s = Settings::new();
        s.concurrency = 100;
        let mut core = Core::new(s, vec!["t".into()]);
        let t0 = Instant::now();
        core.next(t0); // the eviction check
        let first = fetch(core.next(t0));
        assert_eq!(first.n, 100);
        assert!(matches!(core.next(t0), Action::Idle { .. }), "no slot is free for a second fetch");
        let starts = core.fetched(first, Ok((Vec::new(), (0..100).map(job).collect(), None)), t0);
        for start in &starts[..50] {
            core.done(start.slot, Ok(()), t0);
        }
        let second = fetch(core.next(t0));
        assert_eq!((second.n, second.acks.len()), (50, 50));
        for start in &starts[50..] {
            core.done(start.slot, Ok(()), t0);
        }
        let third = fetch(core.next(t0));
        assert_eq!((third.n, third.acks.len()), (50, 50), "the second fetch is still out");
        assert!(matches!(core.next(t0), Action::Idle { .. }), "two are out: no third");
        core.stop(t0);
        let more = core.fetched(second, Ok((vec![true; 50], (100..150).map(job).collect(), None)), t0);
        assert_eq!(more.len(), 50, "jobs fetched before the stop still run");
        for start in more {
            core.done(start.slot, Ok(()), t0);
        }
        let flush = fetch(core.next(t0));
        assert_eq!((flush.n, flush.acks.len()), (0, 50), "a stopping worker sends its acks, fetches no jobs");
        core.fetched(flush, Ok((vec![true; 50], Vec::new(), None)), t0);
        assert!(matches!(core.next(t0), Action::Idle { .. }), "a fetch is still out");
        core.fetched(third, Ok((vec![true; 50], Vec::new(), None)), t0);
        assert!(matches!(core.next(t0), Action::Done));
    }
}
