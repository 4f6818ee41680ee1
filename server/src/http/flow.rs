//! Pausing and resuming a topic over HTTP (`POST /v1/topics/{topic}/pause`
//! and `/resume`, a full-access token): the SDK's flow.lua call, as
//! `delayer pause` makes it, answered in the same shape.

use crate::admin::pause::state_json;
use crate::http::error::ApiResult;
use crate::http::names::TopicPath;
use crate::http::Api;
use axum::extract::State;
use axum::Json;
use delayer::FlowState;
use serde_json::Value;
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
