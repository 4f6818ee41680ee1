//! The input rules of docs/PROTOCOL.md, checked before any Redis call.
//!
//! Each rule answers [`Invalid`], the message for the caller: the client
//! turns it into its `Error::InvalidArgument`, the server into a 400 or
//! an operator's message.

use std::fmt;
use std::time::Duration;

/// An argument that breaks a rule of the protocol: why, for the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub String);

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Invalid {}

/// `Result` with [`Invalid`].
pub type Result<T> = std::result::Result<T, Invalid>;

/// Longest delay and ready_max_lifetime: 10 years.
pub const MAX_DELAY: Duration = Duration::from_secs(315_360_000);
/// How long a job's data is kept once it is due, unless told otherwise: 7 days.
pub const DEFAULT_READY_MAX_LIFETIME: Duration = Duration::from_secs(604_800);

/// An id given as bytes, any bytes (as Redis holds it), refused when empty.
pub fn id_of(id: &[u8]) -> Result<&[u8]> {
    if id.is_empty() {
        return Err(Invalid("id must not be empty".into()));
    }
    Ok(id)
}

/// An id or topic: any non-empty string. The classic layout puts it in key
/// names as is, and Redis takes any bytes there, so everything Delayer 1.x
/// accepted (spaces, braces, control characters, any length) works; only the
/// empty name, which 1.x refused too, is a caller's bug.
pub fn name(what: &str, value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(Invalid(format!("{what} must not be empty")));
    }
    Ok(())
}

/// A delay, in whole milliseconds (rounded to the nearest).
pub fn delay_ms(delay: Duration) -> Result<u64> {
    if delay > MAX_DELAY {
        return Err(Invalid(format!("delay of {}s is more than the 10-year limit", delay.as_secs())));
    }
    Ok(((delay.as_nanos() + 500_000) / 1_000_000) as u64)
}

/// A ready_max_lifetime, whole seconds from 1 s to 10 years, in milliseconds.
pub fn ready_max_lifetime_ms(lifetime: Duration) -> Result<u64> {
    if lifetime.subsec_nanos() != 0 || lifetime.is_zero() || lifetime > MAX_DELAY {
        return Err(Invalid(format!(
            "ready_max_lifetime must be whole seconds from 1 s to 10 years, not {lifetime:?}"
        )));
    }
    Ok(lifetime.as_secs() * 1000)
}

/// Most reservations a job may be given; 0 means no limit.
pub const MAX_MAX_ATTEMPTS: u32 = 1_000_000;
/// Most dead letters listed, or ids re-queued or purged, per script call.
pub const MAX_DEAD_PER_CALL: usize = 1000;
/// Most jobs one `reserve_many` call reserves.
pub const MAX_RESERVE_MANY: usize = 1000;

/// A reservation's time-to-run, in whole milliseconds (rounded as a delay
/// is), at least 1.
pub fn ttr_ms(ttr: Duration) -> Result<u64> {
    let ms = delay_ms(ttr).map_err(|_| Invalid(format!("ttr of {ttr:?} is more than 10 years")))?;
    if ms == 0 {
        return Err(Invalid(format!("ttr must be at least 1 ms, not {ttr:?}")));
    }
    Ok(ms)
}

/// max_attempts: 0 (no limit) to [`MAX_MAX_ATTEMPTS`].
pub fn max_attempts(n: u32) -> Result<u32> {
    if n > MAX_MAX_ATTEMPTS {
        return Err(Invalid(format!("max_attempts is {n}; at most {MAX_MAX_ATTEMPTS} are allowed")));
    }
    Ok(n)
}

/// A W3C trace context `traceparent` (<https://www.w3.org/TR/trace-context/>):
/// `00-<32 hex>-<16 hex>-<2 hex>`, lower-case hex, version 00, neither id
/// all zeros. The one form a push takes and a consumer hands out: anything
/// else in a job's hash is treated as absent (the client's `trace` module).
pub fn traceparent(value: &str) -> Result<()> {
    if is_traceparent(value.as_bytes()) {
        return Ok(());
    }
    let shown: String = value.chars().take(64).collect();
    Err(Invalid(format!(
        "traceparent must be \"00-<32 hex>-<16 hex>-<2 hex>\" (lower-case, ids not all zeros), not {shown:?}"
    )))
}

