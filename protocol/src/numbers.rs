//! Numbers read back from Redis, checked in one place per kind.
//!
//! Whatever Delayer reads from Redis (pool and index scores, the scripts'
//! replies, wake-up messages, fields of job hashes) may have been written by
//! a foreign client, by hand or by a bug: `inf`, `nan`, `1e300`, `-1`,
//! `abc`, a fraction where a whole number belongs. Each such number is read
//! here, into a value that is always in range, with what was odd about it;
//! the caller decides what to say (the server logs it once, naming the key),
//! but never holds a number that can overflow a duration or panic. The rules
//! (docs/PROTOCOL.md, "Numbers read from Redis"):
//!
//! - **A time** (Unix seconds; the reserved sets' Unix milliseconds) is
//!   finite, from 1970 to the last millisecond of year 9999. Earlier (a
//!   negative number, `-inf`) reads as the epoch: due now. Later (`inf`,
//!   `1e20`, `2^64`) reads as the end of 9999: it waits. Not a number
//!   (`nan`, `abc`, an empty string) reads as nothing.
//! - **A count** (attempts, limits, sizes) is a whole number from 0 to its
//!   type's maximum. Larger reads as the maximum; negative as 0; a fraction
//!   is cut to its whole part; not a number reads as nothing. The integer
//!   `i64::MIN` is how Redis renders a script's number that no integer can
//!   hold (`inf`, `nan`, `1e20`): it reads as the maximum too.

use redis::Value;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The last millisecond Delayer handles, 9999-12-31T23:59:59.999Z, in Unix
/// seconds: a later time waits (as this one).
pub const LATEST_SECS: f64 = 253_402_300_799.999;

/// What was odd about a number read from Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Odd {
    /// Not a number at all (`nan`, `abc`, empty): read as nothing.
    NotANumber,
    /// A time before 1970 (negative, `-inf`): read as the epoch (due now).
    Early,
    /// A time after year 9999 (`inf`, `1e20`): read as the end of 9999.
    Late,
    /// A count below 0: read as 0.
    Negative,
    /// A count too large for its type (or no integer at all, `i64::MIN`):
    /// read as the type's maximum.
    TooLarge,
    /// A fraction where a whole number belongs: read as its whole part (a
    /// time keeps it).
    Fraction,
}

impl Odd {
    /// What the value was taken as, for a log line: "is taken as due now".
    pub fn taken_as(self) -> &'static str {
        match self {
            Odd::NotANumber => "is not a number: ignored",
            Odd::Early => "is before 1970: taken as due now",
            Odd::Late => "is after year 9999: taken as the end of 9999 (it waits)",
            Odd::Negative => "is negative: taken as 0",
            Odd::TooLarge => "is too large: taken as the largest allowed",
            Odd::Fraction => "is not a whole number: its fraction is dropped",
        }
    }
}

/// A number as read: the value to use (`None` when nothing can be made of
/// it) and what was odd about it, if anything.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Read<T> {
    /// The value, always within its kind's range.
    pub value: Option<T>,
    /// Why the value is not the number as written, if it is not.
    pub odd: Option<Odd>,
}

impl<T> Read<T> {
    fn fine(value: T) -> Read<T> {
        Read { value: Some(value), odd: None }
    }

    fn odd(value: Option<T>, odd: Odd) -> Read<T> {
        Read { value, odd: Some(odd) }
    }

    fn nothing() -> Read<T> {
        Read { value: None, odd: Some(Odd::NotANumber) }
    }

    /// The value, with `fallback` when nothing could be made of it.
    pub fn or(self, fallback: T) -> T {
        self.value.unwrap_or(fallback)
    }
}

/// A time read from Redis: Unix seconds, finite, from 0 to [`LATEST_SECS`].
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Time(f64);

impl Time {
    /// 1970-01-01T00:00:00Z: what an earlier time reads as (due now).
    pub const EPOCH: Time = Time(0.0);
    /// 9999-12-31T23:59:59.999Z: what a later time reads as.
    pub const LATEST: Time = Time(LATEST_SECS);

    /// Unix seconds (fractional).
    pub fn secs(self) -> f64 {
        self.0
    }

