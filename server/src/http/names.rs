//! The names in a route's path: `{topic}` and `{id}`, percent-decoded to
//! bytes. An id is any bytes (a job handed out with `id_base64` is named by
//! its percent-encoded bytes: `%FF` is the byte 0xFF), which axum's own
//! `Path<String>` refuses; a topic must be UTF-8, as every SDK names topics,
//! and one that is not is a 400 saying so.

use crate::http::error::{ApiError, ApiResult};
use axum::extract::{FromRequestParts, MatchedPath};
use axum::http::request::Parts;
use axum::http::StatusCode;
use percent_encoding::percent_decode_str;

/// `{topic}` of the route's path.
pub struct TopicPath(pub String);

/// `{topic}` and `{id}` of the route's path, the id as its bytes.
pub struct JobPath {
    pub topic: String,
    pub id: Vec<u8>,
}

impl<S: Send + Sync> FromRequestParts<S> for TopicPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        Ok(TopicPath(topic(param(parts, "topic")?)?))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for JobPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        Ok(JobPath { topic: topic(param(parts, "topic")?)?, id: param(parts, "id")? })
    }
}

/// The path's topic as text: the SDK (and so every Redis key the API
/// writes) names topics that are UTF-8.
fn topic(bytes: Vec<u8>) -> ApiResult<String> {
    String::from_utf8(bytes).map_err(|_| {
        ApiError::invalid("the topic in the path is not UTF-8: the HTTP API names topics that are UTF-8 text only")
    })
}

/// The bytes of parameter `{name}`: the request path's segment where the
/// matched route has `{name}` (parameters never span a `/`), percent-decoded.
fn param(parts: &Parts, name: &str) -> ApiResult<Vec<u8>> {
    let wanted = format!("{{{name}}}");
    let route = parts.extensions.get::<MatchedPath>().map(MatchedPath::as_str).unwrap_or("");
    route
        .split('/')
        .zip(parts.uri.path().split('/'))
        .find(|(pattern, _)| *pattern == wanted)
        .map(|(_, segment)| percent_decode_str(segment).collect())
        // Only a route without the parameter gets here: the code's bug.
        .ok_or_else(|| {
            let message = format!("the route {route:?} has no {wanted} in its path");
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;
    use axum::Router;
    use tower::ServiceExt;

    async fn names(uri: &str) -> String {
        let app = Router::new().route(
            "/v1/topics/{topic}/jobs/{id}/ack",
            get(|job: Result<JobPath, ApiError>| async move {
                match job {
                    Ok(job) => format!("{}|{:?}", job.topic, job.id),
                    Err(e) => e.message,
                }
            }),
        );
        let request = axum::http::Request::builder().uri(uri).body(axum::body::Body::empty()).expect("request");
        let response = app.oneshot(request).await.expect("response");
        let body = axum::body::to_bytes(response.into_body(), 1 << 16).await.expect("body");
        String::from_utf8(body.to_vec()).expect("text")
    }

    #[tokio::test]
    async fn ids_are_any_bytes_and_topics_utf8() {
        assert_eq!(names("/v1/topics/t/jobs/%FFa%2Fb/ack").await, "t|[255, 97, 47, 98]");
        assert_eq!(names("/v1/topics/caf%C3%A9/jobs/42/ack").await, "café|[52, 50]");
        assert!(names("/v1/topics/%FE/jobs/42/ack").await.contains("not UTF-8"));
    }
}