/// Whether `v` is a traceparent by [`traceparent`]'s rule.
pub fn is_traceparent(v: &[u8]) -> bool {
    let hex = |s: &[u8]| s.iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c));
    let nonzero = |s: &[u8]| s.iter().any(|&c| c != b'0');
    v.len() == 55
        && v.starts_with(b"00-")
        && (v[35], v[52]) == (b'-', b'-')
        && hex(&v[3..35])
        && hex(&v[36..52])
        && hex(&v[53..])
        && nonzero(&v[3..35])
        && nonzero(&v[36..52])
}

/// Largest `cursor` or `start` of a listing: 2^53 - 1, the largest integer
/// a double (Lua's numbers in older Redis, JavaScript in the dashboard)
/// holds exactly, and far past any listing; the scripts' arithmetic on a
/// larger one fails or rounds. The HTTP API and the CLI take the same bound.
pub const MAX_POSITION: u64 = (1 << 53) - 1;

/// A listing's position given as `what` (a cursor, a start): at most
/// [`MAX_POSITION`].
pub fn position(what: &str, value: u64) -> Result<u64> {
    if value > MAX_POSITION {
        return Err(Invalid(format!("{what} is at most {MAX_POSITION}, not {value}")));
    }
    Ok(value)
}

/// How many dead letters to list: 1 to [`MAX_DEAD_PER_CALL`].
pub fn dead_count(count: usize) -> Result<usize> {
    if count == 0 || count > MAX_DEAD_PER_CALL {
        return Err(Invalid(format!("dead letters are listed 1 to {MAX_DEAD_PER_CALL} at a time, not {count}")));
    }
    Ok(count)
}

/// How many jobs a `reserve_many` call may take: 0 to [`MAX_RESERVE_MANY`].
pub fn reserve_count(n: usize) -> Result<usize> {
    if n > MAX_RESERVE_MANY {
        return Err(Invalid(format!("reserve_many takes 0 to {MAX_RESERVE_MANY} jobs a call, not {n}")));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(name("id", "").is_err());
        let long = "x".repeat(300);
        for good in
            ["order:42", "订单-1", "a b", "a\tb", "a\nb", "{tag}", "x}", "\u{7f}\u{0}", " ", "42", long.as_str()]
        {
            assert!(name("id", good).is_ok(), "{good:?} refused");
        }
    }

    #[test]
    fn delays() {
        assert_eq!(delay_ms(Duration::from_micros(1_500)).ok(), Some(2));
        assert_eq!(delay_ms(Duration::from_micros(1_499)).ok(), Some(1));
        assert_eq!(delay_ms(MAX_DELAY).ok(), Some(315_360_000_000));
        assert!(delay_ms(MAX_DELAY + Duration::from_millis(1)).is_err());
        assert!(ready_max_lifetime_ms(Duration::ZERO).is_err());
        assert!(ready_max_lifetime_ms(Duration::from_millis(1500)).is_err());
        assert_eq!(ready_max_lifetime_ms(Duration::from_secs(2)).ok(), Some(2000));
    }

    #[test]
    fn reliable_inputs() {
        assert!(ttr_ms(Duration::ZERO).is_err());
        assert!(ttr_ms(Duration::from_micros(499)).is_err());
        assert_eq!(ttr_ms(Duration::from_micros(500)).ok(), Some(1));
        assert!(ttr_ms(MAX_DELAY + Duration::from_millis(1)).is_err());
        assert!(max_attempts(MAX_MAX_ATTEMPTS + 1).is_err());
        assert_eq!(max_attempts(0).ok(), Some(0));
        assert!(dead_count(0).is_err() && dead_count(1001).is_err() && dead_count(1000).is_ok());
        assert_eq!(position("cursor", MAX_POSITION).ok(), Some(MAX_POSITION));
        assert!(position("cursor", MAX_POSITION + 1).is_err() && position("start", u64::MAX).is_err());
    }

    #[test]
    fn traceparents() {
        assert!(traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").is_ok());
        assert!(traceparent("00-00000000000000000000000000000001-0000000000000001-00").is_ok());
        for bad in [
            "",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0é",
        ] {
            assert!(traceparent(bad).is_err(), "{bad:?} taken");
        }
    }
}
