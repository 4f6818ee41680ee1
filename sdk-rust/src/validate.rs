//! The input rules of docs/PROTOCOL.md ([`delayer_protocol::validate`],
//! shared with the server), under the paths the client's calls use, with
//! the one rule on a type of this crate ([`backoff`]).

use crate::error::{Error, Result};
use crate::Backoff;
pub(crate) use delayer_protocol::validate::*;

impl From<Invalid> for Error {
    fn from(e: Invalid) -> Self {
        Error::InvalidArgument(e.0)
    }
}

/// A backoff as push.lua takes it: kind, backoff_ms, backoff_max_ms.
pub fn backoff(b: &Backoff) -> Result<(&'static str, u64, u64)> {
    match *b {
        Backoff::Fixed(d) => {
            let ms = delay_ms(d)?;
            Ok(("fixed", ms, ms))
        }
        Backoff::Exponential { base, max } => {
            let (base_ms, max_ms) = (delay_ms(base)?, delay_ms(max)?);
            if max_ms < base_ms {
                return Err(Error::InvalidArgument(format!(
                    "exponential backoff: the cap ({max:?}) is below the first delay ({base:?})"
                )));
            }
            Ok(("exponential", base_ms, max_ms))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn backoffs() {
        let (s, ms) = (Duration::from_secs, Duration::from_millis);
        assert_eq!(backoff(&Backoff::fixed(ms(1500))).ok(), Some(("fixed", 1500, 1500)));
        assert_eq!(backoff(&Backoff::exponential(s(1), s(60))).ok(), Some(("exponential", 1000, 60_000)));
        assert!(backoff(&Backoff::exponential(s(2), s(1))).is_err());
    }
}
