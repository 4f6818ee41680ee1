//! `delayer health`: asks a running server's probe whether it is alive (or,
//! with `--ready`, ready), for a container's HEALTHCHECK or a script. A
//! minimal image has no curl, and the binary is already there.
//!
//! One GET with a short timeout, no redirects, no proxy (the probe is local
//! and a proxy from the environment would answer for it); exit 0 on 200, 1
//! on anything else, with the reason on stdout (a container runtime keeps
//! the check's output). The URL, unless given, comes from the configuration
//! the server reads (the file and the `DELAYER_*` environment, which a
//! container's check inherits): `metrics_addr` (`/healthz`, `/readyz`), else
//! `http_addr` (`/v1/health`, `/v1/ready`); an unspecified address
//! (`0.0.0.0`, `::`) is asked on loopback. Whatever goes wrong, even a
//! configuration that cannot be read, exits 1: a health check's 2 is
//! reserved (Docker), and the server would not run on it either.

use crate::config::Config;
use crate::fatal::Fatal;
use reqwest::{redirect, Client, Url};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

/// Most bytes of the probe's answer shown: its reason, not a page.
const SHOWN: usize = 1024;

/// The probe to ask: the `--ready` one or the liveness one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    Live,
    Ready,
}

/// Runs the check: prints what the probe said, `Err` (exit 1) unless 200.
pub fn run(configuration: Option<&Path>, probe: Probe, url: Option<&str>, timeout: Duration) -> Result<(), Fatal> {
    let url = match url {
        Some(url) => Url::parse(url).map_err(|e| Fatal::failed(format!("unhealthy: {url:?} is not a URL: {e}")))?,
        None => {
            let config = Config::load(configuration).map_err(|e| Fatal::failed(format!("unhealthy: {e}")))?;
            probe_url(&config, probe).map_err(|e| Fatal::failed(format!("unhealthy: {e}")))?
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Fatal::failed(format!("unhealthy: cannot start the runtime: {e}")))?;
    let (status, said) =
        runtime.block_on(ask(url.clone(), timeout)).map_err(|e| Fatal::failed(format!("unhealthy: {e}")))?;
    let line = format!("{}: HTTP {status}{}{said}", redacted(&url), if said.is_empty() { "" } else { ": " });
    if status == 200 {
        crate::output::line(format_args!("healthy: {line}"))
    } else {
        Err(Fatal::failed(format!("unhealthy: {line}")))
    }
}

/// The configuration's probe URL: on `metrics_addr`, else on `http_addr`.
pub fn probe_url(config: &Config, probe: Probe) -> Result<Url, String> {
    let (addr, path) = match (config.metrics_addr, &config.http, probe) {
        (Some(addr), _, Probe::Live) => (addr, "/healthz"),
        (Some(addr), _, Probe::Ready) => (addr, "/readyz"),
        (None, Some(http), Probe::Live) => (http.addr, "/v1/health"),
        (None, Some(http), Probe::Ready) => (http.addr, "/v1/ready"),
        (None, None, _) => {
            return Err(format!(
                "{}: neither metrics_addr nor http_addr is set, so the server has no probe to ask \
                 (set one, or give the probe's URL)",
                config.path.display()
            ))
        }
    };
    Url::parse(&format!("http://{}{path}", reachable(addr))).map_err(|e| format!("no probe URL for {addr}: {e}"))
}

/// Where a server listening on `addr` is reached from this host: an
/// unspecified address (every interface) on loopback.
fn reachable(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => SocketAddr::new(Ipv4Addr::LOCALHOST.into(), addr.port()),
        IpAddr::V6(ip) if ip.is_unspecified() => SocketAddr::new(Ipv6Addr::LOCALHOST.into(), addr.port()),
        _ => addr,
    }
}

/// One GET: the status and the start of the answer, printable on one line.
async fn ask(url: Url, timeout: Duration) -> Result<(u16, String), String> {
    let client = Client::builder()
        .redirect(redirect::Policy::none())
        .no_proxy()
        .timeout(timeout)
        .build()
        .map_err(|e| format!("cannot start the HTTP client: {}", crate::fatal::chain(&e)))?;
    let shown = redacted(&url);
    let failed = |e: reqwest::Error| match e.is_timeout() {
        true => format!("{shown}: no answer within {} s", timeout.as_secs_f64()),
        false => format!("{shown}: {}", crate::fatal::chain(&e.without_url())),
    };
    let mut answer = client.get(url).send().await.map_err(failed)?;
    let status = answer.status().as_u16();
    let mut body = Vec::new();
    while body.len() < SHOWN {
        match answer.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) => break,
            // The status is the answer; a body cut off only shortens the reason.
            Err(_) => break,
        }
    }
    Ok((status, one_line(&body)))
}

