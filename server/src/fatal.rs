//! Why the process cannot go on: a message and the exit code it means.
//!
//! One type for the server's start-up and for the operator commands, so the
//! exit code is decided where the failure is understood, not at each call
//! site, and a daemon's launcher reports exactly what the foreground would.
//! Exit codes: 2 for what only the operator can fix (the configuration file,
//! the command line), 1 for everything else.

use std::fmt;

/// What kind of failure, which fixes the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A configuration file the server cannot use (exit 2; restarting
    /// cannot fix it: systemd's RestartPreventExitStatus=2).
    Config,
    /// Bad command-line arguments (exit 2, as clap's own usage errors).
    Usage,
    /// Anything else that keeps it from running or a command from
    /// completing: Redis unreachable or refusing us, the pid file held (exit 1).
    Failed,
}

/// A failure that ends the process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fatal {
    pub kind: Kind,
    pub message: String,
}

impl Fatal {
    pub fn config(message: impl Into<String>) -> Fatal {
        Fatal { kind: Kind::Config, message: message.into() }
    }

    pub fn usage(message: impl Into<String>) -> Fatal {
        Fatal { kind: Kind::Usage, message: message.into() }
    }

    pub fn failed(message: impl Into<String>) -> Fatal {
        Fatal { kind: Kind::Failed, message: message.into() }
    }

    /// The process's exit code.
    pub fn code(&self) -> u8 {
        match self.kind {
            Kind::Config | Kind::Usage => 2,
            Kind::Failed => 1,
        }
    }
}

impl fmt::Display for Fatal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Fatal {}

impl From<delayer_protocol::conf::ConfError> for Fatal {
    fn from(e: delayer_protocol::conf::ConfError) -> Fatal {
        Fatal::config(e.to_string())
    }
}

/// An error with its causes, `outer: inner: innermost`, without repeats
/// (reqwest's "error sending request" says little; its source says why).
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut parts = vec![error.to_string()];
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = cause.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes() {
        assert_eq!(Fatal::config("x").code(), 2);
        assert_eq!(Fatal::usage("x").code(), 2);
        assert_eq!(Fatal::failed("x").code(), 1);
    }
}
