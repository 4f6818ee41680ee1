//! Reading what Redis answers the scripts and commands of the protocol:
//! the readers of times, names, counts and flags every reply decoder shares
//! (the Rust SDK's, one per script). Every reply is input: a damaged job
//! hash's numbers are read within range ([`crate::numbers`]), text that is
//! not UTF-8 is kept as bytes, and anything else is
//! [`Error::BadReply`].

use crate::numbers;
use crate::op::Error;
use redis::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// "1763750000.125" (Unix seconds, as the scripts return times), read by
/// the rules of [`crate::numbers`]: a time before 1970 as the epoch, one
/// after 9999 as its end; only text that is no number at all is an error.
pub fn parse_due(s: &str) -> Result<SystemTime> {
    let bad = || Error::BadReply(format!("expected a time in Unix seconds, got {s:?}"));
    Ok(numbers::time_text(s).value.ok_or_else(bad)?.system_time())
}

/// A time a job's hash supplied (its `dead_at`), which anyone may have
/// written: the epoch when it is no time at all, so one damaged job does
/// not fail a whole listing.
pub fn lenient_time(s: &str) -> SystemTime {
    numbers::time_text(s).or(numbers::Time::EPOCH).system_time()
}

/// An id or topic read from Redis: its text (lossy when the bytes are not
/// UTF-8, which a Delayer 1.x or PHP client may write), and its exact
/// bytes in that case, so the job is handed out whole and named back.
pub fn name(v: Option<Value>) -> Result<(String, Option<Vec<u8>>)> {
    Ok(split_name(bytes(v)?))
}

/// A name's bytes as text, and the bytes themselves when they are not UTF-8.
pub fn split_name(bytes: Vec<u8>) -> (String, Option<Vec<u8>>) {
    match String::from_utf8(bytes) {
        Ok(text) => (text, None),
        Err(e) => (String::from_utf8_lossy(e.as_bytes()).into_owned(), Some(e.into_bytes())),
    }
}

/// A script's array reply of exactly `n` items; nil is `None`.
pub fn array(reply: Value, n: usize, what: &str) -> Result<Vec<Value>> {
    match reply {
        Value::Array(parts) if parts.len() == n => Ok(parts),
        other => Err(Error::BadReply(format!("expected {what}, got {other:?}"))),
    }
}

/// A string reply's bytes.
pub fn bytes(v: Option<Value>) -> Result<Vec<u8>> {
    match v {
        Some(Value::BulkString(b)) => Ok(b),
        Some(Value::SimpleString(s)) => Ok(s.into_bytes()),
        other => Err(Error::BadReply(format!("expected a string, got {other:?}"))),
    }
}

/// Ids and topics we write are UTF-8; one written by a foreign client that
/// is not must still reach the consumer, so it is converted, not refused.
pub fn text(v: Option<Value>) -> Result<String> {
    Ok(String::from_utf8_lossy(&bytes(v)?).into_owned())
}

/// A count a script read from a job's hash (attempts, max_attempts), by the
/// rules of [`crate::numbers`]: a huge one saturates, a negative one is 0,
/// so a job with a damaged field is still handed out (a job reserved and
/// then refused here would wait for its ttr to pass, for nothing).
pub fn int<T: numbers::Count>(v: Option<Value>) -> Result<T> {
    let v = v.unwrap_or(Value::Nil);
    numbers::count_value(&v).value.ok_or_else(|| Error::BadReply(format!("expected an integer, got {v:?}")))
}

/// A hand-out script's wait instruction (pop.lua, take.lua, reserve.lua
/// while the topic is paused): wait on `gate` for at most `recheck`, then
/// ask again. The SDKs know no more of flow control than this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowWait {
    /// The LIST to block on (`BRPOPLPUSH gate gate t`): a resume writes it.
    pub gate: Vec<u8>,
    /// How long a wait on the gate lasts before the claim is tried again.
    pub recheck: Duration,
}

/// The longest recheck a reply may ask for: a gate lost in an outage still
/// lets a waiter look again within a minute, whatever Redis answered.
const MAX_RECHECK: Duration = Duration::from_secs(60);

