//! Standard output for the operator commands, written so that a reader who
//! hangs up early (`delayer stats | head -1`) ends nothing badly.
//!
//! Rust ignores SIGPIPE, so a write to a closed pipe fails with EPIPE, and
//! `println!` panics on it. Restoring SIGPIPE's default would end a command
//! quietly too, but also the server's and `delayer webhook`'s writes to a
//! peer that hung up (and a command's to a unix:// Redis), which must be
//! errors, not deaths. So every command writes through here instead
//! (`clippy::print_stdout` is denied crate-wide): once the reader is gone,
//! what is left to print is dropped and the command finishes as it would
//! have, with its exit code (0 when it succeeded, as `head` expects of the
//! writer). Any other failure to write (a full disk) fails the command.

use crate::fatal::Fatal;
use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once standard output's reader has gone: nothing more is written.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `text` to standard output as is.
pub fn print(text: &str) -> Result<(), Fatal> {
    if CLOSED.load(Ordering::Relaxed) {
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::BrokenPipe => {
            CLOSED.store(true, Ordering::Relaxed);
            Ok(())
        }
        Err(e) => Err(Fatal::failed(format!("cannot write to standard output: {e}"))),
    }
}

/// Writes `text` and a newline.
pub fn line(text: impl std::fmt::Display) -> Result<(), Fatal> {
    print(&format!("{text}\n"))
}

/// Writes a message to standard error, never failing: with no one left to
/// read it there is nowhere else to say it.
pub fn error(text: impl std::fmt::Display) {
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}
