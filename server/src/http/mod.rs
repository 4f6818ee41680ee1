//! The HTTP API (JSON under `/v1`) and the web dashboard (at `/`), served on
//! the server's own tokio runtime when `[delayer] http_addr` is set.
//!
//! It exists for languages without an SDK and for people answering "when
//! does job 42 fire?" without redis-cli. Every Redis operation is the Rust
//! SDK's async client's, so the API's rules and replies are the SDKs'.
//! One concern per module: settings (`settings`), the socket and its limits
//! (`listen`), the checks before credentials (`guard`: Host, a JSON
//! Content-Type on writes, the body's deadline), tokens (`auth`), sessions
//! (`session`), wrong credentials per address (`limiter`), what a request may do (`access`), Redis trouble and
//! deadlines (`outage`), counted log lines (`tally`), JSON errors and
//! extractors (`error`), the names in paths (`names`), JSON shapes (`wire`), the job routes (`jobs`), the
//! read-only views (`views`), dead letters (`dead`), pausing topics (`flow`), the moving history for
//! the chart (`history`; the long one shared through Redis: `shared`), the dashboard's pages (`dashboard`) and the API's
//! description (`openapi.json`); and the other listener, of the metrics and
//! probes (`metrics`).

mod access;
mod auth;
mod dashboard;
mod dead;
mod error;
mod flow;
mod guard;
pub mod history;
mod jobs;
mod limiter;
pub mod listen;
pub mod metrics;
mod names;
mod outage;
mod session;
pub mod settings;
pub mod shared;
mod tally;
mod views;
mod wire;

use crate::http::error::{ApiError, ApiResult};
use axum::extract::DefaultBodyLimit;
use axum::http::{header, StatusCode};
use axum::middleware::{from_fn, from_fn_with_state};
use axum::response::IntoResponse;
use axum::routing::{get, post, put};
use axum::{Json, Router};
use delayer_protocol::target::Target;
use serde_json::json;
use settings::HttpSettings;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Largest request body taken (a push_many of many jobs included).
pub const MAX_REQUEST_BYTES: usize = 16 * 1024 * 1024;

/// The API's description, checked against `router` by the tests.
pub const OPENAPI: &str = include_str!("openapi.json");

/// What the handlers share.
pub struct Api {
    delayer: delayer::aio::Delayer,
    tokens: auth::Tokens,
    sessions: session::Sessions,
    limiter: limiter::Limiter,
    allowed_hosts: Vec<String>,
    trusted_proxies: Vec<IpAddr>,
    body_timeout: Duration,
    redis_timeout: Duration,
    /// One permit per blocking pop or reserve (`http_max_waiting`).
    waiting: Arc<Semaphore>,
    max_waiting: usize,
    outages: outage::Outages,
}

impl Api {
    /// A permit to wait on Redis (a blocking pop or reserve holds a Redis
    /// connection of its own), or 503 `too_many_waiting` at the bound,
    /// before any connection is opened.
    fn waiting(&self) -> ApiResult<OwnedSemaphorePermit> {
        self.waiting.clone().try_acquire_owned().map_err(|_| {
            let mut error = ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "too_many_waiting",
                format!(
                    "{} requests are waiting for jobs already (http_max_waiting); try again, or ask without wait",
                    self.max_waiting
                ),
            );
            error.retry_after = Some(1);
            error
        })
    }

    /// Whether job `id` is one of `topic`'s. Ids are global in the classic
    /// layout: a remove or reschedule addressed to one topic must not reach
    /// another topic's job of the same id.
    async fn of_topic(&self, topic: &str, id: &[u8]) -> ApiResult<bool> {
        views::of_topic(&self.delayer, topic, id).await
    }
}

/// Binds `settings.addr` and serves the API on the current tokio runtime
/// until the runtime stops. Returns the address bound (port 0 picks one).
pub async fn serve(
    settings: &HttpSettings,
    target: Target,
    names: &delayer_protocol::keys::Names,
) -> Result<SocketAddr, String> {
    let delayer = delayer::aio::Delayer::with_target(target, names.prefix())
        .and_then(|d| d.with_layout(names.layout()))
        .map_err(|e| format!("http: {e}"))?;
    let listener = tokio::net::TcpListener::bind(settings.addr)
        .await
        .map_err(|e| format!("cannot serve the HTTP API on {}: {e}", settings.addr))?;
    let bound = listener.local_addr().map_err(|e| format!("http: {e}"))?;
    let api = Arc::new(Api {
        delayer,
        tokens: auth::Tokens::new(settings),
        sessions: session::Sessions::new(settings)?,
        limiter: limiter::Limiter::default(),
        allowed_hosts: settings.allowed_hosts.clone(),
        trusted_proxies: settings.trusted_proxies.clone(),
        body_timeout: settings.limits.body_timeout,
        redis_timeout: settings.redis_timeout,
        waiting: Arc::new(Semaphore::new(settings.max_waiting)),
        max_waiting: settings.max_waiting,
        outages: outage::Outages::default(),
    });
    warn_about(settings, bound);
    history::enable();
    let sweeping = api.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(limiter::REPORT_EVERY).await;
            sweeping.limiter.sweep();
        }
    });
    tokio::spawn(listen::serve(listener, router(api), settings.limits, "http"));
    Ok(bound)
}

