//! Trace context across the delay: a job pushed with a W3C `traceparent`
//! ([`crate::Job::traceparent`]) keeps it in its hash (the `traceparent`
//! field push.lua writes), and every consumer gets it back
//! ([`crate::Message::traceparent`], [`crate::Reserved::traceparent`],
//! [`crate::worker::Delivery::traceparent`]), so the consumer's span can be
//! a child of the producer's however long the job waited.
//!
//! The field is read as untrusted input: anyone with Redis access may have
//! written it. A value that is not a traceparent by
//! [`crate::validate::traceparent`]'s rule is treated as absent, never an
//! error (the job is still handed out), and said once per process on stderr.

use std::sync::atomic::{AtomicBool, Ordering};

/// Whether a malformed traceparent was already said.
static WARNED: AtomicBool = AtomicBool::new(false);

/// The traceparent a script read from job `id`'s hash ("" when absent):
/// `None` when absent or malformed.
pub(crate) fn from_redis(id: &str, value: Vec<u8>) -> Option<String> {
    if value.is_empty() {
        return None;
    }
    if crate::validate::is_traceparent(&value) {
        // 55 ASCII bytes: checked above.
        return String::from_utf8(value).ok();
    }
    if !WARNED.swap(true, Ordering::Relaxed) {
        let shown = String::from_utf8_lossy(&value[..value.len().min(64)]).into_owned();
        eprintln!(
            "delayer: warning: job {id:?} carries a traceparent that is not one ({shown:?}, {} bytes); it is \
             handed out without it (further malformed traceparents not logged)",
            value.len()
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_values_read_as_absent() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(from_redis("1", good.as_bytes().to_vec()).as_deref(), Some(good));
        assert_eq!(from_redis("1", Vec::new()), None);
        for bad in [vec![0xff; 55], vec![b'0'; 10_000_000], good.to_uppercase().into_bytes()] {
            assert_eq!(from_redis("1", bad), None);
        }
    }
}
