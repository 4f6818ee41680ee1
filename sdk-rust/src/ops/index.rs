//! The per-topic layout's index write (PROTOCOL.md, "The index write"):
//! after a call that schedules or reserves, the topic's time goes into
//! `<prefix>due` (and a pushed topic into `<prefix>topics`), and a time that
//! lowered the index is published on the wake channel. The scripts cannot
//! do it themselves: the index lives outside the topic's hash slot.

use super::Request;
use crate::connection::Batch;
use crate::keys::Names;
use redis::Value;
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
    /// one round trip; read its reply with [`IndexNote::lowered`].
    pub(crate) fn write(&self, names: &Names) -> Option<Request> {
        let mut batch = Batch::new();
        self.add_write(names, &mut batch)?;
        Some(Request::Batch(batch))
    }

    /// Adds the index write to `batch` (its one reply: ZADD's); `None` in
    /// the classic layout.
    pub(crate) fn add_write(&self, names: &Names, batch: &mut Batch) -> Option<()> {
        let index = names.index()?;
        batch.add(redis::cmd("ZADD").arg(index.due()).arg("LT").arg("CH").arg(&self.time).arg(&self.topic).clone());
        if self.pushed {
            batch.add_ignored(redis::cmd("SADD").arg(index.topics()).arg(&self.topic).clone());
        }
        Some(())
    }

    /// Whether this note's time is later than `other`'s (a note for now is
    /// never later).
    pub(crate) fn is_later_than(&self, other: &IndexNote) -> bool {
        match (self.at, other.at) {
            (Some(a), Some(b)) => seconds(a) != seconds(b) && a > b,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// Whether the write lowered (or added) the topic's index entry.
    pub(crate) fn lowered(reply: &Value) -> bool {
        matches!(reply, Value::Array(items) if matches!(items.first(), Some(Value::Int(n)) if *n > 0))
    }

    /// `PUBLISH <prefix>wake <time>`, for a write that lowered the index.
    pub(crate) fn wake(&self, names: &Names) -> Option<Request> {
        let index = names.index()?;
        let mut batch = Batch::new();
        batch.add_ignored(redis::cmd("PUBLISH").arg(index.wake()).arg(&self.time).clone());
        Some(Request::Batch(batch))
    }
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
    fn lowered_reads_zadd_ch() {
        assert!(IndexNote::lowered(&Value::Array(vec![Value::Int(1)])));
        assert!(!IndexNote::lowered(&Value::Array(vec![Value::Int(0)])));
        assert!(!IndexNote::lowered(&Value::Nil));
    }
}
