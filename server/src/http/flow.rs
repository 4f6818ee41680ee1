//! Pausing and resuming a topic over HTTP (`POST /v1/topics/{topic}/pause`
//! and `/resume`), and its rate limit (`PUT` and `DELETE
//! /v1/topics/{topic}/limit`), with a full-access token: the SDK's flow.lua
//! call, as `delayer pause` and `delayer limit` make it, answered in the
//! same shape. The limit's rules are the script's: its refusal is the SDK's
//! InvalidArgument, a 400 with its message.

use crate::admin::limit::{limit_json, ready_backlog};
use crate::admin::pause::state_json;
use crate::http::error::{ApiError, ApiResult, Body};
use crate::http::names::TopicPath;
use crate::http::Api;
use axum::extract::State;
use axum::Json;
use delayer::FlowState;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// `POST /v1/topics/{topic}/pause`: `{"topic", "paused": true, "paused_since", "held", "changed"}`.
pub async fn pause(State(api): State<Arc<Api>>, TopicPath(topic): TopicPath) -> ApiResult<Json<Value>> {
    let changed = api.delayer.pause(&topic).await?;
    if changed {
        log::info!("http: paused topic {topic:?}");
    }
    answer(&api, &topic, changed).await
}

/// `POST /v1/topics/{topic}/resume`: the same, `"paused": false`.
pub async fn resume(State(api): State<Arc<Api>>, TopicPath(topic): TopicPath) -> ApiResult<Json<Value>> {
    let changed = api.delayer.resume(&topic).await?;
    if changed {
        log::info!("http: resumed topic {topic:?}");
    }
    answer(&api, &topic, changed).await
}

async fn answer(api: &Api, topic: &str, changed: bool) -> ApiResult<Json<Value>> {
    let state = api.delayer.flow(topic).await?;
    Ok(Json(state_json(topic, &FlowState { changed, ..state })))
}

/// `PUT /v1/topics/{topic}/limit`'s body.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct LimitSpec {
    /// Jobs per second (a number: 0.5 is one every two seconds).
    per_second: Option<f64>,
    /// Jobs at once (absent: one second's worth).
    burst: Option<u64>,
}

/// `PUT /v1/topics/{topic}/limit` `{"per_second", "burst"}`: `{"topic",
/// "rate_limit": {"per_second", "burst"}, "changed", "ready_backlog"}`.
pub async fn limit(
    State(api): State<Arc<Api>>,
    TopicPath(topic): TopicPath,
    Body(spec): Body<LimitSpec>,
) -> ApiResult<Json<Value>> {
    let per_second = spec
        .per_second
        .ok_or_else(|| ApiError::invalid("per_second is required: jobs per second, a number (0.5, 50)"))?;
    let state = api.delayer.set_rate_limit(&topic, per_second, spec.burst).await?;
    if state.changed {
        let burst = state.rate_limit.map_or(0, |l| l.burst);
        log::info!("http: limited topic {topic:?} to {per_second} jobs/s, burst {burst}");
    }
    let backlog = ready_backlog(&api.delayer.stats().await?, &topic);
    Ok(Json(limit_json(&topic, &state, backlog)))
}

/// `DELETE /v1/topics/{topic}/limit`: `{"topic", "cleared"}` (`false`: it
/// had no limit).
pub async fn unlimit(State(api): State<Arc<Api>>, TopicPath(topic): TopicPath) -> ApiResult<Json<Value>> {
    let cleared = api.delayer.clear_rate_limit(&topic).await?;
    if cleared {
        log::info!("http: removed the rate limit of topic {topic:?}");
    }
    Ok(Json(json!({"topic": topic, "cleared": cleared})))
}