/// `{"paused", recheck_ms, gate}` read as a [`FlowWait`], or `None` when the
/// reply is something else (a job, nil). The recheck is held within
/// 1 ms..60 s: it is input like any reply, and 0 would be a busy loop.
pub fn flow_wait(reply: &Value) -> Option<FlowWait> {
    let Value::Array(parts) = reply else { return None };
    let [Value::BulkString(kind), ms, Value::BulkString(gate)] = parts.as_slice() else { return None };
    if kind.as_slice() != b"paused" {
        return None;
    }
    let ms: u64 = numbers::count_value(ms).value.unwrap_or(0);
    let recheck = Duration::from_millis(ms).clamp(Duration::from_millis(1), MAX_RECHECK);
    Some(FlowWait { gate: gate.clone(), recheck })
}

/// A topic's flow control, as flow.lua answers it.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowState {
    /// Since when the topic is paused; `None` while it runs.
    pub paused_since: Option<SystemTime>,
    /// Due jobs a pause or a rate limit holds back (none while the topic
    /// runs unlimited, but in the classic layout the set-aside ones not yet
    /// made ready).
    pub held: u64,
    /// Whether the call changed the state (a pause of a running topic, a
    /// resume of a paused one, a new rate or burst, the end of a limit).
    pub changed: bool,
    /// Redis's clock when the script ran.
    pub at: SystemTime,
    /// The topic's rate limit after the call; `None` when it has none.
    pub rate_limit: Option<RateLimit>,
}

/// A topic's rate limit: at most `per_second` of its due jobs become ready
/// per second, up to `burst` at once after a quiet spell (a token bucket in
/// Redis, shared by every server). It paces jobs *becoming ready*: those
/// already in the ready list go out at consumer speed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Jobs per second (`0.5`: one every two seconds).
    pub per_second: f64,
    /// How many may become ready at once.
    pub burst: u64,
}

impl RateLimit {
    /// The limit as flow.lua stores it in the flow hash's `per_second` and
    /// `burst` fields ("" or absent: none). Those fields are input like any
    /// reply (anyone with Redis access may write them): a rate that is no
    /// positive finite number, or a burst that is no whole number, reads as
    /// no limit rather than failing the caller.
    pub fn from_fields(per_second: &str, burst: &str) -> Option<RateLimit> {
        let per_second = per_second.trim().parse::<f64>().ok().filter(|r| r.is_finite() && *r > 0.0)?;
        let burst = burst.trim().parse::<u64>().ok()?;
        Some(RateLimit { per_second, burst })
    }

    /// [`RateLimit::from_fields`] of two reply values (strings or nil).
    pub fn from_values(per_second: Value, burst: Value) -> Option<RateLimit> {
        let field = |v: Value| opt_text(v).ok().flatten().unwrap_or_default();
        RateLimit::from_fields(&field(per_second), &field(burst))
    }
}

/// flow.lua's `{paused_since, changed, now, held, per_second, burst}`.
pub fn flow_state(reply: Value) -> Result<FlowState> {
    let what = "flow.lua's [paused_since, changed, now, held, per_second, burst]";
    let [since, changed, now, held, per_second, burst] =
        <[Value; 6]>::try_from(array(reply, 6, what)?).map_err(|v| Error::BadReply(format!("{what}: {v:?}")))?;
    let since = text(Some(since))?;
    let paused_since = if since.is_empty() { None } else { Some(parse_due(&since)?) };
    Ok(FlowState {
        paused_since,
        held: int(Some(held))?,
        changed: int::<u64>(Some(changed))? == 1,
        at: parse_due(&text(Some(now))?)?,
        rate_limit: RateLimit::from_values(per_second, burst),
    })
}

/// A script's 1 (done) or 0 (nothing to do).
pub fn flag(reply: Value, script: &str) -> Result<bool> {
    match reply {
        Value::Int(n) => Ok(n == 1),
        other => Err(Error::BadReply(format!("{script}: expected 0 or 1, got {other:?}"))),
    }
}

/// A time `"s.mmm"`, or nil.
pub fn maybe_due(reply: Value) -> Result<Option<SystemTime>> {
    match reply {
        Value::Nil => Ok(None),
        other => Ok(Some(parse_due(&text(Some(other))?)?)),
    }
}

/// A string reply, `None` when empty ("" is the scripts' "not known").
pub fn opt_text(v: Value) -> Result<Option<String>> {
    let s = match v {
        Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
        Value::SimpleString(s) => s,
        Value::Int(n) => n.to_string(),
        Value::Nil => String::new(),
        other => return Err(Error::BadReply(format!("expected a string, got {other:?}"))),
    };
    Ok(Some(s).filter(|s| !s.is_empty()))
}

