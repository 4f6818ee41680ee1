//! Dead letters over HTTP: list a topic's, requeue or purge some or all.
//! Acting on all of them must be said (`{"all": true}`): an empty or
//! forgotten id list never purges a whole topic.

use crate::http::error::{ApiError, ApiResult, Body, Path, Query};
use crate::http::wire;
use crate::http::Api;
use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Page {
    #[serde(default)]
    start: u64,
    #[serde(default = "default_count")]
    count: usize,
}

fn default_count() -> usize {
    100
}

/// `GET /v1/topics/{topic}/dead?start=0&count=100`: oldest first;
/// `next` is the start of the next page, `null` at the end.
pub async fn list(
    State(api): State<Arc<Api>>,
    Path(topic): Path<String>,
    Query(page): Query<Page>,
) -> ApiResult<Json<Value>> {
    let start = wire::position("start", page.start)? as usize;
    let letters = api.delayer.dead_letters(&topic, start, page.count).await?;
    let next = (letters.len() == page.count).then(|| start + letters.len());
    Ok(Json(json!({"dead": letters.iter().map(wire::dead_letter).collect::<Vec<_>>(), "next": next})))
}

/// Which dead letters a requeue or purge acts on.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Which {
    ids: Option<Vec<String>>,
    #[serde(default)]
    all: bool,
}

impl Which {
    fn ids(&self) -> ApiResult<Option<Vec<&str>>> {
        match (&self.ids, self.all) {
            (Some(_), true) => Err(ApiError::invalid("give ids or all, not both")),
            (Some(ids), false) => Ok(Some(ids.iter().map(String::as_str).collect())),
            (None, true) => Ok(None),
            (None, false) => Err(ApiError::invalid("say which: {\"ids\": [...]} or {\"all\": true}")),
        }
    }
}

/// `POST /v1/topics/{topic}/dead/requeue`: `{"requeued": n}`.
pub async fn requeue(
    State(api): State<Arc<Api>>,
    Path(topic): Path<String>,
    Body(which): Body<Which>,
) -> ApiResult<Json<Value>> {
    let ids = which.ids()?;
    let n = api.delayer.requeue_dead(&topic, ids.as_deref()).await?;
    log::info!("http: requeued {n} dead letters of topic {topic:?}");
    Ok(Json(json!({"requeued": n})))
}

/// `POST /v1/topics/{topic}/dead/purge`: `{"purged": n}`.
pub async fn purge(
    State(api): State<Arc<Api>>,
    Path(topic): Path<String>,
    Body(which): Body<Which>,
) -> ApiResult<Json<Value>> {
    let ids = which.ids()?;
    let n = api.delayer.purge_dead(&topic, ids.as_deref()).await?;
    log::info!("http: purged {n} dead letters of topic {topic:?}");
    Ok(Json(json!({"purged": n})))
}
