//! A warning when jobs wait in the other key layout.
//!
//! A client left on the other `layout` pushes jobs this server never moves,
//! and nothing else would say so: the job just waits (README, "Key
//! layouts"). Each mover looks once a minute: a per-topic server at the
//! classic pool (`ZCARD <prefix>job_pool`), a classic server at the pools
//! and reservations of the topics in the per-topic index (`<prefix>due`,
//! at most [`TOPICS_LOOKED_AT`] of them). While a migration runs both
//! layouts hold jobs, so the warning comes at most every ten minutes.

use delayer::connection::{Batch, Conn};
use delayer::{Keys, Layout, TopicKeys};
use log::warn;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often the other layout's keys are looked at.
const CHECK_EVERY: Duration = Duration::from_secs(60);
/// How often the warning is repeated while jobs keep waiting there.
const WARN_EVERY: Duration = Duration::from_secs(600);
/// Index entries a classic server looks at (a bounded look, not a census).
const TOPICS_LOOKED_AT: isize = 20;

/// Watches the layout this server does not run.
pub struct OtherLayout {
    /// The layout this server runs.
    layout: Layout,
    prefix: String,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    checked: Option<Instant>,
    warned: Option<Instant>,
}

impl OtherLayout {
    pub fn new(layout: Layout, prefix: &str) -> OtherLayout {
        OtherLayout { layout, prefix: prefix.to_string(), state: Mutex::default() }
    }

    /// Looks, when a minute has passed, and warns when jobs wait in the
    /// other layout. A failed look is left to the next one: the tick's own
    /// calls report an unreachable Redis.
    pub fn check(&self, conn: &mut Conn) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.checked.is_some_and(|at| at.elapsed() < CHECK_EVERY) {
            return;
        }
        state.checked = Some(Instant::now());
        let Ok(waiting) = self.waiting(conn) else { return };
        if waiting == 0 {
            state.warned = None;
            return;
        }
        if state.warned.is_some_and(|at| at.elapsed() < WARN_EVERY) {
            return;
        }
        state.warned = Some(Instant::now());
        warn!("{}", self.message(waiting));
    }

    /// Jobs scheduled or reserved in the other layout (a lower bound for a
    /// classic server).
    fn waiting(&self, conn: &mut Conn) -> redis::RedisResult<u64> {
        match self.layout {
            Layout::Topic => redis::cmd("ZCARD").arg(Keys::new(&self.prefix).job_pool()).query(conn),
            Layout::Classic => {
                let keys = TopicKeys::new(&self.prefix);
                let topics: Vec<String> =
                    redis::cmd("ZRANGE").arg(keys.due()).arg(0).arg(TOPICS_LOOKED_AT - 1).query(conn)?;
                let mut counts = Batch::new();
                for t in topics.iter().filter(|t| !t.contains(['{', '}'])) {
                    counts.add(redis::Cmd::zcard(keys.pool(t))).add(redis::Cmd::zcard(keys.reserved(t)));
                }
                let counts: Vec<u64> = counts.query(conn)?;
                Ok(counts.iter().sum())
            }
        }
    }

    fn message(&self, waiting: u64) -> String {
        let (other, here) = match self.layout {
            Layout::Topic => ("classic", "topic"),
            Layout::Classic => ("topic", "classic"),
        };
        format!(
            "{waiting} job(s) wait in the {other} key layout under prefix {:?}, which this server (layout = {here}) \
             never moves: a client or server there uses layout = {other}. Give every client and server the same \
             layout, or move the jobs with `delayer migrate --to {here}` (README, \"Key layouts\")",
            self.prefix
        )
    }
}
