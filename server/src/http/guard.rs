//! What every request must pass before its credentials are looked at, so
//! that a web page in a browser on this machine cannot use the API, with or
//! without a token:
//!
//! - `Host` names this server: an IP address, `localhost`, or a name of
//!   `http_allowed_hosts`. A page whose DNS name was rebound to 127.0.0.1
//!   sends its own name and is refused.
//! - A write to the API (any method but GET and HEAD) says
//!   `Content-Type: application/json`, even without a body. A page of
//!   another origin cannot send that header without a CORS preflight, which
//!   we never grant; a "simple" request (a form, a `no-cors` fetch) cannot.
//! - The dashboard's own forms (sign-in, sign-out) are posted from its own
//!   origin (`Origin`, `Sec-Fetch-Site`), as every browser says.
//!
//! Then the body is read, whole and within `http_body_timeout`, before any
//! handler runs.

use crate::http::error::{is_json, ApiError};
use crate::http::{Api, MAX_REQUEST_BYTES};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

/// Refuses a request whose `Host` is not this server's.
pub async fn host(State(api): State<Arc<Api>>, req: Request, next: Next) -> Response {
    let host = req.headers().get(header::HOST).and_then(|h| h.to_str().ok()).or_else(|| req.uri().host());
    // No Host at all: not a browser (HTTP/1.1 clients always send one).
    if host.is_some_and(|host| !allowed_host(host, &api.allowed_hosts)) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "host_not_allowed",
            "this server does not answer to that Host; reach it by IP address or localhost, or list the name in \
             http_allowed_hosts",
        )
        .into_response();
    }
    next.run(req).await
}

/// Whether `host` (a Host header: a name or address, maybe with a port)
/// names this server. IP addresses always do: a page cannot rebind one.
pub fn allowed_host(host: &str, allowed: &[String]) -> bool {
    let host = host.trim();
    if let Some(bracketed) = host.strip_prefix('[') {
        // An IPv6 address, "[::1]:8080".
        let inside = bracketed.split(']').next().unwrap_or("");
        return inside.parse::<std::net::Ipv6Addr>().is_ok();
    }
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name.parse::<Ipv4Addr>().is_ok() || name == "localhost" || allowed.contains(&name)
}

/// Refuses a write that a page of another origin could have sent.
pub async fn writes(req: Request, next: Next) -> Response {
    if matches!(*req.method(), Method::GET | Method::HEAD) {
        return next.run(req).await;
    }
    let path = req.uri().path();
    if path.starts_with("/v1/") && !is_json(req.headers()) {
        return ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "every write needs Content-Type: application/json, with a body or without (a web page of another site \
             cannot send it)",
        )
        .into_response();
    }
    if matches!(path, "/signin" | "/signout") && !same_origin(req.headers()) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "cross_origin",
            "the dashboard's forms are posted from its own pages",
        )
        .into_response();
    }
    next.run(req).await
}

/// Whether a browser says the request comes from the page's own origin:
/// `Sec-Fetch-Site` (which no page can set) when sent, else `Origin`.
/// Without either, it is not a browser's: no page made it.
fn same_origin(headers: &HeaderMap) -> bool {
    let text = |name: &str| headers.get(name).map(|v| v.to_str().unwrap_or("?"));
    if let Some(site) = text("sec-fetch-site") {
        return matches!(site, "same-origin" | "none");
    }
    let Some(origin) = text("origin") else { return true };
    let host = text("host").unwrap_or("");
    let authority = origin.split_once("://").map_or("", |(_, rest)| rest);
    !host.is_empty() && authority.eq_ignore_ascii_case(host)
}

