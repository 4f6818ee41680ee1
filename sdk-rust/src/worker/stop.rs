//! Telling a worker to stop, from anywhere: a [`Stopper`] is a shared flag
//! that also wakes the workers waiting on it, and can be set by SIGTERM or
//! SIGINT, the way supervisors (systemd, Kubernetes) ask a process to end:
//! with or without the `aio` feature (signal-hook-registry, not tokio).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

type Waker = Box<dyn Fn() + Send + Sync>;

/// A worker's stop handle: cheap to clone; one stop reaches every worker
/// built [`with_stopper`](super::Worker::with_stopper) it.
#[derive(Clone, Default)]
pub struct Stopper {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    stopped: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
}

impl std::fmt::Debug for Stopper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stopper").field("stopped", &self.is_stopped()).finish()
    }
}

impl Stopper {
    /// A stopper not yet stopped.
    pub fn new() -> Stopper {
        Stopper::default()
    }

    /// Asks the workers to stop: they take no more jobs, give running
    /// handlers their grace period, and return from `run`.
    pub fn stop(&self) {
        self.inner.stopped.store(true, Ordering::SeqCst);
        let wakers = self.inner.wakers.lock().unwrap_or_else(|e| e.into_inner());
        wakers.iter().for_each(|wake| wake());
    }

    /// Whether [`Stopper::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.inner.stopped.load(Ordering::SeqCst)
    }

    /// Calls `wake` on stop (at once when already stopped).
    pub(crate) fn on_stop(&self, wake: impl Fn() + Send + Sync + 'static) {
        let mut wakers = self.inner.wakers.lock().unwrap_or_else(|e| e.into_inner());
        if self.is_stopped() {
            wake();
        }
        wakers.push(Box::new(wake));
    }

    /// Stops on the first SIGTERM or SIGINT, from a thread of its own (any
    /// worker, sync or async; no feature needed). Fails when the signal
    /// handlers cannot be set. The handlers stay for the process's life, so
    /// a second signal does not kill it mid-grace either.
    #[cfg(unix)]
    pub fn stop_on_signals(&self) -> crate::Result<()> {
        use std::io::{Read, Write};
        use std::os::unix::net::UnixStream;
        let failed = |e: std::io::Error| crate::Error::InvalidArgument(format!("cannot listen for signals: {e}"));
        // The handler may only do what is async-signal-safe: it writes a
        // byte (write(2)) to a socket the thread below waits on.
        let (mut heard, tell) = UnixStream::pair().map_err(failed)?;
        tell.set_nonblocking(true).map_err(failed)?;
        let tell = Arc::new(tell);
        for signal in [libc::SIGTERM, libc::SIGINT] {
            let tell = tell.clone();
            // SAFETY: the action allocates nothing and takes no lock: one
            // non-blocking write(2), whose failure (a full buffer: a byte is
            // already waiting) is ignored.
            let action = move || {
                let _ = (&*tell).write(&[1]);
            };
            unsafe { signal_hook_registry::register(signal, action) }.map_err(failed)?;
        }
        let stopper = self.clone();
        std::thread::Builder::new()
            .name("delayer-signals".into())
            .spawn(move || {
                let mut byte = [0u8];
                // Ok or Err, a read that returns means a signal (or a
                // socket gone, which cannot happen while `tell` lives).
                while let Err(e) = heard.read_exact(&mut byte) {
                    if e.kind() != std::io::ErrorKind::Interrupted {
                        break;
                    }
                }
                stopper.stop();
            })
            .map_err(|e| crate::Error::InvalidArgument(format!("cannot start the signal thread: {e}")))?;
        Ok(())
    }
}

/// SIGTERM and SIGINT, listened for.
#[cfg(all(unix, feature = "aio"))]
pub(crate) struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

#[cfg(all(unix, feature = "aio"))]
impl Signals {
    pub(crate) fn new() -> std::io::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals { term: signal(SignalKind::terminate())?, int: signal(SignalKind::interrupt())? })
    }

    /// The next SIGTERM or SIGINT.
    pub(crate) async fn recv(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}
