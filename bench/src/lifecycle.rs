//! The lifecycle-cost table (issue 21): Redis's time and memory per job,
//! step by step, beside BullMQ's in the same run. `bench/lifecycle_cost.py`
//! does the work (it drives the Python SDK as applications do, and starts
//! redis-servers of its own); this runs it with the checkout's SDK and the
//! server under test, and keeps its markdown for the report.

use std::path::Path;
use std::process::Command;

/// The script's markdown report, or why it did not run.
pub fn run(root: &Path, bin: &Path, quick: bool, bullmq: bool) -> Result<String, String> {
    let python = root.join(".venv/bin/python");
    if !python.exists() {
        return Err(format!("no {} (tools/install-deps.sh makes it)", python.display()));
    }
    let script = root.join("bench/lifecycle_cost.py");
    let mut cmd = Command::new(&python);
    cmd.arg(&script).arg("--delayer-bin").arg(bin);
    cmd.env("PYTHONPATH", root.join("sdk-python/src"));
    if quick {
        cmd.arg("--quick");
    }
    if !bullmq {
        cmd.arg("--no-bullmq");
    }
    let out = cmd.output().map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string();
        return Err(format!("{} failed: {last}", script.display()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}
