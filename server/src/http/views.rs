//! The read-only views: a job by id (with its body when asked), a topic's jobs by state, and the
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
use delayer::inspect::{Body, JobState};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// Whether job `id` is one of `topic`'s (see [`Api::of_topic`]).
pub async fn of_topic(delayer: &delayer::aio::Delayer, topic: &str, id: &[u8]) -> ApiResult<bool> {
    Ok(delayer.job_raw(topic, id).await?.state != JobState::Unknown)
}

/// Largest body read for `?body=true` (a larger one is told by its size).
pub const MAX_BODY_READ: usize = 1024 * 1024;
/// Most bytes of a body shown (`body_truncated` when there were more).
pub const MAX_BODY_SHOWN: usize = 64 * 1024;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct LookupQuery {
    /// Add the body (`body` or `body_base64`, its first
    /// [`MAX_BODY_SHOWN`] bytes; `body_truncated`).
    #[serde(default)]
    body: bool,
}

/// `GET /v1/topics/{topic}/jobs/{id}[?body=true]`: the job's state and what
/// is known of it; a job unknown to this topic is `{"state": "unknown",
/// ...}` (200: the question had an answer).
pub async fn lookup(
    State(api): State<Arc<Api>>,
    JobPath { topic, id }: JobPath,
    Query(q): Query<LookupQuery>,
) -> ApiResult<Json<Value>> {
    let info = api.delayer.job_raw(&topic, &id).await?;
    // The CLI's `job --json` shape: one definition, so the two cannot drift.
    let mut job = crate::jobview::job_json(&info);
    if q.body && !matches!(info.state, JobState::Unknown | JobState::Malformed) {
        if let Value::Object(obj) = &mut job {
            put_shown_body(obj, api.delayer.job_body(&topic, &id, MAX_BODY_READ).await?);
        }
    }
    Ok(Json(job))
}

/// The body as the dashboard shows it: at most [`MAX_BODY_SHOWN`] bytes
/// (cut at a character's start when it is text), `body_truncated` when cut,
/// and nothing but `body_truncated` when it was too large to read.
fn put_shown_body(obj: &mut serde_json::Map<String, Value>, body: Body) {
    let (bytes, truncated) = match body {
        Body::Absent => return,
        Body::TooLarge(_) => (Vec::new(), true),
        Body::Bytes(mut bytes) => {
            let cut = bytes.len() > MAX_BODY_SHOWN;
            if cut {
                let mut end = MAX_BODY_SHOWN;
                // A UTF-8 continuation byte is 10xxxxxx: back up to a start.
                while end > MAX_BODY_SHOWN - 4 && bytes.get(end).is_some_and(|b| b & 0xC0 == 0x80) {
                    end -= 1;
                }
                bytes.truncate(end);
            }
            (bytes, cut)
        }
    };
    crate::http::wire::put_body(obj, &bytes);
    obj.insert("body_truncated".into(), json!(truncated));
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
