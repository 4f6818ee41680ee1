//! Telling credentials Redis refuses from other failures. Retrying cannot
//! fix them, so at start they stop the server; once it runs (Redis restarted
//! with a new password) the log must say so rather than "unavailable".
//! The error texts are Redis's and redis-rs's: they never hold the password.
//! One wording ([`refused_message`]) for the server and the commands, naming
//! what to change: the file's keys, their environment variables, or the URL.

use redis::{ErrorKind, RedisError};
use std::fmt::Display;
use std::path::Path;

/// Where the credentials Redis refused came from, so the message names
/// what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source<'a> {
    /// A configuration file's `[redis]` section (or the environment
    /// variables that override its keys).
    File(&'a Path),
    /// A URL given on the command line or by an environment variable
    /// (`--url`, `DELAYER_URL`).
    Url(&'a str),
    /// The server's own settings, file unnamed (a running mover's log).
    Settings,
}

/// The keys that hold credentials, in the file and in the environment.
const KEYS: &str = "[redis] password and username (or the user:password of [redis] url), or the environment's \
                    DELAYER_REDIS_PASSWORD (or DELAYER_REDIS_PASSWORD_FILE), DELAYER_REDIS_USERNAME, DELAYER_REDIS_URL";

/// What to change, for credentials from `source`.
pub fn advice(source: &Source) -> String {
    match source {
        Source::File(path) if path.is_file() => format!("check {KEYS} (file {})", path.display()),
        Source::Url(given_by) => {
            format!("check the user:password in the URL of {given_by} (redis://user:password@host:port/db)")
        }
        Source::File(_) | Source::Settings => format!("check {KEYS}"),
    }
}

/// The one wording of refused credentials: `redis` is the Redis described
/// (never its URL, which may hold the password), `e` what it said.
pub fn refused_message(redis: &str, e: &dyn Display, source: &Source) -> String {
    format!("redis at {redis} refused our credentials: {e}; {}", advice(source))
}

/// The error codes of refused credentials: a wrong password or user, none
/// given where one is required, an ACL user not allowed a command.
const CODES: [&str; 3] = ["WRONGPASS", "NOAUTH", "NOPERM"];

/// What Redis says instead of NOAUTH to a client that has not authenticated
/// and sends a command of more than 10 arguments (as move.lua's and
/// release.lua's calls are): a protocol error, and it hangs up.
const UNAUTHENTICATED: &str = "unauthenticated";

/// Whether Redis refused who we are (as opposed to being unreachable, or
/// refusing a command for what it does).
pub fn refused(e: &RedisError) -> bool {
    e.kind() == ErrorKind::AuthenticationFailed
        || e.code().is_some_and(|code| CODES.contains(&code))
        || e.detail().is_some_and(|d| d.contains(UNAUTHENTICATED))
}

/// The same, for an error known only by its text (the pool's: it keeps the
/// last connection error as a message).
pub fn refused_text(message: &str) -> bool {
    CODES.iter().any(|code| message.contains(code))
        || message.contains("AuthenticationFailed")
        || message.contains(UNAUTHENTICATED)
}
