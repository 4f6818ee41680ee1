//! The per-topic layout's index write (PROTOCOL.md, "The index write"):
//! after a call that schedules or reserves, the topic's time goes into
//! `<prefix>due` (and a pushed topic into `<prefix>topics`), and a time that
//! lowered the index is published on the wake channel. The scripts cannot
//! do it themselves: the index lives outside the topic's hash slot.
//!
//! The index is a hint the server repairs (its sweeps read every topic's
//! pool head within about 10 s): an index command Redis refuses (a key of
//! another type, a full Redis, an ACL) does not fail the call whose script
//! ran. [`heard`] is the one place that decides it, and warns once per key
//! and command. A lost connection still fails the call, as before: whether
//! the script ran is then unknown.

use super::{Op, Request};
use crate::connection::Batch;
use crate::keys::Names;
use redis::Value;
use std::collections::HashSet;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// What the index is told.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IndexNote {
    topic: String,
    /// Unix seconds, as the scripts answer them ("s.mmm"), or "0".
    time: String,
    /// The time (`None`: now).
    at: Option<SystemTime>,
    /// A push: the topic joins `<prefix>topics`.
    pushed: bool,
}

impl IndexNote {
    /// `topic` needs the server at `time` (`None`: now, as after a requeue).
    /// `None` in the classic layout, whose scripts keep their own index.
    pub(crate) fn new(names: &Names, topic: &str, time: Option<SystemTime>, pushed: bool) -> Option<IndexNote> {
        names.index()?;
        let at = time;
        let time = match time {
            Some(t) => seconds(t),
            None => "0".to_string(),
        };
        Some(IndexNote { topic: topic.to_string(), time, at, pushed })
    }

    /// The earliest of `times` for `topic` (nothing when there are none).
    pub(crate) fn earliest(
        names: &Names,
        topic: &str,
        times: impl IntoIterator<Item = SystemTime>,
        pushed: bool,
    ) -> Option<IndexNote> {
        let first = times.into_iter().min()?;
        IndexNote::new(names, topic, Some(first), pushed)
    }

    /// `ZADD <prefix>due LT CH <time> <topic>` (and `SADD` for a push), in
    /// one round trip; read its reply with [`IndexNote::read`].
    fn write(&self, names: &Names) -> Option<Request> {
        let mut batch = Batch::new();
        self.add_write(names, &mut batch)?;
        Some(Request::Batch(batch))
    }

    /// Adds the index write to `batch` as hints (ZADD's reply, then for a
    /// push SADD's: [`IndexNote::replies`] of them); `None` in the classic
    /// layout.
    fn add_write(&self, names: &Names, batch: &mut Batch) -> Option<()> {
        let index = names.index()?;
        batch
            .add_hint(redis::cmd("ZADD").arg(index.due()).arg("LT").arg("CH").arg(&self.time).arg(&self.topic).clone());
        if self.pushed {
            batch.add_hint(redis::cmd("SADD").arg(index.topics()).arg(&self.topic).clone());
        }
        Some(())
    }

    /// Reads the index write's replies (ZADD's, then SADD's for a push):
    /// whether it lowered (or added) the topic's entry. A refused command
    /// is [`heard`]: warned, never the call's error.
    fn read(&self, names: &Names, replies: impl IntoIterator<Item = Value>) -> bool {
        let Some(index) = names.index() else { return false };
        let mut replies = replies.into_iter();
        let zadd = heard(&index.due(), "ZADD", replies.next().unwrap_or(Value::Nil));
        if self.pushed {
            heard(&index.topics(), "SADD", replies.next().unwrap_or(Value::Nil));
        }
        matches!(zadd, Some(Value::Int(n)) if n > 0)
    }

    /// [`IndexNote::read`] of a whole reply to [`IndexNote::write`].
    fn lowered(&self, names: &Names, reply: Value) -> bool {
        match reply {
            Value::Array(items) => self.read(names, items),
            other => self.read(names, [other]),
        }
    }

    /// `PUBLISH <prefix>wake <time>`, for a write that lowered the index;
    /// read its reply with [`IndexNote::woke`].
    fn wake(&self, names: &Names) -> Option<Request> {
        let index = names.index()?;
        let mut batch = Batch::new();
        batch.add_hint(redis::cmd("PUBLISH").arg(index.wake()).arg(&self.time).clone());
        Some(Request::Batch(batch))
    }

