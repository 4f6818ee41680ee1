//! The crate's error type: every failure is a value the caller can match on.

use std::fmt;

/// What went wrong.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An argument broke a rule of the protocol; nothing was sent to Redis.
    InvalidArgument(String),
    /// A configuration file could not be used.
    Config(crate::conf::ConfError),
    /// Redis could not be reached or refused us (connect, auth, timeout).
    Connection(String),
    /// Redis answered with an error.
    Redis(redis::RedisError),
    /// Redis answered something the protocol does not allow.
    Protocol(String),
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            Error::Config(e) => write!(f, "{e}"),
            Error::Connection(m) => write!(f, "cannot use Redis: {m}"),
            Error::Redis(e) => write!(f, "redis error: {e}"),
            Error::Protocol(m) => write!(f, "unexpected reply from Redis: {m}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Redis(e) => Some(e),
            Error::Config(e) => Some(e),
            _ => None,
        }
    }
}

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        let connection_trouble = e.is_io_error()
            || e.is_connection_refusal()
            || e.is_timeout()
            || e.is_connection_dropped()
            || e.kind() == redis::ErrorKind::AuthenticationFailed;
        if connection_trouble {
            Error::Connection(e.to_string())
        } else {
            Error::Redis(e)
        }
    }
}

impl From<r2d2::Error> for Error {
    fn from(e: r2d2::Error) -> Self {
        Error::Connection(e.to_string())
    }
}

impl From<crate::conf::ConfError> for Error {
    fn from(e: crate::conf::ConfError) -> Self {
        Error::Config(e)
    }
}
