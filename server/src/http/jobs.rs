//! The routes that push and consume jobs: push, push many, pop, reserve and
//! the commands on a reservation (ack, release, bury, touch), remove and
//! reschedule. Each is one call of the Rust SDK's async client: the API adds
//! JSON, never Redis commands of its own. Every call is bounded in time
//! (`outage`); a pop or reserve with a `wait` bounds its own (the wait plus
//! `http_redis_timeout`) and needs one of `http_max_waiting` permits.

use crate::http::error::{ApiError, ApiResult, Body};
use crate::http::names::{JobPath, TopicPath};
use crate::http::outage::bounded;
use crate::http::wire::{self, JobSpec};
use crate::http::Api;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use delayer::JobRef;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// Most jobs one push_many request may hold.
pub const MAX_JOBS_PER_REQUEST: usize = 10_000;
/// Longest wait of a blocking pop or reserve: a request must end well before
/// proxies and clients give up on it.
pub const MAX_WAIT_SECS: f64 = 60.0;

type Reply = ApiResult<Json<Value>>;

/// `POST /v1/topics/{topic}/jobs`. The job's `traceparent` is the body's
/// field, else the request's `traceparent` header (an instrumented HTTP
/// client sends its own span's): either is checked by the SDK's rule.
pub async fn push(
    State(api): State<Arc<Api>>,
    TopicPath(topic): TopicPath,
    headers: HeaderMap,
    Body(mut spec): Body<JobSpec>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    if spec.topic.as_ref().is_some_and(|t| *t != topic) {
        return Err(ApiError::invalid("the topic is the path's; leave it out of the body"));
    }
    if spec.traceparent.is_none() {
        spec.traceparent = wire::traceparent_header(&headers)?;
    }
    let job = spec.into_job(topic)?;
    let due = api.delayer.push_job(&job).await?;
    Ok((StatusCode::CREATED, Json(json!({"id": job.id, "topic": job.topic, "due": wire::secs(due)}))))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ManySpec {
    jobs: Vec<JobSpec>,
}

/// `POST /v1/jobs`: jobs of any topics, each with its `topic`.
pub async fn push_many(State(api): State<Arc<Api>>, Body(spec): Body<ManySpec>) -> Reply {
    if spec.jobs.len() > MAX_JOBS_PER_REQUEST {
        return Err(ApiError::invalid(format!(
            "{} jobs in one request; at most {MAX_JOBS_PER_REQUEST} are taken",
            spec.jobs.len()
        )));
    }
    let jobs = spec
        .jobs
        .into_iter()
        .enumerate()
        .map(|(i, mut spec)| {
            let topic = spec.topic.take().ok_or_else(|| ApiError::invalid(format!("jobs[{i}]: topic is required")))?;
            spec.into_job(topic).map_err(|e| ApiError::invalid(format!("jobs[{i}]: {}", e.message)))
        })
        .collect::<ApiResult<Vec<_>>>()?;
    let due = api.delayer.push_many(&jobs).await?;
    Ok(Json(json!({"due": due.into_iter().map(wire::secs).collect::<Vec<_>>()})))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct PopSpec {
    /// Seconds to wait for a job (0 or absent: answer at once).
    wait: Option<f64>,
}

fn wait(seconds: Option<f64>) -> ApiResult<Option<Duration>> {
    match seconds {
        None => Ok(None),
        Some(s) if s > MAX_WAIT_SECS => Err(ApiError::invalid(format!("wait is at most {MAX_WAIT_SECS} seconds"))),
        Some(s) => Ok(Some(wire::duration("wait", s)?).filter(|d| !d.is_zero())),
    }
}

/// `POST /v1/topics/{topic}/pop`: `{"job": ... | null}`.
pub async fn pop(State(api): State<Arc<Api>>, TopicPath(topic): TopicPath, Body(spec): Body<PopSpec>) -> Reply {
    let job = match wait(spec.wait)? {
        None => bounded(api.redis_timeout, api.delayer.pop(&topic)).await?,
        Some(wait) => {
            let _permit = api.waiting()?;
            bounded(wait + api.redis_timeout, api.delayer.bpop(&topic, wait)).await?
        }
    };
    Ok(Json(json!({"job": job.as_ref().map(wire::message)})))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ReserveSpec {
    /// Seconds the reservation lasts before the job is retried.
    ttr: Option<f64>,
    wait: Option<f64>,
}

/// `POST /v1/topics/{topic}/reserve`: `{"job": ... | null}`.
pub async fn reserve(State(api): State<Arc<Api>>, TopicPath(topic): TopicPath, Body(spec): Body<ReserveSpec>) -> Reply {
    let ttr = wire::duration("ttr", spec.ttr.ok_or_else(|| ApiError::invalid("ttr (seconds) is required"))?)?;
    let job = match wait(spec.wait)? {
        None => bounded(api.redis_timeout, api.delayer.reserve(&topic, ttr)).await?,
        Some(wait) => {
            let _permit = api.waiting()?;
            bounded(wait + api.redis_timeout, api.delayer.breserve(&topic, ttr, wait)).await?
        }
    };
    Ok(Json(json!({"job": job.as_ref().map(wire::reserved)})))
}

/// The body of ack, release, bury and touch.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ReservationSpec {
    /// The reservation's receipt; absent: whichever reservation is current.
    receipt: Option<String>,
    /// release: seconds until the retry (absent: the job's backoff).
    delay: Option<f64>,
    /// touch: the new time-to-run, in seconds.
    ttr: Option<f64>,
    /// release, bury: why the attempt failed; kept on the job as its
    /// last error (job lookup and dead letters show it).
    error: Option<String>,
}

impl ReservationSpec {
    fn job<'a>(&'a self, topic: &'a str, id: &'a [u8]) -> JobRef<'a> {
        JobRef { id: "", receipt: self.receipt.as_deref(), topic: Some(topic), raw_id: Some(id) }
    }

    /// Refuses the fields another command takes, so a typo is not ignored.
    fn only(&self, delay: bool, ttr: bool, error: bool) -> ApiResult<()> {
        if self.error.is_some() && !error {
            return Err(ApiError::invalid("error is not taken here (release and bury take it)"));
        }
        if self.delay.is_some() && !delay {
            return Err(ApiError::invalid("delay is not taken here (release takes it)"));
        }
        if self.ttr.is_some() && !ttr {
            return Err(ApiError::invalid("ttr is not taken here (touch takes it)"));
        }
        Ok(())
    }
}

