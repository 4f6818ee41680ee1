//! The `[delayer]` keys of the HTTP API: where it listens and the tokens it
//! takes. Checked when the file is read, so a bad value stops the server
//! with the file, key and line (exit 2), as every other key does.
//!
//! The API can push, remove and purge jobs, so it listens on loopback unless
//! the file says `http_allow_remote = yes`, and then only with a token: an
//! address typed by mistake never opens the queue to a network.

use delayer::conf::{ConfError, ConfFile};
use std::fmt;
use std::net::SocketAddr;

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
}

impl HttpSettings {
    pub fn from_file(file: &ConfFile) -> Result<Option<HttpSettings>, ConfError> {
        let section = Some("delayer");
        let remote = match file.get("delayer", "http_allow_remote").unwrap_or("") {
            "" | "no" | "false" | "0" => false,
            "yes" | "true" | "1" => true,
            other => return Err(file.error(section, Some("http_allow_remote"), format!("{other:?} is not yes or no"))),
        };
        let token = read_token_key(file, "http_token")?;
        let read_token = read_token_key(file, "http_read_token")?;
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
        Ok(Some(HttpSettings { addr, token, read_token }))
    }
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