    /// Unix milliseconds, rounded.
    pub fn millis(self) -> u64 {
        // At most about 2.5e14: exact in an f64, and in a u64.
        (self.0 * 1000.0).round() as u64
    }

    /// The same instant as a [`SystemTime`], to the millisecond.
    pub fn system_time(self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.millis())
    }

    /// The earlier of two times.
    pub fn min(self, other: Time) -> Time {
        if other.0 < self.0 {
            other
        } else {
            self
        }
    }
}

/// A time from Unix seconds (a pool score as redis-rs read it).
pub fn time_secs(secs: f64) -> Read<Time> {
    if secs.is_nan() {
        Read::nothing()
    } else if secs < 0.0 {
        Read::odd(Some(Time::EPOCH), Odd::Early)
    } else if secs > LATEST_SECS {
        Read::odd(Some(Time::LATEST), Odd::Late)
    } else {
        Read::fine(Time(secs))
    }
}

/// A time from Unix milliseconds (a reserved set's score: a whole number).
pub fn time_millis(ms: f64) -> Read<Time> {
    let read = time_secs(ms / 1000.0);
    match read.odd {
        None if ms.fract() != 0.0 => Read::odd(read.value, Odd::Fraction),
        _ => read,
    }
}

/// A time from its text in Unix seconds: a score as Redis formats it
/// (`1763750000.125`, `1e+20`, `inf`), a script's `"s.mmm"`, a wake-up.
pub fn time_text(text: &str) -> Read<Time> {
    match text.trim().parse::<f64>() {
        Ok(secs) => time_secs(secs),
        Err(_) => Read::nothing(),
    }
}

/// A time from a reply's value: text, or an integer of seconds.
pub fn time_value(value: &Value) -> Read<Time> {
    match value {
        Value::Int(n) => time_secs(*n as f64),
        Value::Double(x) => time_secs(*x),
        other => text_of(other).map_or_else(Read::nothing, |t| time_text(&t)),
    }
}

/// A count of type `T` from an integer reply (see the module's rules).
pub fn count_int<T: Count>(n: i64) -> Read<T> {
    if n == i64::MIN {
        return Read::odd(Some(T::MAX), Odd::TooLarge);
    }
    if n < 0 {
        return Read::odd(Some(T::ZERO), Odd::Negative);
    }
    match T::try_from(n as u64) {
        Ok(v) => Read::fine(v),
        Err(_) => Read::odd(Some(T::MAX), Odd::TooLarge),
    }
}

/// A count of type `T` from its text (a hash field, a script's string).
pub fn count_text<T: Count>(text: &str) -> Read<T> {
    let text = text.trim();
    if let Ok(n) = text.parse::<u64>() {
        return T::try_from(n).map_or(Read::odd(Some(T::MAX), Odd::TooLarge), Read::fine);
    }
    match text.parse::<f64>() {
        Ok(x) if x.is_nan() => Read::nothing(),
        Ok(x) if x < 0.0 => Read::odd(Some(T::ZERO), Odd::Negative),
        // Whole numbers beyond u64, `inf`.
        Ok(x) if x >= u64::MAX as f64 => Read::odd(Some(T::MAX), Odd::TooLarge),
        Ok(x) => {
            let whole = T::try_from(x.trunc() as u64).map_or(Read::odd(Some(T::MAX), Odd::TooLarge), Read::fine);
            if x.fract() != 0.0 && whole.odd.is_none() {
                Read::odd(whole.value, Odd::Fraction)
            } else {
                whole
            }
        }
        Err(_) => Read::nothing(),
    }
}

/// A count of type `T` from a reply's value: an integer, or its text.
pub fn count_value<T: Count>(value: &Value) -> Read<T> {
    match value {
        Value::Int(n) => count_int(*n),
        other => text_of(other).map_or_else(Read::nothing, |t| count_text(&t)),
    }
}

