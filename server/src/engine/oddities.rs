//! Odd numbers read from Redis, said once per key.
//!
//! Every number the server reads from Redis goes through
//! `delayer_protocol::numbers`, which reads it into range and says what was odd (a
//! score of `inf`, a wake-up of `abc`). This module says so in the error
//! log, once per key (and member), not once per tick: a bad score met every
//! second would otherwise flood the log. The set of keys said is bounded,
//! and past `MAX_KEYS` one line says that further ones go unnamed, so a
//! flood of odd keys (or of junk wake-up messages) cannot grow memory or the
//! log without end.

use delayer_protocol::numbers::Read;
use std::collections::HashSet;
use std::sync::Mutex;

/// Keys named at most; then one line, and silence.
const MAX_KEYS: usize = 1000;

static SAID: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// Says, once for `key`, that the number read there (`raw`) was odd and
/// `how` it is taken. `what` names the number ("the earliest due time").
pub fn report(key: &str, what: &str, raw: &str, how: &str) {
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    let said = said.get_or_insert_with(HashSet::new);
    if said.contains(key) {
        return;
    }
    if said.len() == MAX_KEYS {
        log::warn!("more keys hold odd numbers than are named here ({MAX_KEYS}); further ones are handled unnamed");
        said.insert(key.to_string());
        return;
    }
    if said.len() > MAX_KEYS {
        return;
    }
    said.insert(key.to_string());
    // Shown quoted and cut: the text came from Redis, and may be anything.
    let shown: String = raw.chars().take(40).collect();
    log::warn!("{key}: {what} {shown:?} {how} (said once for this key)");
}

/// `read`'s value, reported first when it was odd; `whence` gives the key
/// it was read from and its text as read (built only then).
pub fn checked<T>(read: Read<T>, what: &str, whence: impl FnOnce() -> (String, String)) -> Option<T> {
    if let Some(odd) = read.odd {
        let (key, raw) = whence();
        report(&key, what, &raw, odd.taken_as());
    }
    read.value
}

#[cfg(test)]
mod tests {
    use super::*;
    use delayer_protocol::numbers::time_text;

    #[test]
    fn the_value_is_kept_whatever_is_said() {
        let time = checked(time_text("inf"), "a time", || ("k".into(), "inf".into()));
        assert_eq!(time, Some(delayer_protocol::numbers::Time::LATEST));
        assert_eq!(checked(time_text("abc"), "a time", || ("k".into(), "abc".into())), None);
        assert!(SAID.lock().unwrap_or_else(|e| e.into_inner()).as_ref().is_some_and(|s| s.contains("k")));
    }
}
