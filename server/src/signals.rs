//! The signals a long-running process of this binary obeys: SIGTERM and
//! SIGINT stop it, SIGHUP reopens its log files (for logrotate). Shared by
//! the server and `delayer webhook`, so both answer them alike.

use crate::logging::LogFiles;
use log::{error, info};
use tokio::signal::unix::{signal, Signal, SignalKind};

/// SIGTERM, SIGINT and SIGHUP, listened for from [`Signals::register`] on.
pub struct Signals {
    term: Signal,
    int: Signal,
    hup: Signal,
}

impl Signals {
    /// Starts listening: from here on, a SIGTERM no longer kills the
    /// process but waits for [`Signals::until_stop`]. Inside a runtime.
    pub fn register() -> std::io::Result<Signals> {
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// Reopens `log_files` on each SIGHUP until SIGTERM or SIGINT comes;
    /// returns that signal's name, for the caller to say what stopping means.
    pub async fn until_stop(mut self, log_files: LogFiles) -> &'static str {
        loop {
            tokio::select! {
                _ = self.term.recv() => return "SIGTERM",
                _ = self.int.recv() => return "SIGINT",
                _ = self.hup.recv() => {
                    let failed = log_files.reopen();
                    if failed.is_empty() {
                        info!("SIGHUP: log files reopened");
                    } else {
                        error!("SIGHUP: cannot reopen {}", failed.join(", "));
                    }
                }
            }
        }
    }
}