    /// Reads the reply to [`IndexNote::wake`]: a refusal (an ACL user
    /// without the channel) is [`heard`].
    fn woke(names: &Names, reply: Value) {
        if let (Some(index), Value::Array(mut items)) = (names.index(), reply) {
            heard(&index.wake(), "PUBLISH", items.pop().unwrap_or(Value::Nil));
        }
    }
}

/// `out`, after the index write of `note` (and its wake message when it
/// lowered the index); `out` at once without a note (the classic layout).
pub(crate) fn noted<'a, T: Send + 'a>(names: &'a Names, note: Option<IndexNote>, out: T) -> Op<'a, T> {
    let Some((note, write)) = note.and_then(|n| n.write(names).map(|w| (n, w))) else { return Op::done(out) };
    Op::call(write, move |reply| Ok(note.lowered(names, reply).then_some(note))).then(move |lowered| {
        // Only a wake-up, as push.lua's pcall'd PUBLISH: a refusal is heard.
        Ok(match lowered.and_then(|note| note.wake(names)) {
            Some(wake) => Op::call(wake, move |reply| {
                IndexNote::woke(names, reply);
                Ok(out)
            }),
            None => Op::done(out),
        })
    })
}

/// The (key, command) pairs already warned about: a bounded set (three
/// keys per prefix), so a broken index costs one line, not one per call.
static WARNED: Mutex<Option<HashSet<(String, &'static str)>>> = Mutex::new(None);

/// An index command's reply, or `None` when Redis refused it: then, once
/// per key and command in this process, a warning on stderr naming the key.
/// The one place that decides a refused index write is not the call's
/// error (the call's script ran; the server's sweep repairs the index).
pub(crate) fn heard(key: &str, command: &'static str, reply: Value) -> Option<Value> {
    let Value::ServerError(e) = reply else { return Some(reply) };
    if let Some(line) = warning(key, command, &format!("{}: {}", e.code(), e.details().unwrap_or(""))) {
        eprintln!("{line}");
    }
    None
}

/// The warning for a refused index command, the first time only.
fn warning(key: &str, command: &'static str, error: &str) -> Option<String> {
    let mut warned = WARNED.lock().unwrap_or_else(|p| p.into_inner());
    warned.get_or_insert_with(HashSet::new).insert((key.to_string(), command)).then(|| {
        format!(
            "delayer: warning: the index write {command} {key:?} failed ({error}); the call went on, and the \
             server's sweep repairs the index within about 10 s (further failures of it not logged)"
        )
    })
}

/// Unix seconds with milliseconds, as the scripts write scores.
fn seconds(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    format!("{}.{:03}", d.as_secs(), d.subsec_millis())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Layout;
    use std::time::Duration;

    #[test]
    fn only_the_per_topic_layout_writes_an_index() {
        let at = UNIX_EPOCH + Duration::from_millis(1_763_750_000_125);
        assert_eq!(IndexNote::new(&Names::new("d:", Layout::Classic), "t", Some(at), true), None);
        let note = IndexNote::new(&Names::new("d:", Layout::Topic), "t", Some(at), true).expect("a note");
        assert_eq!(note.time, "1763750000.125");
        let requeued = IndexNote::new(&Names::new("d:", Layout::Topic), "t", None, false).expect("a note");
        assert_eq!(requeued.time, "0");
    }

    #[test]
    fn a_refused_index_command_is_warned_once_per_key_and_command() {
        let line = warning("w:due", "ZADD", "WRONGTYPE").expect("the first time");
        assert!(line.contains("\"w:due\"") && line.contains("WRONGTYPE") && line.contains("10 s"), "{line}");
        assert_eq!(warning("w:due", "ZADD", "OOM"), None, "once");
        assert!(warning("w:due", "PUBLISH", "NOPERM").is_some(), "per command");
        assert!(warning("w:topics", "ZADD", "WRONGTYPE").is_some(), "per key");
    }

    #[test]
    fn lowered_reads_zadd_ch() {
        let names = Names::new("d:", Layout::Topic);
        let note = IndexNote::new(&names, "t", None, false).expect("a note");
        assert!(note.lowered(&names, Value::Array(vec![Value::Int(1)])));
        assert!(!note.lowered(&names, Value::Array(vec![Value::Int(0)])));
        assert!(!note.lowered(&names, Value::Nil));
    }
}
