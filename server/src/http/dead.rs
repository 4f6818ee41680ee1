//! Dead letters over HTTP: list a topic's, requeue or purge some or all.
//! Acting on all of them must be said (`{"all": true}`): an empty or
//! forgotten id list never purges a whole topic.

use crate::http::error::{ApiError, ApiResult, Body, Query};
use crate::http::names::TopicPath;
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

/// `GET /v1/topics/{topic}/dead?start=0&count=100`: newest first;
/// `next` is the start of the next page, `null` at the end; `total` the
/// list's length. Positions count the list's entries: a page may be short
/// (an entry whose job was removed or pushed again since is not listed)
/// while `next` is not null.
pub async fn list(
    State(api): State<Arc<Api>>,
    TopicPath(topic): TopicPath,
    Query(page): Query<Page>,
) -> ApiResult<Json<Value>> {
    let start = wire::position("start", page.start)? as usize;
    let letters = api.delayer.dead_letters(&topic, start, page.count).await?;
    // Read after the page: a list that grew meanwhile shows a next page
    // rather than ending early.
    let total = api.delayer.dead_len(&topic).await?;
    let end = start.saturating_add(page.count);
    let next = (end as u64) < total;
    Ok(Json(json!({
        "dead": letters.iter().map(wire::dead_letter).collect::<Vec<_>>(),
        "next": next.then_some(end),
        "total": total,
    })))
}

/// Which dead letters a requeue or purge acts on: `ids` (text) and
/// `ids_base64` (any bytes: the ids a listing shows as `id_base64`), either
/// or both, or `all`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Which {
    ids: Option<Vec<String>>,
    ids_base64: Option<Vec<String>>,
    #[serde(default)]
    all: bool,
}

impl Which {
    /// The ids' bytes, `None` for all.
    fn ids(self) -> ApiResult<Option<Vec<Vec<u8>>>> {
        if self.ids.is_none() && self.ids_base64.is_none() {
            return match self.all {
                true => Ok(None),
                false => {
                    Err(ApiError::invalid("say which: {\"ids\": [...]}, {\"ids_base64\": [...]} or {\"all\": true}"))
                }
            };
        }
        if self.all {
            return Err(ApiError::invalid("give ids (or ids_base64) or all, not both"));
        }
        let mut ids: Vec<Vec<u8>> = self.ids.unwrap_or_default().into_iter().map(String::into_bytes).collect();
        for (i, encoded) in self.ids_base64.unwrap_or_default().iter().enumerate() {
            ids.push(wire::base64("ids_base64", i, encoded)?);
        }
        Ok(Some(ids))
    }

    /// Requeues (`requeue`) or purges the dead letters meant.
    async fn act(self, api: &Api, topic: &str, requeue: bool) -> ApiResult<u64> {
        let d = &api.delayer;
        Ok(match (self.ids()?, requeue) {
            (None, true) => d.requeue_dead(topic, None).await?,
            (None, false) => d.purge_dead(topic, None).await?,
            (Some(ids), requeue) => {
                let ids: Vec<&[u8]> = ids.iter().map(Vec::as_slice).collect();
                match requeue {
                    true => d.requeue_dead_raw(topic, &ids).await?,
                    false => d.purge_dead_raw(topic, &ids).await?,
                }
            }
        })
    }
}

/// `POST /v1/topics/{topic}/dead/requeue`: `{"requeued": n}`.
pub async fn requeue(
    State(api): State<Arc<Api>>,
    TopicPath(topic): TopicPath,
    Body(which): Body<Which>,
) -> ApiResult<Json<Value>> {
    let n = which.act(&api, &topic, true).await?;
    log::info!("http: requeued {n} dead letters of topic {topic:?}");
    Ok(Json(json!({"requeued": n})))
}

/// `POST /v1/topics/{topic}/dead/purge`: `{"purged": n}`.
pub async fn purge(
    State(api): State<Arc<Api>>,
    TopicPath(topic): TopicPath,
    Body(which): Body<Which>,
) -> ApiResult<Json<Value>> {
    let n = which.act(&api, &topic, false).await?;
    log::info!("http: purged {n} dead letters of topic {topic:?}");
    Ok(Json(json!({"purged": n})))
}
