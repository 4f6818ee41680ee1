//! Telling credentials Redis refuses from other failures. Retrying cannot
//! fix them, so at start they stop the server; once it runs (Redis restarted
//! with a new password) the log must say so rather than "unavailable".
//! The error texts are Redis's and redis-rs's: they never hold the password.

use redis::{ErrorKind, RedisError};

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