/// The text of a string reply (lossy: a number is ASCII).
fn text_of(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

/// The unsigned integer types a count is read into.
pub trait Count: Copy + TryFrom<u64> {
    /// 0.
    const ZERO: Self;
    /// The largest value.
    const MAX: Self;
}

impl Count for u64 {
    const ZERO: u64 = 0;
    const MAX: u64 = u64::MAX;
}

impl Count for u32 {
    const ZERO: u32 = 0;
    const MAX: u32 = u32::MAX;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn times_are_clamped_to_1970_through_9999() {
        let t = |s: &str| time_text(s);
        assert_eq!(t("1763750000.125"), Read::fine(Time(1_763_750_000.125)));
        assert_eq!(t("0"), Read::fine(Time::EPOCH));
        for late in ["inf", "+inf", "1e20", "1e+20", "1e300", "9223372036854775808", "18446744073709551616"] {
            assert_eq!(t(late), Read::odd(Some(Time::LATEST), Odd::Late), "{late}");
        }
        for early in ["-inf", "-1", "-1e300", "-0.001"] {
            assert_eq!(t(early), Read::odd(Some(Time::EPOCH), Odd::Early), "{early}");
        }
        for junk in ["nan", "NaN", "abc", "", " ", "1.2.3", "0x10"] {
            assert_eq!(t(junk), Read::nothing(), "{junk}");
        }
        assert_eq!(time_secs(f64::INFINITY).value, Some(Time::LATEST));
        assert_eq!(time_secs(f64::NEG_INFINITY).value, Some(Time::EPOCH));
        assert_eq!(time_secs(f64::NAN).value, None);
    }

    #[test]
    fn every_time_converts_without_overflow() {
        for s in ["inf", "-inf", "1e300", "-1", "253402300799.999", "0"] {
            let time = time_text(s).or(Time::EPOCH);
            let _ = time.system_time();
            assert!(time.millis() <= 253_402_300_799_999, "{s}");
        }
        assert_eq!(time_text("1.0005").or(Time::EPOCH).millis(), 1001);
    }

    #[test]
    fn reserved_deadlines_are_whole_milliseconds() {
        assert_eq!(time_millis(1_763_750_000_125.0), Read::fine(Time(1_763_750_000.125)));
        assert_eq!(time_millis(1_763_750_000_125.5).odd, Some(Odd::Fraction));
        assert_eq!(time_millis(f64::INFINITY), Read::odd(Some(Time::LATEST), Odd::Late));
        assert_eq!(time_millis(-5.0), Read::odd(Some(Time::EPOCH), Odd::Early));
    }

    #[test]
    fn counts_saturate_and_never_go_negative() {
        assert_eq!(count_int::<u32>(7), Read::fine(7));
        assert_eq!(count_int::<u32>(-1), Read::odd(Some(0), Odd::Negative));
        assert_eq!(count_int::<u32>(i64::MIN), Read::odd(Some(u32::MAX), Odd::TooLarge));
        assert_eq!(count_int::<u32>(1 << 40), Read::odd(Some(u32::MAX), Odd::TooLarge));
        assert_eq!(count_int::<u64>(i64::MAX), Read::fine(i64::MAX as u64));
        assert_eq!(count_text::<u64>("18446744073709551615"), Read::fine(u64::MAX));
        for huge in ["18446744073709551616", "99999999999999999999", "1e300", "inf"] {
            assert_eq!(count_text::<u64>(huge), Read::odd(Some(u64::MAX), Odd::TooLarge), "{huge}");
        }
        assert_eq!(count_text::<u32>("4294967296"), Read::odd(Some(u32::MAX), Odd::TooLarge));
        assert_eq!(count_text::<u32>("-3"), Read::odd(Some(0), Odd::Negative));
        assert_eq!(count_text::<u32>("-inf"), Read::odd(Some(0), Odd::Negative));
        assert_eq!(count_text::<u32>("2.5"), Read::odd(Some(2), Odd::Fraction));
        for junk in ["abc", "", "nan"] {
            assert_eq!(count_text::<u32>(junk), Read::nothing(), "{junk}");
        }
        assert_eq!(count_value::<u32>(&bulk("12")), Read::fine(12));
        assert_eq!(count_value::<u32>(&Value::Nil), Read::nothing());
    }

    #[test]
    fn reply_values_read_as_their_kind() {
        assert_eq!(time_value(&bulk("-inf")).value, Some(Time::EPOCH));
        assert_eq!(time_value(&Value::Int(1_700_000_000)).value, Some(Time(1_700_000_000.0)));
        assert_eq!(time_value(&Value::Double(f64::NAN)), Read::nothing());
        assert_eq!(time_value(&Value::Nil), Read::nothing());
    }
}
