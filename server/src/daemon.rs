//! Daemon mode (`-d`): detaching from the terminal without leaving the
//! operator in the dark.
//!
//! The launching process does not exit as soon as it has forked: it waits
//! until the daemon says it runs (pid written, signals and metrics set up)
//! or why it cannot, over a pipe, and exits 0 or with the daemon's exit code
//! and reason on stderr. A daemon that dies without a word (killed, a panic)
//! closes the pipe, and the launcher exits 1. So `delayer -d` succeeds only
//! for a daemon that is running.
//!
//! Everything the daemon needs is checked and opened before detaching, and
//! every path is absolute by then, because the daemon runs in `/`.

use crate::fatal::{Fatal, Kind};
use std::io::{PipeReader, PipeWriter, Read, Write};

/// The daemon's line to its launcher (nobody in the foreground).
pub struct Launcher(Option<PipeWriter>);

/// What the daemon says when it runs.
const READY: &str = "ready";

impl Launcher {
    /// In the foreground there is nobody to tell.
    pub fn foreground() -> Launcher {
        Launcher(None)
    }

    /// The daemon runs: the launcher exits 0.
    pub fn ready(&mut self) {
        self.send(READY);
    }

    /// The daemon cannot run: the launcher prints why and exits with its code.
    pub fn failed(&mut self, fatal: &Fatal) {
        self.send(&format!("{} {}", fatal.code(), fatal.message));
    }

    /// Says it, once; the launcher reads until the pipe closes.
    fn send(&mut self, what: &str) {
        if let Some(mut pipe) = self.0.take() {
            // Nothing to do if the launcher is gone (killed): the daemon goes on.
            let _ = pipe.write_all(what.as_bytes());
        }
    }
}

/// Forks the daemon. Returns in the daemon only, with its line to the
/// launcher; the launching process waits for the daemon's word and exits.
///
/// Call it before any thread is started: only the calling thread survives a
/// fork.
pub fn detach() -> Result<Launcher, Fatal> {
    let (reader, writer) = std::io::pipe().map_err(|e| Fatal::failed(format!("cannot daemonize: {e}")))?;
    match daemonize::Daemonize::new().execute() {
        daemonize::Outcome::Parent(Err(e)) => Err(Fatal::failed(format!("cannot daemonize: {e}"))),
        daemonize::Outcome::Parent(Ok(_)) => {
            drop(writer); // so the pipe closes when the daemon is done with it
            let code = match wait_for_word(reader) {
                Ok(()) => 0,
                Err(fatal) => {
                    eprintln!("delayer: {fatal}");
                    fatal.code()
                }
            };
            // Not a return to main: the pid file and log files belong to the
            // daemon now, and must not be cleaned up here.
            std::process::exit(i32::from(code))
        }
        daemonize::Outcome::Child(Err(e)) => {
            let fatal = Fatal::failed(format!("cannot daemonize: {e}"));
            Launcher(Some(writer)).failed(&fatal);
            std::process::exit(i32::from(fatal.code()))
        }
        daemonize::Outcome::Child(Ok(_)) => {
            drop(reader);
            Ok(Launcher(Some(writer)))
        }
    }
}

/// Reads the daemon's word until it closes the pipe.
fn wait_for_word(mut reader: PipeReader) -> Result<(), Fatal> {
    let mut word = String::new();
    if let Err(e) = reader.read_to_string(&mut word) {
        return Err(Fatal::failed(format!("lost touch with the daemon while it started: {e}")));
    }
    parse_word(&word)
}

/// `ready`, or `<exit code> <message>`; nothing at all when the daemon died
/// before saying a word.
fn parse_word(word: &str) -> Result<(), Fatal> {
    if word == READY {
        return Ok(());
    }
    let died = || Fatal::failed("the daemon exited while starting; see its error_log");
    let (code, message) = word.split_once(' ').ok_or_else(died)?;
    let kind = match code {
        "2" => Kind::Config,
        "1" => Kind::Failed,
        _ => return Err(died()),
    };
    Err(Fatal { kind, message: message.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemons_word_carries_its_exit_code_and_reason() {
        assert_eq!(parse_word("ready"), Ok(()));
        let config = parse_word("2 /etc/delayer.conf:3: bad").expect_err("config");
        assert_eq!((config.code(), config.message.as_str()), (2, "/etc/delayer.conf:3: bad"));
        assert_eq!(parse_word("1 redis refused").expect_err("failed").code(), 1);
        let silent = parse_word("").expect_err("died");
        assert!(silent.message.contains("exited while starting"), "{silent}");
    }
}