/// `body`'s first [`SHOWN`] bytes as one printable line (it is the probe's
/// input to us: control characters would forge lines in the output).
fn one_line(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(SHOWN)]);
    let line: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    line.trim().to_string()
}

/// The URL as printed: without a user name or password.
fn redacted(url: &Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use delayer_protocol::conf::ConfFile;

    fn config(text: &str) -> Config {
        let file = ConfFile::parse(std::path::PathBuf::from("/etc/delayer/delayer.conf"), text).expect("parses");
        Config::from_file(&file).expect("valid")
    }

    #[test]
    fn metrics_addr_first_then_http_addr() {
        let both = config("[delayer]\nmetrics_addr = 127.0.0.1:9464\nhttp_addr = 127.0.0.1:8080\n");
        assert_eq!(probe_url(&both, Probe::Ready).expect("url").as_str(), "http://127.0.0.1:9464/readyz");
        assert_eq!(probe_url(&both, Probe::Live).expect("url").as_str(), "http://127.0.0.1:9464/healthz");
        let api = config("[delayer]\nhttp_addr = 127.0.0.1:8080\n");
        assert_eq!(probe_url(&api, Probe::Ready).expect("url").as_str(), "http://127.0.0.1:8080/v1/ready");
        assert_eq!(probe_url(&api, Probe::Live).expect("url").as_str(), "http://127.0.0.1:8080/v1/health");
    }

    #[test]
    fn every_interface_is_asked_on_loopback() {
        let v4 = config("[delayer]\nmetrics_addr = 0.0.0.0:9464\nmetrics_allow_remote = yes\n");
        assert_eq!(probe_url(&v4, Probe::Ready).expect("url").as_str(), "http://127.0.0.1:9464/readyz");
        let v6 = config("[delayer]\nmetrics_addr = [::]:9464\nmetrics_allow_remote = yes\n");
        assert_eq!(probe_url(&v6, Probe::Ready).expect("url").as_str(), "http://[::1]:9464/readyz");
    }

    #[test]
    fn no_address_no_probe() {
        let why = probe_url(&config("[delayer]\n"), Probe::Ready).expect_err("nothing to ask");
        assert!(why.contains("neither metrics_addr nor http_addr"), "{why}");
        assert!(why.contains("/etc/delayer/delayer.conf"), "{why}");
    }

    #[test]
    fn the_answer_is_one_bounded_line() {
        assert_eq!(one_line(b"{\"status\":\"ok\"}\n"), "{\"status\":\"ok\"}");
        assert_eq!(one_line(b"a\r\nforged: line\x1b[2J"), "a  forged: line [2J");
        assert_eq!(one_line(&[b'x'; 4096]).len(), SHOWN);
        assert_eq!(one_line(b"\xff\xfe"), "\u{fffd}\u{fffd}");
    }

    fn asked(url: &str, timeout: Duration) -> Result<(u16, String), String> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        // The test's own bound: a missing timeout fails it instead of hanging it.
        runtime.block_on(async {
            let url = Url::parse(url).expect("url");
            tokio::time::timeout(Duration::from_secs(10), ask(url, timeout))
                .await
                .unwrap_or_else(|_| Err("the test's own 10 s bound ran out".to_string()))
        })
    }

    #[test]
    fn a_probe_that_never_answers_is_given_up_on() {
        // Accepted by the kernel (the backlog), never answered.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/readyz", silent.local_addr().expect("addr"));
        let why = asked(&url, Duration::from_millis(300)).expect_err("no answer");
        assert!(why.contains("no answer within 0.3 s"), "{why}");
    }

    #[test]
    fn a_503_is_reported_with_the_start_of_its_reason() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/readyz", listener.local_addr().expect("addr"));
        let server = std::thread::spawn(move || {
            use std::io::{Read, Write};
            let (mut conn, _) = listener.accept().expect("accept");
            let mut head = [0u8; 1024];
            let _ = conn.read(&mut head);
            let body = format!("{{\"reason\":\"redis: down\"}}{}", "x".repeat(100_000));
            let answer = format!("HTTP/1.1 503 Service Unavailable\r\ncontent-length: {}\r\n\r\n{body}", body.len());
            let _ = conn.write_all(answer.as_bytes());
        });
        let (status, said) = asked(&url, Duration::from_secs(5)).expect("answered");
        assert_eq!(status, 503);
        assert!(said.starts_with("{\"reason\":\"redis: down\"}xxx"), "{said}");
        assert!(said.len() <= SHOWN, "{}", said.len());
        server.join().expect("server");
    }

    #[test]
    fn credentials_are_not_printed() {
        let url = Url::parse("http://user:secret@127.0.0.1:1/readyz").expect("url");
        assert_eq!(redacted(&url), "http://127.0.0.1:1/readyz");
    }
}
