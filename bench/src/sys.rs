//! The machine and the processes measured: what /proc and a few commands say.

use std::process::Command;

/// What the report says about the machine, and when it ran.
pub struct Machine {
    pub date: String,
    pub nproc: String,
    pub cpu_model: String,
    pub redis_version: String,
    pub kernel: String,
    pub loadavg: String,
}

fn output(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

impl Machine {
    pub fn probe() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        let redis_version = output("redis-server", &["--version"])
            .and_then(|v| v.split_whitespace().find(|w| w.starts_with("v=")).map(|w| w[2..].to_string()))
            .unwrap_or_else(|| "unknown".into());
        Machine {
            date: output("date", &["-u", "+%Y-%m-%d %H:%M:%S UTC"]).unwrap_or_else(|| "unknown".into()),
            nproc: output("nproc", &[]).unwrap_or_else(|| "?".into()),
            cpu_model,
            redis_version,
            kernel: output("uname", &["-r"]).unwrap_or_else(|| "?".into()),
            loadavg: loadavg(),
        }
    }
}

/// Clock ticks per second, as `getconf CLK_TCK` says (100 almost everywhere).
pub fn clk_tck() -> f64 {
    output("getconf", &["CLK_TCK"]).and_then(|s| s.parse().ok()).unwrap_or(100.0)
}

/// utime + stime of a process, in clock ticks (/proc/<pid>/stat fields 14, 15).
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); utime is field 14, stime 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// A field of /proc/<pid>/status in kB (VmHWM: peak RSS; VmRSS: current).
pub fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with(field) && l[field.len()..].starts_with(':'))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

/// Number of threads of a process (/proc/<pid>/status Threads).
pub fn threads(pid: u32) -> Option<u64> {
    status_kb(pid, "Threads")
}
