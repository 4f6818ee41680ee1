//! Logging: info lines to the access log, warnings and errors to the error
//! log, as Delayer 1.x splits them.
//!
//! In the foreground both also go to stdout / stderr, so a server run by hand
//! (or by systemd, which collects them) shows what it does. Passwords never
//! reach a log line: nothing here formats configuration values.

use crate::config::Config;
use log::{Level, LevelFilter};
use std::fs;
use std::path::Path;

/// Installs the global logger.
pub fn init(config: &Config, foreground: bool) -> Result<(), String> {
    let access = fern::Dispatch::new().filter(|meta| meta.level() > Level::Warn);
    let access = match &config.access_log {
        Some(path) => access.chain(open(path, "access_log")?),
        None => access,
    };
    let errors = fern::Dispatch::new().level(LevelFilter::Warn);
    let errors = match &config.error_log {
        Some(path) => errors.chain(open(path, "error_log")?),
        None => errors,
    };
    let (access, errors) = if foreground || config.access_log.is_none() {
        (access.chain(std::io::stdout()), errors)
    } else {
        (access, errors)
    };
    let errors = if foreground || config.error_log.is_none() { errors.chain(std::io::stderr()) } else { errors };

    fern::Dispatch::new()
        .format(|out, message, record| {
            out.finish(format_args!(
                "[{}] [{}] {}",
                humantime::format_rfc3339_millis(std::time::SystemTime::now()),
                record.level(),
                message
            ))
        })
        .level(config.log_level)
        // Dependencies' chatter is not the operator's business.
        .level_for("r2d2", LevelFilter::Warn)
        .chain(access)
        .chain(errors)
        .apply()
        .map_err(|e| format!("cannot install the logger: {e}"))
}

fn open(path: &Path, key: &str) -> Result<fs::File, String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(|e| format!("cannot create the directory of {key} {}: {e}", dir.display()))?;
    }
    fern::log_file(path).map_err(|e| format!("cannot open {key} {}: {e}", path.display()))
}
