//! A panic is a bug: it is written to the error log, and the process exits.
//!
//! Rust's default hook prints a panic to stderr, which a daemon has closed,
//! and only the main thread's panic ends the process: a panic on the
//! mover's blocking thread, the wake-up listener's thread or a tokio task
//! (the HTTP API, a webhook delivery) would leave a half-alive process that
//! answers health checks and moves nothing. So the server and `delayer
//! webhook` install [`install`]: it logs the panic's message, thread and
//! location through the logger (error log and stderr, as `log_format`
//! says: a JSON line carries `panic`, `thread` and `location`), then
//! exits with code 101 (Rust's own for a panic) from whatever thread
//! panicked. The
//! supervisor (systemd's `Restart=on-failure`) starts a clean process; jobs
//! wait in Redis meanwhile, and reservations held by a stopped webhook
//! come back after their ttr. Caught panics are no exception: nothing in
//! the server panics by design.

use std::panic::PanicHookInfo;

/// The exit code after a panic.
pub const EXIT_CODE: i32 = 101;

/// Installs the hook (once the logger runs, so the line reaches the files).
pub fn install() {
    std::panic::set_hook(Box::new(|info| {
        let line = describe(info);
        if log::log_enabled!(log::Level::Error) {
            // As every line, in log_format (a JSON line gets these fields).
            let thread = std::thread::current().name().unwrap_or("unnamed").to_string();
            let location = info.location().map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()));
            log::error!(panic = true, thread = thread.as_str(), location = location.as_deref(); "{line}");
            log::logger().flush();
        } else {
            eprintln!("delayer: {line}");
        }
        std::process::exit(EXIT_CODE);
    }));
}

/// "panicked on thread 'wake' at server/src/wake.rs:12:5: <message>; exiting".
fn describe(info: &PanicHookInfo<'_>) -> String {
    let payload = info.payload();
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into());
    let thread = std::thread::current().name().unwrap_or("unnamed").to_string();
    let location = info.location().map(|l| format!(" at {}:{}:{}", l.file(), l.line(), l.column())).unwrap_or_default();
    format!(
        "panicked on thread {thread:?}{location}: {message}; exiting with code {EXIT_CODE} (a bug: please report it \
         with this line)"
    )
}

/// Panics when `DELAYER_TEST_PANIC` names `place`: the tests' one way to
/// reach a panic, since none is reachable otherwise. Debug builds only: a
/// release build has no such variable.
#[cfg(debug_assertions)]
pub fn test_trigger(place: &str) {
    static WANTED: std::sync::LazyLock<Option<String>> =
        std::sync::LazyLock::new(|| std::env::var("DELAYER_TEST_PANIC").ok());
    if WANTED.as_deref() == Some(place) {
        panic!("DELAYER_TEST_PANIC={place}");
    }
}

/// Nothing in a release build.
#[cfg(not(debug_assertions))]
pub fn test_trigger(_place: &str) {}
