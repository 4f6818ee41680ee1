//! The API's JSON shapes and their conversions to and from the SDK's types:
//! times as Unix seconds (to the millisecond), durations as seconds, bodies
//! as `body` (UTF-8 text) or `body_base64` (any bytes). Only shapes are
//! checked here; the protocol's rules (delay limits, max_attempts, backoff)
//! are the SDK's, applied when the job is sent.

use crate::http::error::{ApiError, ApiResult};
use crate::jobview::put_name;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use delayer::{Backoff, DeadLetter, Job, Message, Reserved};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A time as Unix seconds, rounded to the millisecond (as the CLI's JSON).
pub fn secs(t: SystemTime) -> f64 {
    let s = t.duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
    (s * 1000.0).round() / 1000.0
}

/// A listing's position given for `field`: at most the SDK's
/// [`delayer_protocol::validate::MAX_POSITION`], the CLI's bound too.
/// (Negative and non-numeric values are refused by the query's types.)
pub fn position(field: &str, value: u64) -> ApiResult<u64> {
    Ok(delayer_protocol::validate::position(field, value)?)
}

/// A number of seconds given for `field`: finite, not negative.
pub fn duration(field: &str, seconds: f64) -> ApiResult<Duration> {
    if !seconds.is_finite() || seconds < 0.0 {
        return Err(ApiError::invalid(format!("{field} must be a number of seconds, 0 or more, not {seconds}")));
    }
    Duration::try_from_secs_f64(seconds)
        .map_err(|_| ApiError::invalid(format!("{field} of {seconds} seconds is too large")))
}

/// `body` (text) or `body_base64` (bytes): one at most; none is empty.
pub fn body(text: Option<String>, base64: Option<String>) -> ApiResult<Vec<u8>> {
    match (text, base64) {
        (Some(_), Some(_)) => Err(ApiError::invalid("give body or body_base64, not both")),
        (Some(text), None) => Ok(text.into_bytes()),
        (None, Some(encoded)) => {
            BASE64.decode(encoded.as_bytes()).map_err(|e| ApiError::invalid(format!("body_base64 is not base64: {e}")))
        }
        (None, None) => Ok(Vec::new()),
    }
}

/// Item `i` of list `field`, base64 for any bytes.
pub fn base64(field: &str, i: usize, encoded: &str) -> ApiResult<Vec<u8>> {
    BASE64.decode(encoded.as_bytes()).map_err(|e| ApiError::invalid(format!("{field}[{i}] is not base64: {e}")))
}

/// Puts `bytes` in `obj` as `body` when they are UTF-8 text, else as
/// `body_base64`.
pub fn put_body(obj: &mut Map<String, Value>, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(text) => obj.insert("body".into(), Value::String(text.to_string())),
        Err(_) => obj.insert("body_base64".into(), Value::String(BASE64.encode(bytes))),
    };
}

/// A retry setting: `{"kind": "fixed", "delay": s}` or
/// `{"kind": "exponential", "base": s, "max": s}`.
#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum BackoffSpec {
    Fixed { delay: f64 },
    Exponential { base: f64, max: f64 },
}

/// One job to push. `topic` comes from the path for a single push and from
/// each job for a push of many.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    pub topic: Option<String>,
    pub id: Option<String>,
    pub delay: Option<f64>,
    pub body: Option<String>,
    pub body_base64: Option<String>,
    /// Seconds the job's data is kept once due (default 7 days).
    pub ready_max_lifetime: Option<f64>,
    pub max_attempts: Option<u32>,
    pub backoff: Option<BackoffSpec>,
    /// Refuse (409) instead of replacing a job that holds the id.
    #[serde(default)]
    pub if_absent: bool,
    /// The producer's W3C trace context, handed back with the job (a single
    /// push also takes it as its `traceparent` request header).
    pub traceparent: Option<String>,
}

impl JobSpec {
    /// The SDK job for this spec, on `topic`.
    pub fn into_job(self, topic: String) -> ApiResult<Job> {
        let id = self.id.ok_or_else(|| ApiError::invalid("id is required"))?;
        let delay = duration("delay", self.delay.ok_or_else(|| ApiError::invalid("delay (seconds) is required"))?)?;
        let mut job = Job::new(topic, id, delay).body(body(self.body, self.body_base64)?);
        if let Some(lifetime) = self.ready_max_lifetime {
            job = job.ready_max_lifetime(duration("ready_max_lifetime", lifetime)?);
        }
        if let Some(n) = self.max_attempts {
            job = job.max_attempts(n);
        }
        if let Some(spec) = self.backoff {
            job = job.backoff(match spec {
                BackoffSpec::Fixed { delay } => Backoff::fixed(duration("backoff delay", delay)?),
                BackoffSpec::Exponential { base, max } => {
                    Backoff::exponential(duration("backoff base", base)?, duration("backoff max", max)?)
                }
            });
        }
        if self.if_absent {
            job = job.if_absent();
        }
        if let Some(traceparent) = self.traceparent {
            delayer_protocol::validate::traceparent(&traceparent)?;
            job = job.traceparent(traceparent);
        }
        Ok(job)
    }
}

