//! Logging: info lines to the access log, warnings and errors to the error
//! log, as Delayer 1.x splits them.
//!
//! Both also go to stdout / stderr (see [`init`]), each line as
//! `log_format` says (`logformat`: 1.x's text, or JSON). Log files can be reopened
//! under their absolute paths (on SIGHUP, after logrotate moved them).
//! Passwords never reach a log line: nothing here formats configuration
//! values.

use crate::config::Config;
use crate::fatal::Fatal;
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
    /// Opens `path` (the file's `key`), creating its directory; a failure
    /// is the configuration's to fix.
    fn open(path: &Path, key: &str, config: &Path) -> Result<LogFile, Fatal> {
        let failed = |what: String| Fatal::config(format!("{}: {what}", config.display()));
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir)
                .map_err(|e| failed(format!("cannot create the directory of {key} {}: {e}", dir.display())))?;
        }
        let file = append(path).map_err(|e| failed(format!("cannot open {key} {}: {e}", path.display())))?;
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
///
/// Info lines also go to stdout, warnings and errors to stderr: a server
/// run by hand (or by systemd, which collects them) shows what it does, and
/// a daemon about to detach tells its operator. Once detached, the daemon's
/// stdout and stderr are /dev/null, and only the files remain.
pub fn init(config: &Config) -> Result<LogFiles, Fatal> {
    let mut files = LogFiles::default();
    let access = fern::Dispatch::new().filter(|meta| meta.level() > Level::Warn).chain(std::io::stdout());
    let access = match &config.access_log {
        Some(path) => access.chain(files.add(path, "access_log", &config.path)?),
        None => access,
    };
    let errors = fern::Dispatch::new().level(LevelFilter::Warn).chain(std::io::stderr());
    let errors = match &config.error_log {
        Some(path) => errors.chain(files.add(path, "error_log", &config.path)?),
        None => errors,
    };

    // One shape for every destination (`logformat`).
    let format = config.log_format;
    fern::Dispatch::new()
        .format(move |out, message, record| {
            out.finish(format_args!("{}", format.line(std::time::SystemTime::now(), message, record)))
        })
        .level(config.log_level)
        // Dependencies' chatter is not the operator's business.
        .level_for("r2d2", LevelFilter::Warn)
        .chain(access)
        .chain(errors)
        .apply()
        .map_err(|e| Fatal::failed(format!("cannot install the logger: {e}")))?;
    Ok(files)
}

impl LogFiles {
    fn add(&mut self, path: &Path, key: &str, config: &Path) -> Result<Box<dyn Write + Send>, Fatal> {
        let file = LogFile::open(path, key, config)?;
        self.0.push(file.clone());
        Ok(Box::new(file))
    }
}
