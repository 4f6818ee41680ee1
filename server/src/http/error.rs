//! Errors as JSON, one shape for every failure of the API:
//! `{"error": {"code": "...", "message": "..."}}`, with the HTTP status that
//! says who must act (400 the caller's input, 401/403 its credentials, 409 a
//! taken id, 429 too many wrong tokens, 503 Redis or too many waiting pops,
//! with `Retry-After`). axum's own rejections (bad JSON, a wrong content
//! type, a body over the limit) are turned into the same shape by the
//! extractors here, so a client never has to parse plain text.

use crate::http::outage::{Met, Trouble};
use crate::http::tally::Tally;
use axum::body::Bytes;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A failed request: its status, a stable code and a message for people.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// More fields for the error object (the taken ids of a push).
    pub extra: Option<Value>,
    /// Seconds for the `Retry-After` header (429, 503).
    pub retry_after: Option<u64>,
    /// The Redis trouble behind a 503, for the episode's log lines.
    pub trouble: Option<Trouble>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, code, message: message.into(), extra: None, retry_after: None, trouble: None }
    }

    /// The caller's input broke a rule.
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_argument", message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let met = self.trouble.map(|trouble| Met(trouble, self.message.clone()));
        let mut error = json!({"code": self.code, "message": self.message});
        if let (Some(Value::Object(extra)), Some(obj)) = (self.extra, error.as_object_mut()) {
            obj.extend(extra);
        }
        let mut response = (self.status, Json(json!({ "error": error }))).into_response();
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if let Some(met) = met {
            response.extensions_mut().insert(met);
        }
        response
    }
}

/// Redis errors other than the 503s, at most one line per this long.
const ERRORS_EVERY: Duration = Duration::from_secs(10);
static ERRORS: Mutex<Tally> = Mutex::new(Tally::new());

/// Whether Redis refused a command for memory (`OOM command not allowed
/// when used memory > 'maxmemory'`), in a script or a pipeline too.
fn out_of_memory(e: &redis::RedisError) -> bool {
    e.code() == Some("OOM") || e.to_string().contains("command not allowed when used memory")
}

fn unavailable(code: &'static str, message: String, trouble: Trouble) -> ApiError {
    let mut error = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, code, message);
    error.trouble = Some(trouble);
    error.retry_after = Some(1);
    error
}

/// The SDK's errors: its validation is the API's (one rule for every way in).
impl From<delayer_protocol::validate::Invalid> for ApiError {
    fn from(e: delayer_protocol::validate::Invalid) -> Self {
        ApiError::invalid(e.0)
    }
}

impl From<delayer::Error> for ApiError {
    fn from(e: delayer::Error) -> ApiError {
        use delayer::Error as E;
        match e {
            E::InvalidArgument(m) => ApiError::invalid(m),
            E::IdTaken(taken) => {
                let mut err = ApiError::new(StatusCode::CONFLICT, "id_taken", taken.to_string());
                let ids: Vec<Value> = taken
                    .taken
                    .iter()
                    .map(|t| json!({"id": t.id, "topic": t.topic, "due": t.due.map(crate::http::wire::secs)}))
                    .collect();
                let due: Vec<Value> = taken.due.iter().map(|d| json!(d.map(crate::http::wire::secs))).collect();
                err.extra = Some(json!({"taken": ids, "due": due}));
                err
            }
            // Said once per outage (outage.rs), not once per request. A
            // timeout of the SDK's own (a new connection's handshake) is a
            // stall like ours.
            E::Connection(m) if m.contains("timed out") => {
                unavailable("redis_timeout", format!("Redis did not answer in time: {m}"), Trouble::Stalled)
            }
            E::Connection(m) => {
                unavailable("redis_unavailable", format!("cannot use Redis: {m}"), Trouble::Unavailable)
            }
            E::Redis(e) if out_of_memory(&e) => unavailable(
                "redis_out_of_memory",
                format!("Redis is out of memory and refuses writes (maxmemory; reads and pops still work): {e}"),
                Trouble::OutOfMemory,
            ),
            other => {
                let mut errors = ERRORS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                if let Some(n) = errors.add(Instant::now(), ERRORS_EVERY) {
                    log::error!("http: {other} ({n} Redis error(s) answered 500 since the last report)");
                }
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "redis_error", other.to_string())
            }
        }
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

/// A JSON request body; an empty body reads as `T::default()` (every field
/// optional), so `POST .../pop` needs no body at all (its Content-Type is
/// still JSON: `guard::writes`).
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Default> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let json = is_json(req.headers());
        // Read already (guard::buffer): this takes the bytes in memory.
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::new(e.status(), "invalid_body", e.body_text()))?;
        if bytes.is_empty() {
            return Ok(Body(T::default()));
        }
        if !json {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send the body as JSON (Content-Type: application/json)",
            ));
        }
        Json::<T>::from_bytes(&bytes).map(|Json(value)| Body(value)).map_err(json_rejection)
    }
}

/// Whether the request says its body is JSON (`application/json`, with
/// parameters or not).
pub fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else { return false };
    let media = value.split(';').next().unwrap_or("").trim();
    media.eq_ignore_ascii_case("application/json")
}

fn json_rejection(rejection: JsonRejection) -> ApiError {
    // Bad syntax and a wrong shape alike are the caller's input: 400.
    let status = match rejection.status() {
        s @ (StatusCode::PAYLOAD_TOO_LARGE | StatusCode::UNSUPPORTED_MEDIA_TYPE) => s,
        _ => StatusCode::BAD_REQUEST,
    };
    let code = match status {
        StatusCode::PAYLOAD_TOO_LARGE => "too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        _ => "invalid_json",
    };
    let message = match status {
        StatusCode::PAYLOAD_TOO_LARGE => {
            format!("the request body is over the limit of {} bytes", crate::http::MAX_REQUEST_BYTES)
        }
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "send the body as JSON (Content-Type: application/json)".to_string(),
        _ => rejection.body_text(),
    };
    ApiError::new(status, code, message)
}

/// Query parameters, rejected as JSON errors.
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Query(q.0))
            .map_err(|e: QueryRejection| ApiError::invalid(e.body_text()))
    }
}

/// Unknown paths.
pub async fn not_found() -> ApiError {
    ApiError::not_found("no such route; the API is described at /v1/openapi.json")
}

/// Known paths, other methods.
pub async fn method_not_allowed() -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "this route does not take that method")
}
