//! Serving a router on a TCP socket with limits, for the API and the metrics
//! endpoint alike: a cap on open connections, a deadline for each request's
//! head (which also closes a connection left idle between requests), and a
//! deadline for a response the client does not take. The request body's
//! deadline is the API's (`guard::buffer`), where the body is read.
//!
//! Without them, idle connections held the process's file descriptors until
//! none was left for `/v1/health`, `/metrics` or Redis. hyper's HTTP/1 server
//! (already under axum) enforces the head's deadline (`header_read_timeout`,
//! which starts whenever it waits for a request); the cap is ours, as
//! neither axum nor hyper has one: past it a new connection is closed at
//! once (its descriptor held for microseconds), never left to pile up.

use crate::http::settings::Limits;
use crate::http::tally::Tally;
use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Sleep;
use tower::ServiceExt;

/// At most one line per this long about connections closed at the cap.
const REPORT_EVERY: Duration = Duration::from_secs(10);

/// Serves `app` on `listener` until the runtime stops. `name` starts the
/// log lines (`http`, `metrics`).
pub async fn serve(listener: TcpListener, app: Router, limits: Limits, name: &'static str) {
    let cap = Arc::new(Cap { open: AtomicUsize::new(0), limits, name, closed: Mutex::default() });
    let mut failing = Tally::default();
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors (EMFILE) or memory: wait a moment
                // rather than spin; said once per interval.
                if let Some(n) = failing.add(Instant::now(), REPORT_EVERY) {
                    log::warn!("{name}: cannot accept connections: {e} ({n} time(s) since the last report)");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(slot) = cap.take() else {
            drop(stream);
            continue;
        };
        // Small answers go out at once rather than wait for more to send.
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(Timed { stream, limit: limits.body_timeout, stalled: None });
        let app = app.clone();
        let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
            req.extensions_mut().insert(ConnectInfo(peer));
            app.clone().oneshot(req)
        });
        tokio::spawn(async move {
            let _slot = slot;
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .serve_connection(io, service);
            // A client that leaves, or a deadline passed: nothing to do but
            // close, which dropping does.
            if let Err(e) = connection.await {
                log::debug!("{name}: connection from {peer} ended: {e}");
            }
        });
    }
}

/// The open connections and their cap.
struct Cap {
    open: AtomicUsize,
    limits: Limits,
    name: &'static str,
    /// Connections closed at the cap since the last line about them.
    closed: Mutex<Tally>,
}

impl Cap {
    /// A slot for a new connection, or `None` at the cap (counted, and said
    /// at most once per [`REPORT_EVERY`]).
    fn take(self: &Arc<Self>) -> Option<Slot> {
        let max = self.limits.max_connections;
        let taken = self.open.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1));
        let mut closed = self.closed.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = Instant::now();
        if taken.is_err() {
            if let Some(n) = closed.add(now, REPORT_EVERY) {
                log::warn!(
                    "{}: {max} connections open, the cap (http_max_connections): closed {n} new connection(s) at once \
                     since the last report",
                    self.name
                );
            }
            return None;
        }
        if let Some(n) = closed.due(now, REPORT_EVERY) {
            log::warn!("{}: below the connection cap again; {n} more connection(s) were closed at the cap", self.name);
        }
        Some(Slot(self.clone()))
    }
}

/// One open connection; gives its slot back when dropped.
struct Slot(Arc<Cap>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A TCP stream whose writes fail once the client has taken no bytes for
/// `limit`: a client that asks and never reads must not hold a connection
/// (and its buffers) for ever.
struct Timed {
    stream: TcpStream,
    limit: Duration,
    /// Running while a write waits for the client.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl Timed {
    /// A write is waiting: `Ready(error)` once it has waited `limit`.
    fn waiting<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let limit = self.limit;
        let sleep = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                // Closed with a reset, not a FIN: a FIN would wait behind the
                // unsent bytes the client never takes, and the kernel would keep
                // the connection and its send buffer long after we dropped it.
                let _ = self.stream.set_zero_linger();
                Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "the client took no bytes")))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// A write's outcome, with the deadline kept while it waits.
    fn timed<T>(&mut self, cx: &mut Context<'_>, polled: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match polled {
            Poll::Pending => self.waiting(cx),
            done => {
                self.stalled = None;
                done
            }
        }
    }
}

impl AsyncRead for Timed {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Timed {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.timed(cx, polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.timed(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_flush(cx);
        this.timed(cx, polled)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.stream).poll_shutdown(cx);
        this.timed(cx, polled)
    }
}
