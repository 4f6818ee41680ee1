//! The `[delayer]` keys of the HTTP API: where it listens, the tokens it
//! takes, the names it answers to, its sessions and its limits. Checked when the file is read, so a bad value stops the server
//! with the file, key and line (exit 2), as every other key does.
//!
//! The API can push, remove and purge jobs, so it listens on loopback unless
//! the file says `http_allow_remote = yes`, and then only with a token: an
//! address typed by mistake never opens the queue to a network.

use delayer_protocol::conf::{ConfError, ConfFile};
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::time::Duration;

/// Shortest token taken: guessing one must be hopeless.
pub const MIN_TOKEN_LEN: usize = 16;

/// A bearer token. Never printed: `Debug` shows `<redacted>`.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    #[cfg(test)]
    pub fn from_test(value: &str) -> Token {
        Token(value.to_string())
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// The HTTP API's settings; `None` from [`HttpSettings::from_file`] when
/// `http_addr` is not set (the API is off).
#[derive(Debug, Clone)]
pub struct HttpSettings {
    pub addr: SocketAddr,
    /// Needed for everything but health, when set.
    pub token: Option<Token>,
    /// Also accepted, for reading (GET) only.
    pub read_token: Option<Token>,
    /// Host names the API answers to besides IP addresses and `localhost`
    /// (`http_allowed_hosts`, lowercase): a request naming another host may
    /// come from a page that rebound its name to this machine.
    pub allowed_hosts: Vec<String>,
    /// Peers whose `X-Forwarded-For` and `X-Forwarded-Proto` are believed
    /// (`http_trusted_proxies`): a reverse proxy in front of the API.
    pub trusted_proxies: Vec<IpAddr>,
    /// Signs the dashboard's sessions (`http_session_secret`); without it a
    /// key made at start, so a restart ends every session.
    pub session_secret: Option<Token>,
    /// How long a dashboard session lasts (`http_session_lifetime`).
    pub session_lifetime: Duration,
    /// Longest a request waits on Redis before a 503 (`http_redis_timeout`);
    /// blocking pops wait their `wait` plus this.
    pub redis_timeout: Duration,
    /// Most blocking pops and reserves waiting at once (`http_max_waiting`):
    /// each holds a Redis connection of its own.
    pub max_waiting: usize,
    /// The socket's limits (shared with the metrics endpoint's).
    pub limits: Limits,
}

/// What one server socket takes (the API's and the metrics endpoint's):
/// `http_max_connections`, `http_header_timeout`, `http_body_timeout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most connections open at once; past it a new one is closed at once.
    pub max_connections: usize,
    /// From the moment the server waits for a request (a new connection, or
    /// one idle after an answer) until its whole head has arrived.
    pub header_timeout: Duration,
    /// The whole request body; also the longest a response waits for the
    /// client to take its bytes.
    pub body_timeout: Duration,
}

/// At most this many connections to the metrics endpoint: a scraper or two
/// and an operator's curl, never a crowd.
pub const METRICS_MAX_CONNECTIONS: usize = 64;

impl Limits {
    pub fn from_file(file: &ConfFile) -> Result<Limits, ConfError> {
        let max_connections = file.ranged("delayer", "http_max_connections", 1, 100_000, "connections")?.unwrap_or(512);
        Ok(Limits {
            max_connections: max_connections as usize,
            header_timeout: seconds(file, "http_header_timeout", 1, 3600, 10)?,
            body_timeout: seconds(file, "http_body_timeout", 1, 3600, 30)?,
        })
    }

    /// The metrics endpoint's: the same timeouts, fewer connections.
    pub fn for_metrics(self) -> Limits {
        Limits { max_connections: self.max_connections.min(METRICS_MAX_CONNECTIONS), ..self }
    }
}

impl HttpSettings {
    pub fn from_file(file: &ConfFile) -> Result<Option<HttpSettings>, ConfError> {
        let section = Some("delayer");
        let remote = file.yes_no("delayer", "http_allow_remote")?;
        let token = read_token_key(file, "http_token")?;
        let read_token = read_token_key(file, "http_read_token")?;
        let session_secret = read_token_key(file, "http_session_secret")?;
        let allowed_hosts = host_names(file)?;
        let trusted_proxies = list(file, "http_trusted_proxies", "IP addresses such as 127.0.0.1, ::1")?;
        let session_lifetime = seconds(file, "http_session_lifetime", 60, 31_536_000, 43_200)?;
        let redis_timeout = seconds(file, "http_redis_timeout", 1, 300, 5)?;
        let max_waiting = file.ranged("delayer", "http_max_waiting", 1, 10_000, "requests")?.unwrap_or(100) as usize;
        let limits = Limits::from_file(file)?;
        let Some(addr) = file.parse_value::<SocketAddr>("delayer", "http_addr", "an address such as 127.0.0.1:8080")?
        else {
            return Ok(None);
        };
        if !addr.ip().is_loopback() {
            if !remote {
                return Err(file.error(
                    section,
                    Some("http_addr"),
                    format!(
                        "{addr} is not a loopback address; the API can push and purge jobs, so listening beyond this \
                         machine needs http_allow_remote = yes (and http_token)"
                    ),
                ));
            }
            if token.is_none() {
                return Err(file.error(
                    section,
                    Some("http_token"),
                    "a non-loopback http_addr needs http_token: anyone who reaches it could change every job",
                ));
            }
        }
        if read_token.is_some() && token.is_none() {
            return Err(file.error(
                section,
                Some("http_read_token"),
                "http_read_token without http_token would leave writing open to anyone; set http_token too",
            ));
        }
        if read_token.is_some() && read_token == token {
            return Err(file.error(section, Some("http_read_token"), "must differ from http_token"));
        }
        if session_secret.is_some() && (session_secret == token || session_secret == read_token) {
            return Err(file.error(section, Some("http_session_secret"), "must differ from the tokens"));
        }
        Ok(Some(HttpSettings {
            addr,
            token,
            read_token,
            allowed_hosts,
            trusted_proxies,
            session_secret,
            session_lifetime,
            redis_timeout,
            max_waiting,
            limits,
        }))
    }
}