/// What the operator should know about these settings, said at start.
fn warn_about(settings: &HttpSettings, bound: SocketAddr) {
    if settings.token.is_none() {
        log::warn!(
            "http: the API on {bound} takes no token: any program on this machine can push, take and delete jobs \
             through it; set http_token (web pages are kept out by the Host and Content-Type checks)"
        );
    }
    if !bound.ip().is_loopback() && settings.allowed_hosts.is_empty() {
        log::info!(
            "http: requests must name this server by IP address or localhost; list the DNS names clients use in \
             http_allowed_hosts"
        );
    }
}

/// Every route, one literal path per line: the OpenAPI document lists the
/// same ones, which server/tests/http/test_openapi.py checks against this list
/// and against the running server.
fn router(api: Arc<Api>) -> Router {
    Router::new()
        .route("/v1/health", get(health))
        .route("/v1/ready", get(metrics::ready))
        .route("/v1/openapi.json", get(openapi))
        .route("/v1/stats", get(views::stats))
        .route("/v1/history", get(history_route))
        .route("/v1/jobs", post(jobs::push_many))
        .route("/v1/topics/{topic}/jobs", post(jobs::push).get(views::list))
        .route("/v1/topics/{topic}/jobs/{id}", get(views::lookup).delete(jobs::remove))
        .route("/v1/topics/{topic}/jobs/{id}/ack", post(jobs::ack))
        .route("/v1/topics/{topic}/jobs/{id}/release", post(jobs::release))
        .route("/v1/topics/{topic}/jobs/{id}/bury", post(jobs::bury))
        .route("/v1/topics/{topic}/jobs/{id}/touch", post(jobs::touch))
        .route("/v1/topics/{topic}/jobs/{id}/reschedule", post(jobs::reschedule))
        .route("/v1/topics/{topic}/pop", post(jobs::pop))
        .route("/v1/topics/{topic}/reserve", post(jobs::reserve))
        .route("/v1/topics/{topic}/pause", post(flow::pause))
        .route("/v1/topics/{topic}/resume", post(flow::resume))
        .route("/v1/topics/{topic}/limit", put(flow::limit).delete(flow::unlimit))
        .route("/v1/topics/{topic}/dead", get(dead::list))
        .route("/v1/topics/{topic}/dead/requeue", post(dead::requeue))
        .route("/v1/topics/{topic}/dead/purge", post(dead::purge))
        .route("/", get(dashboard::index))
        .route("/signin", post(dashboard::signin))
        .route("/signout", post(dashboard::signout))
        .route("/assets/{name}", get(dashboard::asset))
        .route_layer(from_fn_with_state(api.clone(), outage::watch))
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed)
        // The last layer added runs first: Host, then the write checks, the
        // credentials, and only then the body is read.
        .layer(from_fn_with_state(api.clone(), guard::buffer))
        .layer(from_fn_with_state(api.clone(), auth::check))
        .layer(from_fn(guard::writes))
        .layer(from_fn_with_state(api.clone(), guard::host))
        .layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES))
        .with_state(api)
}

/// `GET /v1/health`: liveness, the API answers (no token needed, nothing
/// about Redis or the jobs is told: 200 while the process serves, Redis
/// down or not). Readiness is `GET /v1/ready` (src/readiness.rs).
async fn health() -> Json<serde_json::Value> {
    Json(json!({"status": "ok", "version": env!("CARGO_PKG_VERSION")}))
}

async fn openapi() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI)
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct HistoryQuery {
    seconds: Option<u64>,
    /// Seconds per sample: 1 (this server's moves, the last
    /// `history::SECONDS`) or `shared::STEP` (every server's, from Redis,
    /// up to a day). Absent: 1 up to `history::SECONDS`, else the shared.
    step: Option<u64>,
}

/// `GET /v1/history?seconds=300[&step=1|10]`: moved and lateness per second
/// (this server), or per 10 seconds for up to a day (every server's, kept
/// in Redis).
async fn history_route(error::Query(q): error::Query<HistoryQuery>) -> ApiResult<Json<serde_json::Value>> {
    let seconds = q.seconds.unwrap_or(300);
    match q.step {
        None if seconds <= history::SECONDS => Ok(Json(history::snapshot(seconds))),
        Some(1) => Ok(Json(history::snapshot(seconds))),
        None => Ok(Json(shared::snapshot(seconds))),
        Some(shared::STEP) => Ok(Json(shared::snapshot(seconds))),
        Some(other) => Err(ApiError::invalid(format!("step is 1 or {} (seconds), not {other}", shared::STEP))),
    }
}