/// `POST /v1/topics/{topic}/jobs/{id}/ack`
pub async fn ack(
    State(api): State<Arc<Api>>,
    JobPath { topic, id }: JobPath,
    Body(spec): Body<ReservationSpec>,
) -> Reply {
    spec.only(false, false, false)?;
    Ok(Json(json!({"acked": api.delayer.ack(spec.job(&topic, &id)).await?})))
}

/// `POST /v1/topics/{topic}/jobs/{id}/release`
pub async fn release(
    State(api): State<Arc<Api>>,
    JobPath { topic, id }: JobPath,
    Body(spec): Body<ReservationSpec>,
) -> Reply {
    spec.only(true, false, true)?;
    let delay = spec.delay.map(|d| wire::duration("delay", d)).transpose()?;
    let error = spec.error.as_deref().unwrap_or("");
    Ok(Json(json!({"released": api.delayer.release_with_error(spec.job(&topic, &id), delay, error).await?})))
}

/// `POST /v1/topics/{topic}/jobs/{id}/bury`
pub async fn bury(
    State(api): State<Arc<Api>>,
    JobPath { topic, id }: JobPath,
    Body(spec): Body<ReservationSpec>,
) -> Reply {
    spec.only(false, false, true)?;
    let error = spec.error.as_deref().unwrap_or("");
    Ok(Json(json!({"buried": api.delayer.bury_with_error(spec.job(&topic, &id), error).await?})))
}

/// `POST /v1/topics/{topic}/jobs/{id}/touch`: `{"deadline": t | null}`.
pub async fn touch(
    State(api): State<Arc<Api>>,
    JobPath { topic, id }: JobPath,
    Body(spec): Body<ReservationSpec>,
) -> Reply {
    spec.only(false, true, false)?;
    let ttr = wire::duration("ttr", spec.ttr.ok_or_else(|| ApiError::invalid("ttr (seconds) is required"))?)?;
    let deadline = api.delayer.touch(spec.job(&topic, &id), ttr).await?;
    Ok(Json(json!({"deadline": deadline.map(wire::secs)})))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RescheduleSpec {
    delay: Option<f64>,
}

/// `POST /v1/topics/{topic}/jobs/{id}/reschedule`: `{"due": t | null}`
/// (null: the job was not waiting).
pub async fn reschedule(
    State(api): State<Arc<Api>>,
    JobPath { topic, id }: JobPath,
    Body(spec): Body<RescheduleSpec>,
) -> Reply {
    let delay = wire::duration("delay", spec.delay.ok_or_else(|| ApiError::invalid("delay (seconds) is required"))?)?;
    // The SDK's rule, before the lookup: a bad delay is a 400 whether or not
    // the job is there.
    delayer_protocol::validate::delay_ms(delay)?;
    if !api.of_topic(&topic, &id).await? {
        return Ok(Json(json!({"due": null})));
    }
    let due = api.delayer.reschedule_in_raw(&topic, &id, delay).await?;
    Ok(Json(json!({"due": due.map(wire::secs)})))
}

/// `DELETE /v1/topics/{topic}/jobs/{id}`: `{"removed": bool}`.
pub async fn remove(State(api): State<Arc<Api>>, JobPath { topic, id }: JobPath) -> Reply {
    if !api.of_topic(&topic, &id).await? {
        return Ok(Json(json!({"removed": false})));
    }
    Ok(Json(json!({"removed": api.delayer.remove_in_raw(&topic, &id).await?})))
}
