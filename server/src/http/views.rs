//! The read-only views: a job by id, a topic's jobs by state, and the
//! per-topic numbers. They are the Rust SDK's inspect functions, in the JSON
//! shapes `delayer job --json` and `delayer list --json` print, made by the
//! same functions (`jobview`; the conformance suite checks that every
//! viewpoint agrees), ids and topics that are not UTF-8 as `id_base64` /
//! `topic_base64`.

use crate::http::error::{ApiError, ApiResult, Query};
use crate::http::names::{JobPath, TopicPath};
use crate::http::Api;
use crate::jobview::{ids_json, timed_json, topics_json};
use axum::extract::State;
use axum::Json;
use delayer::inspect::JobState;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// Whether job `id` is one of `topic`'s (see [`Api::of_topic`]).
pub async fn of_topic(delayer: &delayer::aio::Delayer, topic: &str, id: &[u8]) -> ApiResult<bool> {
    Ok(delayer.job_raw(topic, id).await?.state != JobState::Unknown)
}

/// `GET /v1/topics/{topic}/jobs/{id}`: the job's state and what is known of
/// it; a job unknown to this topic is `{"state": "unknown", ...}` (200: the
/// question had an answer).
pub async fn lookup(State(api): State<Arc<Api>>, JobPath { topic, id }: JobPath) -> ApiResult<Json<Value>> {
    // The CLI's `job --json` shape: one definition, so the two cannot drift.
    Ok(Json(crate::jobview::job_json(&api.delayer.job_raw(&topic, &id).await?)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    state: Option<String>,
    #[serde(default)]
    cursor: u64,
    #[serde(default = "default_count")]
    count: usize,
}

fn default_count() -> usize {
    100
}

/// `GET /v1/topics/{topic}/jobs?state=scheduled|ready|reserved&cursor=&count=`:
/// one page, `{"items": [...], "next": cursor | null}`. A page may be short,
/// even empty, while `next` is not null: keep going until it is.
pub async fn list(
    State(api): State<Arc<Api>>,
    TopicPath(topic): TopicPath,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Value>> {
    let d = &api.delayer;
    let cursor = crate::http::wire::position("cursor", q.cursor)?;
    let page = match q.state.as_deref() {
        Some("scheduled") => timed_json(&d.list_scheduled(&topic, cursor, q.count).await?, "due"),
        Some("reserved") => timed_json(&d.list_reserved_with_deadlines(&topic, cursor, q.count).await?, "deadline"),
        Some("ready") => ids_json(&d.list_ready_raw(&topic, cursor, q.count).await?),
        Some("dead") => {
            return Err(ApiError::invalid("dead letters are listed at /v1/topics/{topic}/dead"));
        }
        Some(other) => {
            return Err(ApiError::invalid(format!("state {other:?} is not one of scheduled, ready, reserved")))
        }
        None => return Err(ApiError::invalid("state is required: scheduled, ready or reserved")),
    };
    Ok(Json(page))
}

/// `GET /v1/stats`: totals and per-topic numbers (`reserved` null when too
/// many jobs are reserved to count per topic cheaply).
pub async fn stats(State(api): State<Arc<Api>>) -> ApiResult<Json<Value>> {
    let stats = api.delayer.stats().await?;
    Ok(Json(json!({
        "scheduled": stats.scheduled_total,
        "reserved": stats.reserved_total,
        "topics": topics_json(&stats),
        // As the server last read it (src/eviction.rs): the dashboard warns.
        "redis": crate::eviction::json(crate::eviction::policy().as_deref()),
    })))
}
