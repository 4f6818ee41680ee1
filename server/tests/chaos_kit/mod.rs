//! What the kill -9 tests share (chaos.rs, chaos_flow.rs): each is its own
//! main (`harness = false`, so the same binary is orchestrator and worker),
//! and answers the test harness's flags the way the harness would.

use std::process::ExitCode;

/// xorshift64*: enough randomness for choosing kill times and outcomes,
/// without a dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Plain `cargo test` passes harness flags (--nocapture, filters, --list):
/// `Some(exit)` when the test is not to run (a filter that does not name
/// `name` skips it; `--list` lists it), `None` to run it. Flags that take a
/// value (`--test-threads 2`) are not filters.
pub fn harness_says(args: &[String], name: &str) -> Option<ExitCode> {
    let mut filters = Vec::new();
    let mut rest = args.iter().skip(1);
    while let Some(a) = rest.next() {
        if matches!(a.as_str(), "--test-threads" | "--skip" | "--color" | "--format" | "--logfile" | "-Z") {
            rest.next();
        } else if !a.starts_with('-') {
            filters.push(a);
        }
    }
    if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
        return Some(ExitCode::SUCCESS);
    }
    if args.iter().any(|a| a == "--list") {
        println!("{name}: test");
        return Some(ExitCode::SUCCESS);
    }
    None
}
