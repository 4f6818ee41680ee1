//! Logging: info lines to the access log, warnings and errors to the error
//! log, as Delayer 1.x splits them.
//!
//! In the foreground both also go to stdout / stderr, so a server run by hand
//! (or by systemd, which collects them) shows what it does. Log files can be
//! reopened (on SIGHUP, after logrotate moved them). Passwords never reach a
//! log line: nothing here formats configuration values.

use crate::config::Config;
use log::{Level, LevelFilter};
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A log file that can be reopened under the same path.
#[derive(Clone)]
struct LogFile {
    path: PathBuf,
    file: Arc<Mutex<File>>,
}

impl LogFile {
    fn open(path: &Path, key: &str) -> Result<LogFile, String> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create the directory of {key} {}: {e}", dir.display()))?;
        }
        let file = append(path).map_err(|e| format!("cannot open {key} {}: {e}", path.display()))?;
        Ok(LogFile { path: path.to_path_buf(), file: Arc::new(Mutex::new(file)) })
    }

    fn reopen(&self) -> io::Result<()> {
        let fresh = append(&self.path)?;
        let mut file = self.file.lock().map_err(|_| io::Error::other("log file lock poisoned"))?;
        *file = fresh;
        Ok(())
    }
}

fn append(path: &Path) -> io::Result<File> {
    fs::OpenOptions::new().create(true).append(true).open(path)
}

impl Write for LogFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.lock().map_err(|_| io::Error::other("log file lock poisoned"))?.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.lock().map_err(|_| io::Error::other("log file lock poisoned"))?.flush()
    }
}

/// The open log files, to reopen on SIGHUP.
#[derive(Clone, Default)]
pub struct LogFiles(Vec<LogFile>);

impl LogFiles {
    /// Reopens every log file under its path; returns what failed.
    pub fn reopen(&self) -> Vec<String> {
        self.0.iter().filter_map(|f| f.reopen().err().map(|e| format!("{}: {e}", f.path.display()))).collect()
    }
}

/// Installs the global logger; returns its files, for reopening.
pub fn init(config: &Config, foreground: bool) -> Result<LogFiles, String> {
    let mut files = LogFiles::default();
    let access = fern::Dispatch::new().filter(|meta| meta.level() > Level::Warn);
    let access = match &config.access_log {
        Some(path) => access.chain(files.add(path, "access_log")?),
        None => access,
    };
    let errors = fern::Dispatch::new().level(LevelFilter::Warn);
    let errors = match &config.error_log {
        Some(path) => errors.chain(files.add(path, "error_log")?),
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
        .map_err(|e| format!("cannot install the logger: {e}"))?;
    Ok(files)
}

impl LogFiles {
    fn add(&mut self, path: &Path, key: &str) -> Result<Box<dyn Write + Send>, String> {
        let file = LogFile::open(path, key)?;
        self.0.push(file.clone());
        Ok(Box::new(file))
    }
}