/// Reads the whole body within `http_body_timeout` and the size limit, so a
/// client sending it a byte at a time cannot hold the connection, and a
/// handler never waits on the network.
pub async fn buffer(State(api): State<Arc<Api>>, req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    let declared = parts.headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|len| len > MAX_REQUEST_BYTES as u64) {
        return too_large();
    }
    let read = tokio::time::timeout(api.body_timeout, Limited::new(body, MAX_REQUEST_BYTES).collect()).await;
    let bytes = match read {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => return too_large(),
        Ok(Err(e)) => return ApiError::new(StatusCode::BAD_REQUEST, "invalid_body", format!("{e}")).into_response(),
        Err(_) => {
            let mut response = ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "body_timeout",
                format!("the request body did not arrive within {} s", api.body_timeout.as_secs()),
            )
            .into_response();
            response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            return response;
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

fn too_large() -> Response {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
        format!("the request body is over the limit of {MAX_REQUEST_BYTES} bytes"),
    )
    .into_response()
}

/// The client's address: the peer's, or, when the peer is a trusted proxy,
/// the last address of `X-Forwarded-For` that is not one of them.
pub fn client(peer: IpAddr, headers: &HeaderMap, trusted: &[IpAddr]) -> IpAddr {
    if !trusted.contains(&peer) {
        return peer;
    }
    let forwarded = headers.get_all("x-forwarded-for").iter().filter_map(|v| v.to_str().ok()).collect::<Vec<_>>();
    let hops = forwarded.iter().flat_map(|v| v.split(',')).map(str::trim).collect::<Vec<_>>();
    hops.iter().rev().filter_map(|hop| hop.parse::<IpAddr>().ok()).find(|ip| !trusted.contains(ip)).unwrap_or(peer)
}

/// Whether the client reached us over HTTPS: only a trusted proxy can say
/// so (`X-Forwarded-Proto`); this server itself speaks plain HTTP.
pub fn https(peer: IpAddr, headers: &HeaderMap, trusted: &[IpAddr]) -> bool {
    trusted.contains(&peer)
        && headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.rsplit(',').next())
            .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_by_address_localhost_or_the_list() {
        let allowed = vec!["delayer.example.com".to_string()];
        for ok in ["127.0.0.1:8080", "127.0.0.1", "[::1]:8080", "localhost:8080", "LOCALHOST.", "10.1.2.3:80"] {
            assert!(allowed_host(ok, &allowed), "{ok}");
        }
        assert!(allowed_host("Delayer.Example.com:443", &allowed));
        for bad in ["attacker.example", "attacker.example:8080", "localhost.attacker.example", "127.0.0.1.nip.io", ""] {
            assert!(!allowed_host(bad, &allowed), "{bad}");
        }
    }

    #[test]
    fn the_client_behind_a_trusted_proxy() {
        let proxy: IpAddr = "10.0.0.2".parse().expect("ip");
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-for", "1.2.3.4, 5.6.7.8, 10.0.0.2".parse().expect("header"));
        headers.insert("x-forwarded-proto", "https".parse().expect("header"));
        assert_eq!(client(proxy, &headers, &[proxy]), "5.6.7.8".parse::<IpAddr>().expect("ip"));
        assert!(https(proxy, &headers, &[proxy]));
        // Anyone else's headers are not believed.
        let other: IpAddr = "192.0.2.9".parse().expect("ip");
        assert_eq!(client(other, &headers, &[proxy]), other);
        assert!(!https(other, &headers, &[proxy]));
    }

    #[test]
    fn same_origin_as_browsers_say_it() {
        let headers = |pairs: &[(&'static str, &str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, v.parse().expect("header"));
            }
            h
        };
        assert!(same_origin(&headers(&[("host", "127.0.0.1:8080")])));
        assert!(same_origin(&headers(&[("host", "127.0.0.1:8080"), ("origin", "http://127.0.0.1:8080")])));
        assert!(!same_origin(&headers(&[("host", "127.0.0.1:8080"), ("origin", "http://127.0.0.1:9999")])));
        assert!(!same_origin(&headers(&[("host", "127.0.0.1:8080"), ("origin", "null")])));
        assert!(!same_origin(&headers(&[("host", "127.0.0.1:8080"), ("sec-fetch-site", "cross-site")])));
        assert!(!same_origin(&headers(&[("host", "127.0.0.1:8080"), ("sec-fetch-site", "same-site")])));
        let own = [("host", "127.0.0.1:8080"), ("origin", "null"), ("sec-fetch-site", "same-origin")];
        assert!(same_origin(&headers(&own)));
    }
}
