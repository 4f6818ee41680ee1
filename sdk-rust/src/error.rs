//! The crate's error type: every failure is a value the caller can match on.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What went wrong.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An argument broke a rule of the protocol: nothing was sent to Redis,
    /// or the script that checks it (a rate limit's, in flow.lua) refused it
    /// and wrote nothing.
    InvalidArgument(String),
    /// A configuration file could not be used.
    Config(delayer_protocol::conf::ConfError),
    /// Redis could not be reached, went away, timed out or refused the
    /// credentials. Transient for a worker: back off and call again (the
    /// next call reconnects).
    Connection(String),
    /// Redis answered with an error.
    Redis(redis::RedisError),
    /// Redis answered something the protocol does not allow.
    Protocol(String),
    /// A push with [`crate::Job::if_absent`] found ids already taken and
    /// wrote nothing for them (push_many wrote the others all the same).
    IdTaken(IdTaken),
    /// A durable push (a client made with `durable(timeout)`) was written on
    /// the master, but no replica acknowledged it in time: a failover now
    /// could lose it.
    NotReplicated(NotReplicated),
}

impl From<delayer_protocol::op::Error> for Error {
    fn from(e: delayer_protocol::op::Error) -> Self {
        match e {
            delayer_protocol::op::Error::Invalid(e) => Error::InvalidArgument(e.0),
            delayer_protocol::op::Error::BadReply(m) => Error::Protocol(m),
        }
    }
}

/// The jobs a durable push wrote on the master without a replica's
/// acknowledgement within the timeout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotReplicated {
    /// The due time of every job written, in order.
    pub due: Vec<SystemTime>,
    /// How long Redis waited for a replica.
    pub timeout: Duration,
}

/// The ids a push "if absent" found taken, and what was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdTaken {
    /// Each taken id, in the order pushed, with the job holding it.
    pub taken: Vec<Taken>,
    /// One entry per job pushed, in order: its due time when it was written,
    /// `None` when its id was taken.
    pub due: Vec<Option<SystemTime>>,
}

/// A job id already held by a job (ids are global across topics in the
/// Delayer 1.x layout), as a push "if absent" found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    /// The id pushed.
    pub id: String,
    /// The topic of the job holding it ("" when unreadable).
    pub topic: String,
    /// That job's due time while it waits; `None` when it is not waiting
    /// (ready, reserved or dead).
    pub due: Option<SystemTime>,
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
            Error::IdTaken(t) => write!(f, "{t}"),
            Error::NotReplicated(n) => write!(
                f,
                "{} job(s) written on the master, but no replica acknowledged them within {} ms: a failover now \
                 could lose them",
                n.due.len(),
                n.timeout.as_millis()
            ),
        }
    }
}

/// `id "a" is taken (topic "sms", due at 1763750000.125); nothing was
/// written for it`, naming up to five ids.
impl fmt::Display for IdTaken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown: Vec<String> = self
            .taken
            .iter()
            .take(5)
            .map(|t| {
                let when = match t.due.and_then(|d| d.duration_since(UNIX_EPOCH).ok()) {
                    Some(d) => format!("due at {:.3}", d.as_secs_f64()),
                    None => "not waiting".into(),
                };
                format!("{:?} (topic {:?}, {when})", t.id, t.topic)
            })
            .collect();
        let more = self.taken.len().saturating_sub(5);
        let more = if more > 0 { format!(" and {more} more") } else { String::new() };
        match self.taken.len() {
            1 => write!(f, "id {} is taken; nothing was written for it", shown.join("")),
            n => write!(f, "{n} ids are taken: {}{more}; nothing was written for them", shown.join(", ")),
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

/// Whether `e` says the connection is gone (closed by Redis, reset, refused):
/// the cases a new connection may cure, as opposed to timeouts and replies.
pub(crate) fn is_lost_connection(e: &redis::RedisError) -> bool {
    e.is_connection_dropped() || e.is_connection_refusal()
}

/// Whether Redis refused a command because the connection never
/// authenticated: `NOAUTH`, or the protocol error Redis gives a client that
/// has not authenticated and sends a long command (it then hangs up); in a
/// pipeline's errors too.
fn needs_auth(e: &redis::RedisError) -> bool {
    let says =
        |code: &str, detail: Option<&str>| code == "NOAUTH" || detail.is_some_and(|d| d.contains("unauthenticated"));
    if let Some(errors) = e.clone().into_server_errors() {
        return errors.iter().any(|(_, e)| says(e.code(), e.details()));
    }
    says(e.code().unwrap_or(""), e.detail())
}

/// How [`Error::Connection`] begins when Redis refused the credentials.
const AUTH_FAILED: &str = "authentication failed";
/// How it begins when Redis wants credentials and none were given.
const AUTH_REQUIRED: &str = "authentication required";

impl Error {
    /// Whether Redis refused who we are: a wrong password or user, or none
    /// given where one is required. Retrying cannot fix it; the settings can.
    pub fn is_refused_credentials(&self) -> bool {
        match self {
            Error::Connection(why) => why.starts_with(AUTH_FAILED) || why.starts_with(AUTH_REQUIRED),
            Error::Redis(e) => e.kind() == redis::ErrorKind::AuthenticationFailed || needs_auth(e),
            _ => false,
        }
    }
}

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        // No secret can be in these messages: Redis's errors never echo a
        // password, and the URL is not part of them.
        if e.kind() == redis::ErrorKind::AuthenticationFailed {
            return Error::Connection(format!("{AUTH_FAILED}: Redis refused the credentials ({e})"));
        }
        if needs_auth(&e) {
            return Error::Connection(format!(
                "{AUTH_REQUIRED}: Redis wants a password and none was given \
                 (put it in the URL, redis://:PASSWORD@host:port/, or in [redis] password)"
            ));
        }
        if let Some(why) = refused_argument(&e) {
            return Error::InvalidArgument(why);
        }
        let connection_trouble = e.is_io_error() || is_lost_connection(&e) || e.is_timeout();
        if connection_trouble {
            Error::Connection(e.to_string())
        } else {
            Error::Redis(e)
        }
    }
}

/// How a script refuses its input: `ERR invalid argument: <why>`
/// (PROTOCOL.md). Some rules live only in the script, so that every SDK, the
/// CLI and HTTP refuse alike; the SDK raises them as its own
/// [`Error::InvalidArgument`], as if it had checked them.
const REFUSED_ARGUMENT: &str = "invalid argument: ";

/// The why of a script's refusal of its input, when `e` is one.
fn refused_argument(e: &redis::RedisError) -> Option<String> {
    if e.code() != Some("ERR") {
        return None;
    }
    e.detail()?.strip_prefix(REFUSED_ARGUMENT).map(str::to_string)
}

impl From<r2d2::Error> for Error {
    fn from(e: r2d2::Error) -> Self {
        Error::Connection(e.to_string())
    }
}

impl From<delayer_protocol::conf::ConfError> for Error {
    fn from(e: delayer_protocol::conf::ConfError) -> Self {
        Error::Config(e)
    }
}
