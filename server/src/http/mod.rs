//! The HTTP API (JSON under `/v1`) and the web dashboard (at `/`), served on
//! the server's own tokio runtime when `[delayer] http_addr` is set.
//!
//! It exists for languages without an SDK and for people answering "when
//! does job 42 fire?" without redis-cli. Every Redis operation is the Rust
//! SDK's async client's, so the API's rules and replies are the SDKs'.
//! One concern per module: settings (`settings`), tokens and cookies
//! (`auth`), JSON errors and extractors (`error`), JSON shapes (`wire`),
//! the job routes (`jobs`), the read-only views (`views`), dead letters
//! (`dead`), the moving history for the chart (`history`), the dashboard's
//! pages (`dashboard`) and the API's description (`openapi.json`).

mod auth;
mod dashboard;
mod dead;
mod error;
pub mod history;
mod jobs;
pub mod settings;
mod views;
mod wire;

use crate::http::error::ApiResult;
use axum::extract::DefaultBodyLimit;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use delayer::target::Target;
use serde_json::json;
use settings::HttpSettings;
use std::net::SocketAddr;
use std::sync::Arc;

/// Largest request body taken (a push_many of many jobs included).
pub const MAX_REQUEST_BYTES: usize = 16 * 1024 * 1024;

/// The API's description, checked against [`router`] by the tests.
pub const OPENAPI: &str = include_str!("openapi.json");

/// What the handlers share.
pub struct Api {
    delayer: delayer::aio::Delayer,
    tokens: Arc<auth::Tokens>,
}

impl Api {
    /// Whether job `id` is one of `topic`'s. Ids are global in the classic
    /// layout: a remove or reschedule addressed to one topic must not reach
    /// another topic's job of the same id.
    async fn of_topic(&self, topic: &str, id: &str) -> ApiResult<bool> {
        views::of_topic(&self.delayer, topic, id).await
    }
}

/// Binds `settings.addr` and serves the API on the current tokio runtime
/// until the runtime stops. Returns the address bound (port 0 picks one).
pub async fn serve(settings: &HttpSettings, target: Target, names: &delayer::Names) -> Result<SocketAddr, String> {
    let delayer = delayer::aio::Delayer::with_target(target, names.prefix())
        .and_then(|d| d.with_layout(names.layout()))
        .map_err(|e| format!("http: {e}"))?;
    let listener = tokio::net::TcpListener::bind(settings.addr)
        .await
        .map_err(|e| format!("cannot serve the HTTP API on {}: {e}", settings.addr))?;
    let bound = listener.local_addr().map_err(|e| format!("http: {e}"))?;
    let api = Arc::new(Api { delayer, tokens: Arc::new(auth::Tokens::new(settings)) });
    history::enable();
    let app = router(api);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            log::error!("http: the API stopped: {e}");
        }
    });
    Ok(bound)
}

/// Every route, one literal path per line: the OpenAPI document lists the
/// same ones, which server/tests/http/test_openapi.py checks against this list
/// and against the running server.
fn router(api: Arc<Api>) -> Router {
    Router::new()
        .route("/v1/health", get(health))
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
        .route("/v1/topics/{topic}/dead", get(dead::list))
        .route("/v1/topics/{topic}/dead/requeue", post(dead::requeue))
        .route("/v1/topics/{topic}/dead/purge", post(dead::purge))
        .route("/", get(dashboard::index))
        .route("/signin", post(dashboard::signin))
        .route("/signout", post(dashboard::signout))
        .route("/assets/{name}", get(dashboard::asset))
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(api.tokens.clone(), auth::check))
        .layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES))
        .with_state(api)
}

/// `GET /v1/health`: the API answers (no token needed, nothing about Redis
/// or the jobs is told).
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
}

/// `GET /v1/history?seconds=300`: moved and lateness per second.
async fn history_route(error::Query(q): error::Query<HistoryQuery>) -> Json<serde_json::Value> {
    Json(history::snapshot(q.seconds.unwrap_or(300)))
}
