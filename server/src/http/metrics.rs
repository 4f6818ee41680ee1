//! The listener of `metrics_addr`: the Prometheus text of the metrics that
//! `telemetry` names and records, and the probes `/healthz` and `/readyz`
//! (`readiness` judges them; the API serves the same at `/v1/ready`), with
//! the API's socket limits.
//!
//! The exporter is installed only here, so a server without this listener
//! records into the `metrics` facade's no-op.

use crate::telemetry;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use std::net::SocketAddr;
use std::time::Duration;

/// Serves the metrics at `http://<addr>/metrics`, with the API's socket
/// limits (`limits`: a connection cap and deadlines). Call inside the tokio
/// runtime that will drive the endpoint.
pub async fn serve(addr: SocketAddr, limits: super::settings::Limits) -> Result<(), String> {
    let builder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Full(telemetry::BATCH.into()), &telemetry::DURATION_BUCKETS)
        .and_then(|b| b.set_buckets_for_metric(Matcher::Full(telemetry::TICK.into()), &telemetry::DURATION_BUCKETS))
        .and_then(|b| b.set_buckets_for_metric(Matcher::Full(telemetry::LATENESS.into()), &telemetry::LATENESS_BUCKETS))
        .and_then(|b| b.set_buckets_for_metric(Matcher::Full(telemetry::HELD.into()), &telemetry::HELD_BUCKETS))
        .map_err(|e| format!("metrics: {e}"))?;
    let listener =
        tokio::net::TcpListener::bind(addr).await.map_err(|e| format!("cannot serve metrics on {addr}: {e}"))?;
    let handle = builder.install_recorder().map_err(|e| format!("cannot serve metrics on {addr}: {e}"))?;
    // The exporter's upkeep (draining histograms), which its own listener
    // would have run.
    let upkeep = handle.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            upkeep.run_upkeep();
        }
    });
    let app = axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(move || {
                let text = handle.render();
                async move { ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], text) }
            }),
        )
        // The probes (src/readiness.rs): liveness and readiness.
        .route("/healthz", axum::routing::get(live))
        .route("/readyz", axum::routing::get(ready));
    tokio::spawn(super::listen::serve(listener, app, limits, "metrics"));
    telemetry::describe();
    Ok(())
}

/// `GET /healthz`: the process serves.
pub async fn live() -> Response {
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "ok\n").into_response()
}

/// `GET /readyz` and `GET /v1/ready`: 200 with the checks when ready, 503
/// with the failing checks and their reasons otherwise.
pub async fn ready() -> Response {
    let (ready, body) = crate::readiness::report().await;
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let mut response = (status, axum::Json(body)).into_response();
    // Never cached on the way: a probe must see now.
    response.headers_mut().insert(header::CACHE_CONTROL, header::HeaderValue::from_static("no-store"));
    response
}