/// A name's bytes in a reply (nil: none).
pub fn raw(v: Value) -> Result<Vec<u8>> {
    match v {
        Value::BulkString(b) => Ok(b),
        Value::SimpleString(s) => Ok(s.into_bytes()),
        Value::Nil => Ok(Vec::new()),
        other => Err(Error::BadReply(format!("expected a name, got {other:?}"))),
    }
}

/// A count a script read from a job's hash or a key's size, by the rules of
/// [`crate::numbers`]: not a number is not known (`None`), so one damaged
/// field does not fail the lookup.
pub fn number(v: Option<String>) -> Option<u64> {
    numbers::count_text(&v?).value
}

/// Unix seconds as a score or `"s.mmm"`, to the millisecond, by the rules
/// of [`crate::numbers`]; `None` when it is no time at all.
pub fn seconds(s: &str) -> Option<SystemTime> {
    numbers::time_text(s).value.map(numbers::Time::system_time)
}

/// A job's traceparent as a script read it from the hash ("" when absent):
/// `None` when absent or not a traceparent by
/// [`crate::validate::traceparent`]'s rule (anyone with Redis access may
/// have written it: the job is still handed out, and the first such value
/// is said on stderr).
pub fn traceparent(id: &str, v: Option<Value>) -> Result<Option<String>> {
    Ok(from_redis(id, bytes(v)?))
}

/// Whether a malformed traceparent was already said.
static WARNED: AtomicBool = AtomicBool::new(false);

/// The traceparent a script read from job `id`'s hash ("" when absent):
/// `None` when absent or malformed.
fn from_redis(id: &str, value: Vec<u8>) -> Option<String> {
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
    fn a_wait_instruction_is_read_within_range_and_nothing_else_is_one() {
        let w =
            |ms: Value| Value::Array(vec![Value::BulkString(b"paused".to_vec()), ms, Value::BulkString(b"g".to_vec())]);
        let read = flow_wait(&w(Value::Int(5000))).expect("a wait");
        assert_eq!((read.gate.as_slice(), read.recheck), (&b"g"[..], Duration::from_secs(5)));
        assert_eq!(flow_wait(&w(Value::Int(0))).expect("w").recheck, Duration::from_millis(1));
        assert_eq!(flow_wait(&w(Value::Int(-4))).expect("w").recheck, Duration::from_millis(1));
        assert_eq!(flow_wait(&w(Value::Int(i64::MAX))).expect("w").recheck, MAX_RECHECK);
        assert_eq!(flow_wait(&w(Value::BulkString(b"250".to_vec()))).expect("w").recheck, Duration::from_millis(250));
        let job =
            Value::Array(["x", "t", "body", ""].iter().map(|s| Value::BulkString(s.as_bytes().to_vec())).collect());
        assert_eq!(flow_wait(&job), None);
        let three =
            Value::Array(vec![Value::BulkString(b"x".to_vec()), Value::Int(1), Value::BulkString(b"g".to_vec())]);
        assert_eq!(flow_wait(&three), None);
        assert_eq!(flow_wait(&Value::Nil), None);
    }

    #[test]
    fn a_flow_reply_reads_its_limit_and_a_damaged_one_as_none() {
        let reply = |fields: [&str; 6]| Value::Array(fields.map(|f| Value::BulkString(f.as_bytes().to_vec())).to_vec());
        let state = flow_state(reply(["", "1", "1700000000.125", "3", "0.5", "1"])).expect("a state");
        assert_eq!(state.rate_limit, Some(RateLimit { per_second: 0.5, burst: 1 }));
        assert_eq!((state.paused_since, state.held, state.changed), (None, 3, true));
        let none = flow_state(reply(["1700000000.000", "0", "1700000000.125", "0", "", ""])).expect("a state");
        assert_eq!(none.rate_limit, None);
        assert!(none.paused_since.is_some());
        for (rate, burst) in [("fast", "5"), ("5", "x"), ("5", ""), ("", "5"), ("-1", "5"), ("0", "5"), ("inf", "5")] {
            let state = flow_state(reply(["", "0", "1700000000.125", "0", rate, burst])).expect("read all the same");
            assert_eq!(state.rate_limit, None, "{rate:?} {burst:?}");
        }
        assert!(flow_state(Value::Array(vec![Value::Nil; 4])).is_err(), "the old four fields");
    }

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