/// A whole number of seconds within `min..=max` (absent: `default`).
fn seconds(file: &ConfFile, key: &str, min: u64, max: u64, default: u64) -> Result<Duration, ConfError> {
    Ok(Duration::from_secs(file.ranged("delayer", key, min, max, "seconds")?.unwrap_or(default)))
}

/// A list of `T`, separated by commas or spaces (absent: empty).
fn list<T: FromStr>(file: &ConfFile, key: &str, expected: &str) -> Result<Vec<T>, ConfError> {
    let raw = file.get("delayer", key).unwrap_or("");
    raw.split([',', ' ', '\t'])
        .filter(|item| !item.is_empty())
        .map(|item| {
            item.parse()
                .map_err(|_| file.error(Some("delayer"), Some(key), format!("{item:?} is not one of {expected}")))
        })
        .collect()
}

/// `http_allowed_hosts`: DNS names (letters, digits, `-` and `.`), no port,
/// no wildcard: each is a name this server is reached by.
fn host_names(file: &ConfFile) -> Result<Vec<String>, ConfError> {
    let names: Vec<String> = list(file, "http_allowed_hosts", "host names such as delayer.example.com")?;
    names
        .into_iter()
        .map(|name| {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            let valid = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
            if valid {
                Ok(name)
            } else {
                Err(file.error(
                    Some("delayer"),
                    Some("http_allowed_hosts"),
                    format!("{name:?} is not a host name (letters, digits, - and .; no port, no wildcard)"),
                ))
            }
        })
        .collect()
}

/// A token key: at least [`MIN_TOKEN_LEN`] characters that fit a header and
/// a cookie unquoted (letters, digits and `-._~+/=`). The value is never
/// repeated in the error.
fn read_token_key(file: &ConfFile, key: &str) -> Result<Option<Token>, ConfError> {
    let Some(value) = file.string("delayer", key) else { return Ok(None) };
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-._~+/=".contains(c);
    if value.len() < MIN_TOKEN_LEN || !value.chars().all(allowed) {
        return Err(file.error(
            Some("delayer"),
            Some(key),
            format!(
                "a token must be at least {MIN_TOKEN_LEN} characters of letters, digits and -._~+/= (for example \
                 the output of `openssl rand -hex 32`)"
            ),
        ));
    }
    Ok(Some(Token(value)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn parse(text: &str) -> Result<Option<HttpSettings>, ConfError> {
        HttpSettings::from_file(&ConfFile::parse(PathBuf::from("/d/delayer.conf"), text).expect("parses"))
    }

    const T: &str = "0123456789abcdef0123";

    #[test]
    fn off_unless_an_address_is_given() {
        assert!(parse("[delayer]\n").expect("valid").is_none());
        let s = parse("[delayer]\nhttp_addr = 127.0.0.1:8080\n").expect("valid").expect("on");
        assert_eq!((s.addr.port(), s.token.is_none()), (8080, true));
        assert!(parse("[delayer]\nhttp_addr = [::1]:0\n").expect("valid").is_some());
    }

    #[test]
    fn remote_needs_saying_so_and_a_token() {
        let e = parse("[delayer]\nhttp_addr = 0.0.0.0:8080\n").expect_err("remote");
        assert!(e.to_string().contains("http_allow_remote = yes"), "{e}");
        assert_eq!((e.key.as_deref(), e.line), (Some("http_addr"), Some(2)));
        let e = parse("[delayer]\nhttp_addr = 0.0.0.0:8080\nhttp_allow_remote = yes\n").expect_err("no token");
        assert_eq!(e.key.as_deref(), Some("http_token"));
        let ok = format!("[delayer]\nhttp_addr = 0.0.0.0:8080\nhttp_allow_remote = yes\nhttp_token = {T}\n");
        assert!(parse(&ok).expect("valid").is_some());
        assert!(parse("[delayer]\nhttp_allow_remote = maybe\n").is_err());
    }

    #[test]
    fn tokens_are_checked_and_never_shown() {
        let e = parse("[delayer]\nhttp_addr = 127.0.0.1:1\nhttp_token = short-secret\n").expect_err("short");
        assert!(!e.to_string().contains("short-secret"), "{e}");
        let e = parse("[delayer]\nhttp_token = has;semicolon0123456789\n").expect_err("bad char");
        assert!(!e.to_string().contains("semicolon"), "{e}");
        let e = parse(&format!("[delayer]\nhttp_addr = 127.0.0.1:1\nhttp_read_token = {T}\n")).expect_err("alone");
        assert_eq!(e.key.as_deref(), Some("http_read_token"));
        let same = format!("[delayer]\nhttp_addr = 127.0.0.1:1\nhttp_token = {T}\nhttp_read_token = {T}\n");
        assert!(parse(&same).is_err());
        let s = parse(&format!("[delayer]\nhttp_addr = 127.0.0.1:1\nhttp_token = {T}\n")).expect("ok").expect("on");
        assert!(!format!("{s:?}").contains(T));
    }
}