/// A request's `traceparent` header, if it has one (one at most).
pub fn traceparent_header(headers: &axum::http::HeaderMap) -> ApiResult<Option<String>> {
    let mut values = headers.get_all("traceparent").iter();
    let Some(value) = values.next() else { return Ok(None) };
    if values.next().is_some() {
        return Err(ApiError::invalid("more than one traceparent header"));
    }
    let text = value.to_str().map_err(|_| ApiError::invalid("the traceparent header is not ASCII text"))?;
    Ok(Some(text.to_string()))
}

/// A popped job (ids and topics that are not UTF-8 as `id_base64` /
/// `topic_base64`: [`put_name`]).
pub fn message(m: &Message) -> Value {
    let mut obj = Map::new();
    put_name(&mut obj, "id", m.id_bytes());
    put_name(&mut obj, "topic", m.topic_bytes());
    put_body(&mut obj, &m.body);
    obj.insert("traceparent".into(), json!(m.traceparent));
    Value::Object(obj)
}

/// A reserved job, with what ack/release/touch need.
pub fn reserved(r: &Reserved) -> Value {
    let mut obj = Map::new();
    put_name(&mut obj, "id", r.id_bytes());
    put_name(&mut obj, "topic", r.topic_bytes());
    put_body(&mut obj, &r.body);
    obj.insert("attempts".into(), json!(r.attempts));
    obj.insert("max_attempts".into(), json!(r.max_attempts));
    obj.insert("receipt".into(), json!(r.receipt));
    obj.insert("deadline".into(), json!(secs(r.deadline)));
    obj.insert("traceparent".into(), json!(r.traceparent));
    Value::Object(obj)
}

/// A dead letter.
pub fn dead_letter(d: &DeadLetter) -> Value {
    let mut obj = Map::new();
    put_name(&mut obj, "id", d.id_bytes());
    put_name(&mut obj, "topic", d.raw_topic.as_deref().unwrap_or(d.topic.as_bytes()));
    put_body(&mut obj, &d.body);
    obj.insert("attempts".into(), json!(d.attempts));
    obj.insert("reason".into(), json!(d.reason));
    obj.insert("dead_at".into(), json!(secs(d.dead_at)));
    obj.insert("last_error".into(), json!(d.last_error));
    Value::Object(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_bodies() {
        assert_eq!(duration("delay", 1.5).ok(), Some(Duration::from_millis(1500)));
        for bad in [-1.0, f64::NAN, f64::INFINITY, 1e300] {
            assert!(duration("delay", bad).is_err(), "{bad}");
        }
        let max = delayer_protocol::validate::MAX_POSITION;
        assert!(position("cursor", max).is_ok() && position("cursor", max + 1).is_err());
        assert_eq!(body(None, Some("AAH/".into())).ok(), Some(vec![0, 1, 255]));
        assert!(body(Some("a".into()), Some("YQ==".into())).is_err());
        assert!(body(None, Some("not base64!".into())).is_err());
        let mut obj = Map::new();
        put_body(&mut obj, &[0xff, 0]);
        assert_eq!(obj.get("body_base64"), Some(&json!("/wA=")));
        put_body(&mut obj, b"<b>hi</b>");
        assert_eq!(obj.get("body"), Some(&json!("<b>hi</b>")));
    }

    #[test]
    fn names_that_are_not_utf8_go_as_base64() {
        let m = Message {
            id: "\u{fffd}".into(),
            topic: "t".into(),
            body: vec![0xfe],
            raw_id: Some(vec![0xe9]),
            raw_topic: None,
            traceparent: None,
        };
        let m = message(&m);
        assert_eq!(m, json!({"id_base64": "6Q==", "topic": "t", "body_base64": "/g==", "traceparent": null}));
        let utf8 = Message {
            id: "é".into(),
            topic: "t".into(),
            body: b"x".to_vec(),
            raw_id: None,
            raw_topic: None,
            traceparent: None,
        };
        assert_eq!(message(&utf8), json!({"id": "é", "topic": "t", "body": "x", "traceparent": null}));
    }

    #[test]
    fn a_spec_needs_id_and_delay() {
        let spec = |v: Value| serde_json::from_value::<JobSpec>(v).expect("shape");
        assert!(spec(json!({"delay": 1})).into_job("t".into()).is_err());
        assert!(spec(json!({"id": "a"})).into_job("t".into()).is_err());
        let job = spec(json!({"id": "a", "delay": 2, "max_attempts": 3, "backoff": {"kind": "fixed", "delay": 1}}))
            .into_job("t".into())
            .expect("valid");
        assert_eq!((job.max_attempts, job.backoff), (Some(3), Some(Backoff::fixed(Duration::from_secs(1)))));
        assert!(serde_json::from_value::<JobSpec>(json!({"id": "a", "delai": 1})).is_err());
    }
}
