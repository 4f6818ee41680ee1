//! The input rules of docs/PROTOCOL.md, checked before any Redis call.

use crate::error::{Error, Result};
use std::time::Duration;

/// Longest id or topic, in bytes.
pub const MAX_NAME_LEN: usize = 200;
/// Longest delay and ready_max_lifetime: 10 years.
pub const MAX_DELAY: Duration = Duration::from_secs(315_360_000);
/// How long a job's data is kept once it is due, unless told otherwise: 7 days.
pub const DEFAULT_READY_MAX_LIFETIME: Duration = Duration::from_secs(604_800);

/// An id or topic: 1..=200 bytes, no whitespace, control characters or braces
/// (they are part of key names; braces are kept for Redis Cluster hash tags).
pub fn name(what: &str, value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(Error::InvalidArgument(format!("{what} must not be empty")));
    }
    if value.len() > MAX_NAME_LEN {
        return Err(Error::InvalidArgument(format!(
            "{what} is {} bytes long; at most {MAX_NAME_LEN} are allowed",
            value.len()
        )));
    }
    if let Some(c) = value.chars().find(|c| c.is_whitespace() || c.is_control() || *c == '{' || *c == '}') {
        return Err(Error::InvalidArgument(format!(
            "{what} {value:?} contains {c:?}: whitespace, control characters and braces are not allowed"
        )));
    }
    Ok(())
}

/// A delay, in whole milliseconds (rounded to the nearest).
pub fn delay_ms(delay: Duration) -> Result<u64> {
    if delay > MAX_DELAY {
        return Err(Error::InvalidArgument(format!("delay of {}s is more than the 10-year limit", delay.as_secs())));
    }
    Ok(((delay.as_nanos() + 500_000) / 1_000_000) as u64)
}

/// A ready_max_lifetime, whole seconds from 1 s to 10 years, in milliseconds.
pub fn ready_max_lifetime_ms(lifetime: Duration) -> Result<u64> {
    if lifetime.subsec_nanos() != 0 || lifetime.is_zero() || lifetime > MAX_DELAY {
        return Err(Error::InvalidArgument(format!(
            "ready_max_lifetime must be whole seconds from 1 s to 10 years, not {lifetime:?}"
        )));
    }
    Ok(lifetime.as_secs() * 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(name("id", "order:42").is_ok());
        assert!(name("id", "订单-1").is_ok());
        for bad in ["", "a b", "a\tb", "a\nb", "{tag}", "x}", "\u{7f}"] {
            assert!(name("id", bad).is_err(), "{bad:?} accepted");
        }
        assert!(name("id", &"x".repeat(200)).is_ok());
        assert!(name("id", &"x".repeat(201)).is_err());
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
}
