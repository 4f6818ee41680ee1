//! Who may do what: the bearer tokens of `http_token` (everything) and
//! `http_read_token` (GET only), or the dashboard's session cookie
//! (`session`), which holds a signed session, never a token.
//!
//! Tokens are compared in constant time, so the time an answer takes says
//! nothing about how much of a guess was right, and wrong ones are counted
//! per client address (`limiter`): past a few, 429 until the address slows
//! down. A cookie is sent by the browser on its own, so a request that
//! changes something with the cookie must also carry the [`CSRF_HEADER`]
//! header, which a page of another site cannot add without a CORS preflight
//! we never grant (the cookie is SameSite=Strict too, and writes need a JSON
//! Content-Type: `guard`).

pub use crate::http::access::{same, Access};
use crate::http::error::ApiError;
use crate::http::session::Verdict;
use crate::http::settings::{HttpSettings, Token};
use crate::http::Api;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// The dashboard's cookie: a session (`session.rs`).
pub const COOKIE: &str = "delayer_session";
/// The header the dashboard sends with every request it makes.
pub const CSRF_HEADER: &str = "x-delayer-dashboard";

/// The configured tokens.
#[derive(Debug, Clone)]
pub struct Tokens {
    token: Option<Token>,
    read_token: Option<Token>,
}

impl Tokens {
    pub fn new(settings: &HttpSettings) -> Tokens {
        Tokens { token: settings.token.clone(), read_token: settings.read_token.clone() }
    }

    /// Whether a token is needed at all.
    pub fn required(&self) -> bool {
        self.token.is_some()
    }

    /// What `presented` allows. Both tokens are always compared, so the time
    /// taken does not tell which one matched.
    pub fn access(&self, presented: &str) -> Access {
        let Some(token) = &self.token else { return Access::Full };
        let full = same(presented.as_bytes(), token.as_bytes());
        let read = self.read_token.as_ref().is_some_and(|t| same(presented.as_bytes(), t.as_bytes()));
        if full {
            Access::Full
        } else if read {
            Access::Read
        } else {
            Access::Denied
        }
    }
}

/// The routes anyone may call: the probes, the API's description and the
/// dashboard's page, sign-in and assets (the page itself holds no data).
fn public(path: &str) -> bool {
    matches!(path, "/v1/health" | "/v1/ready" | "/v1/openapi.json" | "/" | "/signin" | "/signout")
        || path.starts_with("/assets/")
}

/// Credentials a request carries.
#[derive(Debug, PartialEq, Eq)]
enum Presented {
    Bearer(String),
    /// The dashboard's cookie: the browser may have sent it on its own.
    Session(String),
}

/// `Authorization: Bearer`, else the cookie.
fn presented(headers: &HeaderMap) -> Option<Presented> {
    if let Some(value) = headers.get(header::AUTHORIZATION) {
        let value = value.to_str().unwrap_or("");
        let token = value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer ")).unwrap_or("");
        return Some(Presented::Bearer(token.trim().to_string()));
    }
    cookie(headers).map(Presented::Session)
}

/// The dashboard's cookie, if the request has one.
pub fn cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_string())
}

/// The address of the request's client (`guard::client`).
pub fn client_of(api: &Api, headers: &HeaderMap, peer: Option<IpAddr>) -> IpAddr {
    let peer = peer.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    crate::http::guard::client(peer, headers, &api.trusted_proxies)
}

/// The middleware in front of every route.
pub async fn check(State(api): State<Arc<Api>>, req: Request, next: Next) -> Response {
    if public(req.uri().path()) {
        return next.run(req).await;
    }
    let reading = matches!(*req.method(), Method::GET | Method::HEAD);
    let presented = presented(req.headers());
    let by_cookie = matches!(presented, Some(Presented::Session(_)));
    let access = match presented {
        _ if !api.tokens.required() => Access::Full,
        None => return unauthorized("this route needs a token: send Authorization: Bearer <http_token>"),
        Some(presented) => {
            let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(addr)| addr.ip());
            let client = client_of(&api, req.headers(), peer);
            if let Err(wait) = api.limiter.check(client) {
                return too_many(wait);
            }
            match presented {
                Presented::Bearer(token) => match api.tokens.access(&token) {
                    Access::Denied => {
                        api.limiter.failed(client, "a bearer token");
                        return unauthorized("the token is not valid");
                    }
                    access => access,
                },
                Presented::Session(value) => match api.sessions.verify(&value) {
                    Verdict::Valid(access) => access,
                    Verdict::Ended => return unauthorized("the session has ended: sign in again"),
                    Verdict::Forged => {
                        api.limiter.failed(client, "a session cookie");
                        return unauthorized("the session is not valid: sign in again");
                    }
                },
            }
        }
    };
    if access == Access::Read && !reading {
        return ApiError::new(StatusCode::FORBIDDEN, "read_only", "this token may only read (GET)").into_response();
    }
    if by_cookie && !reading && !req.headers().contains_key(CSRF_HEADER) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "csrf",
            format!("a request that changes something with the dashboard's cookie needs the {CSRF_HEADER} header"),
        )
        .into_response();
    }
    next.run(req).await
}

fn unauthorized(message: &str) -> Response {
    let mut response = ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response();
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// 429: this address made too many wrong attempts; `wait` until the next.
pub fn too_many(wait: Duration) -> Response {
    let mut error = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "too_many_attempts",
        format!("too many wrong credentials from this address: try again in {} s", wait.as_secs()),
    );
    error.retry_after = Some(wait.as_secs());
    error.into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_compares_every_byte_and_the_length() {
        assert!(same(b"abcdef", b"abcdef"));
        assert!(!same(b"abcdeg", b"abcdef"));
        assert!(!same(b"abcde", b"abcdef"));
        assert!(!same(b"abcdefg", b"abcdef"));
        assert!(!same(b"", b"abcdef"));
    }

    #[test]
    fn tokens_give_their_access() {
        let token = |s: &str| Some(Token::from_test(s));
        let tokens = Tokens { token: token("full-token-0123456"), read_token: token("read-token-0123456") };
        assert_eq!(tokens.access("full-token-0123456"), Access::Full);
        assert_eq!(tokens.access("read-token-0123456"), Access::Read);
        assert_eq!(tokens.access("full-token-012345"), Access::Denied);
        assert_eq!(Tokens { token: None, read_token: None }.access(""), Access::Full);
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, "a=1; delayer_session=xyz; b=2".parse().expect("header"));
        assert_eq!(cookie(&headers).as_deref(), Some("xyz"));
        assert_eq!(presented(&headers), Some(Presented::Session("xyz".to_string())));
        headers.insert(header::AUTHORIZATION, "Bearer abc".parse().expect("header"));
        assert_eq!(presented(&headers), Some(Presented::Bearer("abc".to_string())));
    }
}
