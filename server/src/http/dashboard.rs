//! The dashboard's pages: sign-in (one field, `token`, kept in an HttpOnly,
//! SameSite=Strict cookie), the app page and its script and style. The
//! assets are compiled into the binary, nothing is fetched from elsewhere,
//! and the Content-Security-Policy allows this origin's script only: job
//! bodies are shown with `textContent`, and even a mistake there could not
//! run a script (no inline script is allowed).

use crate::http::auth::{self, Access};
use crate::http::Api;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Form;
use serde::Deserialize;
use std::sync::Arc;

const APP_HTML: &str = include_str!("assets/index.html");
const SIGNIN_HTML: &str = include_str!("assets/signin.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; \
                   form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// A page or asset with the headers every one of them carries.
fn page(status: StatusCode, content_type: &'static str, body: String) -> Response {
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn signin_page(status: StatusCode, message: &str) -> Response {
    // `message` is one of ours, never the request's: nothing to escape.
    page(status, "text/html; charset=utf-8", SIGNIN_HTML.replace("<!--MESSAGE-->", message))
}

/// What the request's cookie allows.
fn cookie_access(api: &Api, headers: &HeaderMap) -> Access {
    match auth::cookie(headers) {
        Some(token) => api.tokens.access(&token),
        None if api.tokens.required() => Access::Denied,
        None => Access::Full,
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

/// `POST /signin` (form field `token`): sets the cookie and goes to `/`.
pub async fn signin(
    State(api): State<Arc<Api>>,
    form: Result<Form<SignIn>, axum::extract::rejection::FormRejection>,
) -> Response {
    let Ok(Form(SignIn { token })) = form else {
        return signin_page(StatusCode::BAD_REQUEST, "Send the form's token field.");
    };
    let token = token.trim();
    if api.tokens.access(token) == Access::Denied || token.is_empty() {
        log::warn!("http: a dashboard sign-in was refused (wrong token)");
        return signin_page(StatusCode::UNAUTHORIZED, "That token is not valid.");
    }
    // Tokens are checked to fit a cookie unquoted (settings.rs).
    let cookie = format!("{}={token}; Path=/; HttpOnly; SameSite=Strict", auth::COOKIE);
    let Ok(cookie) = HeaderValue::from_str(&cookie) else {
        return signin_page(StatusCode::BAD_REQUEST, "That token cannot be kept in a cookie.");
    };
    let mut response = StatusCode::SEE_OTHER.into_response();
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    response.headers_mut().insert(header::LOCATION, HeaderValue::from_static("/"));
    response
}

/// `POST /signout`: forgets the cookie.
pub async fn signout() -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    let expired = format!("{}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0", auth::COOKIE);
    if let Ok(value) = HeaderValue::from_str(&expired) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response.headers_mut().insert(header::LOCATION, HeaderValue::from_static("/"));
    response
}

/// `GET /assets/{name}`: the script and the style sheet.
pub async fn asset(Path(name): Path<String>) -> Response {
    match name.as_str() {
        "app.js" => page(StatusCode::OK, "text/javascript; charset=utf-8", APP_JS.to_string()),
        "app.css" => page(StatusCode::OK, "text/css; charset=utf-8", APP_CSS.to_string()),
        _ => crate::http::error::ApiError::not_found("no such asset").into_response(),
    }
}
