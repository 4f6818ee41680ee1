//! One delivery over HTTP: POST a job's payload, signed, and tell whether
//! the receiver took it.
//!
//! A 2xx answer is success. Anything else is a [`Failure`] whose text is
//! recorded on the job (its `last_error`) and logged: the HTTP status, a
//! timeout, or why the connection failed. Redirects are not followed (a
//! POST turned into a GET would lose the job), so a 3xx is a failure too.
//! Error texts never hold the URL: it may carry credentials.

use super::config::Hook;
use super::payload::payload;
use crate::fatal::chain;
use reqwest::header::{HeaderValue, CONTENT_TYPE, USER_AGENT};
use reqwest::{redirect, Client, StatusCode};
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Header with the Unix time (seconds) the request was signed at.
pub const TIMESTAMP_HEADER: &str = "X-Delayer-Timestamp";
/// Header with `sha256=<hex HMAC-SHA256(secret, timestamp + "." + body)>`.
pub const SIGNATURE_HEADER: &str = "X-Delayer-Signature";
/// Most bytes of an answer read (then dropped), so the connection can serve
/// the next delivery.
const ANSWER_READ_LIMIT: usize = 64 * 1024;

/// Why a delivery did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The receiver answered with a status other than 2xx.
    Status(u16, String),
    /// No complete answer within the hook's timeout.
    Timeout(Duration),
    /// The request could not be made or its answer not read.
    Request(String),
    /// Not sent: the process was stopping when the job came.
    Stopping,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Status(code, reason) if reason.is_empty() => write!(f, "HTTP {code}"),
            Failure::Status(code, reason) => write!(f, "HTTP {code} {reason}"),
            Failure::Timeout(after) => write!(f, "timeout: no answer within {} s", after.as_secs()),
            Failure::Request(why) => f.write_str(why),
            Failure::Stopping => f.write_str("not sent: delayer webhook was stopping"),
        }
    }
}

impl std::error::Error for Failure {}

/// The HTTP client every delivery of the process shares (its connections
/// are kept for reuse).
#[derive(Clone)]
pub struct Sender {
    client: Client,
}

impl Sender {
    pub fn new() -> Result<Sender, String> {
        let client = Client::builder()
            .redirect(redirect::Policy::none())
            .build()
            .map_err(|e| format!("cannot start the HTTP client: {}", chain(&e)))?;
        Ok(Sender { client })
    }

    /// POSTs job `id` of `hook`'s topic, signed now; `Ok` on a 2xx answer.
    /// The trace context the job was pushed with goes as the `traceparent`
    /// header (W3C), so the receiver's span joins the producer's trace.
    pub async fn deliver(
        &self,
        hook: &Hook,
        id: &[u8],
        body: &[u8],
        attempts: u32,
        traceparent: Option<&str>,
    ) -> Result<(), Failure> {
        let payload = payload(id, &hook.topic, body, attempts);
        let timestamp = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let signature = hook.signer.sign(timestamp, &payload);
        let mut request = self
            .client
            .post(hook.url.clone())
            .timeout(hook.timeout)
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header(USER_AGENT, concat!("delayer-webhook/", env!("CARGO_PKG_VERSION")))
            .header(TIMESTAMP_HEADER, timestamp)
            .header(SIGNATURE_HEADER, signature)
            .body(payload);
        // The SDK handed it out checked (W3C form, ASCII): a valid header.
        if let Some(traceparent) = traceparent {
            request = request.header("traceparent", traceparent);
        }
        let failed = |e: reqwest::Error| match e.is_timeout() {
            true => Failure::Timeout(hook.timeout),
            false => Failure::Request(chain(&e.without_url())),
        };
        let mut answer = request.send().await.map_err(failed)?;
        let status = answer.status();
        // Read what the receiver says (within the timeout), up to a limit,
        // so the connection is left clean for the next delivery.
        let mut read = 0;
        while read < ANSWER_READ_LIMIT {
            match answer.chunk().await {
                Ok(Some(chunk)) => read += chunk.len(),
                Ok(None) => break,
                // The status is what counts: a 2xx whose body was cut off
                // still acknowledged the job.
                Err(e) if status.is_success() => {
                    let id = String::from_utf8_lossy(id);
                    log::debug!(
                        "webhook {}: job {id:?}: answer body not read: {}",
                        hook.topic,
                        chain(&e.without_url())
                    );
                    break;
                }
                Err(e) => return Err(failed(e)),
            }
        }
        if status.is_success() {
            Ok(())
        } else {
            Err(status_failure(status))
        }
    }
}

fn status_failure(status: StatusCode) -> Failure {
    Failure::Status(status.as_u16(), status.canonical_reason().unwrap_or("").to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_read_as_the_reason_recorded_on_the_job() {
        assert_eq!(status_failure(StatusCode::INTERNAL_SERVER_ERROR).to_string(), "HTTP 500 Internal Server Error");
        assert_eq!(status_failure(StatusCode::from_u16(599).expect("code")).to_string(), "HTTP 599");
        assert_eq!(Failure::Timeout(Duration::from_secs(5)).to_string(), "timeout: no answer within 5 s");
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused");
        assert_eq!(chain(&io), "Connection refused");
    }
}
