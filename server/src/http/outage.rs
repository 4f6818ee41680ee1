//! Redis trouble as the API meets it: no answer within `http_redis_timeout`
//! (a stalled or overloaded Redis), Redis out of memory (`maxmemory` under
//! `noeviction` refuses writes), Redis unreachable. Requests meanwhile get a
//! 503 whose code names the trouble (with `Retry-After`), within a bounded
//! time: `http_redis_timeout`, or a blocking pop's `wait` plus that.
//!
//! Each trouble is an episode, said twice whatever the traffic: once when the
//! first request meets it, and once when a request gets through again (for
//! out of memory, a write), with how long it lasted and how many requests
//! got a 503 meanwhile.

use crate::http::error::{ApiError, ApiResult};
use crate::http::Api;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long after the trouble was last met an answer must come to end the
/// episode: a request that got through between two that did not (a pop
/// while pushes are refused for memory) does not end it.
const QUIET: Duration = Duration::from_secs(2);

/// What kind of trouble.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trouble {
    /// No answer within the deadline.
    Stalled,
    /// Redis refused a write: out of memory.
    OutOfMemory,
    /// Redis cannot be reached.
    Unavailable,
}

impl Trouble {
    const ALL: [Trouble; 3] = [Trouble::Stalled, Trouble::OutOfMemory, Trouble::Unavailable];

    fn describe(self) -> &'static str {
        match self {
            Trouble::Stalled => "no answer from Redis",
            Trouble::OutOfMemory => "Redis out of memory",
            Trouble::Unavailable => "Redis unreachable",
        }
    }
}

/// Marks a response that met Redis trouble: the error's kind and message,
/// for the episode's first line.
#[derive(Debug, Clone)]
pub struct Met(pub Trouble, pub String);

/// The episodes under way, one slot per kind.
#[derive(Debug, Default)]
pub struct Outages {
    open: Mutex<[Option<Episode>; 3]>,
}

#[derive(Debug, Clone, Copy)]
struct Episode {
    since: Instant,
    last_met: Instant,
    answered_503: u64,
}

impl Outages {
    /// A request met `trouble`.
    pub fn met(&self, Met(trouble, message): &Met) {
        let mut open = self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = Instant::now();
        let slot = &mut open[*trouble as usize];
        match slot {
            Some(episode) => {
                episode.last_met = now;
                episode.answered_503 += 1;
            }
            None => {
                *slot = Some(Episode { since: now, last_met: now, answered_503: 1 });
                let what = match trouble {
                    Trouble::Stalled => "requests get 503 redis_timeout until it does",
                    Trouble::OutOfMemory => "writes get 503 redis_out_of_memory until memory frees",
                    Trouble::Unavailable => "requests get 503 redis_unavailable until it answers",
                };
                log::warn!("http: {message}; {what}");
            }
        }
    }

    /// A request that used Redis got an answer; `wrote`: it was a write.
    pub fn answered(&self, wrote: bool) {
        let mut open = self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = Instant::now();
        for trouble in Trouble::ALL {
            let slot = &mut open[trouble as usize];
            let ends = slot.is_some_and(|e| now.saturating_duration_since(e.last_met) >= QUIET)
                && (wrote || trouble != Trouble::OutOfMemory);
            if let Some(episode) = slot.take_if(|_| ends) {
                log::warn!(
                    "http: {} is over after {:.1} s; {} request(s) got 503 meanwhile",
                    trouble.describe(),
                    now.saturating_duration_since(episode.since).as_secs_f64(),
                    episode.answered_503
                );
            }
        }
    }
}

/// `call`'s result within `limit`, else a 503 `redis_timeout`. A call cut
/// short may still run in Redis once it answers (as when a client gives up):
/// a pop may then have taken its job, a reserve's job comes back after ttr.
pub async fn bounded<T>(limit: Duration, call: impl Future<Output = delayer::Result<T>>) -> ApiResult<T> {
    match tokio::time::timeout(limit, call).await {
        Ok(result) => Ok(result?),
        Err(_) => Err(stalled(limit)),
    }
}

fn stalled(limit: Duration) -> ApiError {
    let mut error = ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "redis_timeout",
        format!("Redis did not answer within {} ms", limit.as_millis()),
    );
    error.trouble = Some(Trouble::Stalled);
    error.retry_after = Some(1);
    error
}

/// The routes that use Redis: every API route but these (`/v1/ready` bounds
/// its own calls and reports Redis trouble as its answer).
fn uses_redis(route: &str) -> bool {
    route.starts_with("/v1/") && !matches!(route, "/v1/health" | "/v1/ready" | "/v1/openapi.json" | "/v1/history")
}

/// The routes that may block on Redis for their `wait`; they bound each call
/// themselves ([`bounded`] with the wait plus `http_redis_timeout`).
fn blocking(route: &str) -> bool {
    matches!(route, "/v1/topics/{topic}/pop" | "/v1/topics/{topic}/reserve")
}

/// The middleware around every matched route: bounds the handler's time
/// (its Redis calls: the body was read before) and keeps the episodes.
pub async fn watch(State(api): State<Arc<Api>>, req: Request, next: Next) -> Response {
    let route = req.extensions().get::<MatchedPath>().map(|m| m.as_str().to_string()).unwrap_or_default();
    if !uses_redis(&route) {
        return next.run(req).await;
    }
    let wrote = req.method() != Method::GET && req.method() != Method::HEAD;
    let limit = if blocking(&route) {
        // A backstop only: the handler's own bound comes first.
        Duration::from_secs(crate::http::jobs::MAX_WAIT_SECS as u64) + api.redis_timeout * 2
    } else {
        api.redis_timeout
    };
    let response = match tokio::time::timeout(limit, next.run(req)).await {
        Ok(response) => response,
        Err(_) => stalled(limit).into_response(),
    };
    match response.extensions().get::<Met>() {
        Some(met) => api.outages.met(met),
        None if response.status().is_success() => api.outages.answered(wrote),
        None => {}
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_episode_ends_with_an_answer_after_a_quiet_moment() {
        let outages = Outages::default();
        let met = Met(Trouble::OutOfMemory, "OOM".into());
        outages.met(&met);
        outages.met(&met);
        // A read gets through: out of memory is about writes.
        {
            let mut open = outages.open.lock().expect("lock");
            if let Some(e) = open[Trouble::OutOfMemory as usize].as_mut() {
                e.last_met = e.last_met.checked_sub(QUIET).expect("an instant 2 s ago");
            }
        }
        outages.answered(false);
        assert!(outages.open.lock().expect("lock")[Trouble::OutOfMemory as usize].is_some());
        outages.answered(true);
        assert!(outages.open.lock().expect("lock")[Trouble::OutOfMemory as usize].is_none());
        // A stall is over with any answer, but not one right after it was met.
        outages.met(&Met(Trouble::Stalled, "slow".into()));
        outages.answered(false);
        assert_eq!(outages.open.lock().expect("lock")[Trouble::Stalled as usize].map(|e| e.answered_503), Some(1));
    }
}
