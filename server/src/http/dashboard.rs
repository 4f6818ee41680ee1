//! The dashboard's pages: sign-in (one field, `token`; the cookie then holds
//! a signed session, HttpOnly, SameSite=Strict, with an end, and Secure
//! behind a trusted HTTPS proxy), the app page and its script and style. The
//! assets are compiled into the binary, nothing is fetched from elsewhere,
//! and the Content-Security-Policy allows this origin's script only: job
//! bodies are shown with `textContent`, and even a mistake there could not
//! run a script (no inline script is allowed).

use crate::http::auth::{self, Access};
use crate::http::session::Verdict;
use crate::http::Api;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Form;
use serde::Deserialize;
use std::net::SocketAddr;
use std::sync::Arc;

const APP_HTML: &str = include_str!("assets/index.html");
const SIGNIN_HTML: &str = include_str!("assets/signin.html");
const APP_CSS: &str = include_str!("assets/app.css");
/// The scripts, by name: helpers, the chart, a topic's lists, the views;
/// and the sign-in page's (which keeps a deep link through the sign-in).
const SCRIPTS: [(&str, &str); 5] = [
    ("util.js", include_str!("assets/util.js")),
    ("chart.js", include_str!("assets/chart.js")),
    ("lists.js", include_str!("assets/lists.js")),
    ("app.js", include_str!("assets/app.js")),
    ("signin.js", include_str!("assets/signin.js")),
];

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; \
                   form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// A page or asset with the headers every one of them carries.
fn page(status: StatusCode, content_type: &'static str, body: String) -> Response {
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    // Not "no-referrer": under it a browser sends `Origin: null` with the
    // page's own form posts, which guard.rs must tell from another site's.
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn signin_page(status: StatusCode, message: &str) -> Response {
    // `message` is one of ours, never the request's: nothing to escape.
    page(status, "text/html; charset=utf-8", SIGNIN_HTML.replace("<!--MESSAGE-->", message))
}

/// What the request's cookie allows.
fn cookie_access(api: &Api, headers: &HeaderMap) -> Access {
    if !api.tokens.required() {
        return Access::Full;
    }
    match auth::cookie(headers).map(|value| api.sessions.verify(&value)) {
        Some(Verdict::Valid(access)) => access,
        _ => Access::Denied,
    }
}

/// `GET /`: the app when signed in (or no token is configured), else the
/// sign-in form.
pub async fn index(State(api): State<Arc<Api>>, headers: HeaderMap) -> Response {
    match cookie_access(&api, &headers) {
        Access::Denied => signin_page(StatusCode::OK, ""),
        Access::Read => page(
            StatusCode::OK,
            "text/html; charset=utf-8",
            APP_HTML.replace("data-access=\"full\"", "data-access=\"read\""),
        ),
        Access::Full => page(StatusCode::OK, "text/html; charset=utf-8", APP_HTML.to_string()),
    }
}

#[derive(Deserialize)]
pub struct SignIn {
    token: String,
}

/// `POST /signin` (form field `token`): sets the session cookie and goes
/// to `/`. Wrong tokens count against the client's address (`limiter`).
pub async fn signin(
    State(api): State<Arc<Api>>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    form: Result<Form<SignIn>, axum::extract::rejection::FormRejection>,
) -> Response {
    let Ok(Form(SignIn { token })) = form else {
        return signin_page(StatusCode::BAD_REQUEST, "Send the form's token field.");
    };
    let peer = peer.map(|Extension(ConnectInfo(addr))| addr.ip());
    let client = auth::client_of(&api, &headers, peer);
    if let Err(wait) = api.limiter.check(client) {
        let mut response = signin_page(
            StatusCode::TOO_MANY_REQUESTS,
            &format!("Too many wrong tokens from this address: try again in {} s.", wait.as_secs()),
        );
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(wait.as_secs()));
        return response;
    }
    let token = token.trim();
    let access = api.tokens.access(token);
    if access == Access::Denied || token.is_empty() {
        api.limiter.failed(client, "a dashboard sign-in");
        return signin_page(StatusCode::UNAUTHORIZED, "That token is not valid.");
    }
    let session = match api.sessions.issue(access) {
        Ok(session) => session,
        Err(e) => {
            log::error!("http: {e}");
            return signin_page(StatusCode::INTERNAL_SERVER_ERROR, "The server cannot make a session.");
        }
    };
    let secure = peer.is_some_and(|ip| crate::http::guard::https(ip, &headers, &api.trusted_proxies));
    let cookie = format!(
        "{}={session}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{}",
        auth::COOKIE,
        api.sessions.lifetime().as_secs(),
        if secure { "; Secure" } else { "" }
    );
    let Ok(cookie) = HeaderValue::from_str(&cookie) else {
        return signin_page(StatusCode::INTERNAL_SERVER_ERROR, "The server cannot make a session.");
    };
    let mut response = StatusCode::SEE_OTHER.into_response();
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    response.headers_mut().insert(header::LOCATION, HeaderValue::from_static("/"));
    response
}

/// `POST /signout`: ends the session (refused from now on, wherever its
/// cookie went) and forgets the cookie.
pub async fn signout(State(api): State<Arc<Api>>, headers: HeaderMap) -> Response {
    if let Some(value) = auth::cookie(&headers) {
        api.sessions.revoke(&value);
    }
    let mut response = StatusCode::SEE_OTHER.into_response();
    let expired = format!("{}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0", auth::COOKIE);
    if let Ok(value) = HeaderValue::from_str(&expired) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response.headers_mut().insert(header::LOCATION, HeaderValue::from_static("/"));
    response
}

/// `GET /assets/{name}`: the scripts and the style sheet.
pub async fn asset(Path(name): Path<String>) -> Response {
    if name == "app.css" {
        return page(StatusCode::OK, "text/css; charset=utf-8", APP_CSS.to_string());
    }
    match SCRIPTS.iter().find(|(script, _)| *script == name) {
        Some((_, text)) => page(StatusCode::OK, "text/javascript; charset=utf-8", text.to_string()),
        None => crate::http::error::ApiError::not_found("no such asset").into_response(),
    }
}
