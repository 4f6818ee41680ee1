//! The pid file: it records the running server's pid and, being locked while
//! the server runs, keeps a second instance from starting on the same file.
//! It is removed when the server stops cleanly (SIGTERM, SIGINT).

use crate::fatal::Fatal;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// A locked pid file; unlocked and removed on drop.
#[derive(Debug)]
pub struct PidFile {
    file: File,
    path: PathBuf,
}

impl PidFile {
    /// Takes the lock on `path`, or says who holds it. Taken before
    /// daemonizing, so the refusal reaches the operator's terminal; the lock
    /// survives the fork because the child keeps the file open.
    pub fn lock(path: &Path) -> Result<PidFile, Fatal> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(|e| Fatal::failed(format!("cannot create {}: {e}", dir.display())))?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Fatal::failed(format!("cannot open pid file {}: {e}", path.display())))?;
        if file.try_lock().is_err() {
            let mut pid = String::new();
            let _ = file.read_to_string(&mut pid);
            return Err(Fatal::failed(format!(
                "another delayer (pid {}) is running with pid file {}",
                pid.trim(),
                path.display()
            )));
        }
        Ok(PidFile { file, path: path.to_path_buf() })
    }

    /// Writes this process's pid (call after daemonizing).
    pub fn write_pid(&mut self) -> Result<(), Fatal> {
        let write = |f: &mut File| -> std::io::Result<()> {
            f.set_len(0)?;
            f.seek(SeekFrom::Start(0))?;
            writeln!(f, "{}", std::process::id())?;
            f.sync_all()
        };
        write(&mut self.file).map_err(|e| Fatal::failed(format!("cannot write pid file {}: {e}", self.path.display())))
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}
