//! Counting what may happen thousands of times a second (connections closed
//! at the cap, wrong tokens) so that the log says it with numbers, one line
//! per interval at most, instead of one line per event: an attack must not
//! be able to fill the disk through our log.

use std::time::{Duration, Instant};

/// Events of one kind (and one client, where the caller keys them) since
/// the last line about them.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    /// When the last line was written; `None`: never.
    last_line: Option<Instant>,
    /// Events since then.
    pending: u64,
}

impl Tally {
    /// No events yet (`const`, for a static).
    pub const fn new() -> Tally {
        Tally { last_line: None, pending: 0 }
    }

    /// Counts one event. `Some(n)` when a line is due: the first event ever,
    /// or the first once `every` has passed since the last line; `n` is the
    /// events the line is about (this one included).
    pub fn add(&mut self, now: Instant, every: Duration) -> Option<u64> {
        self.pending += 1;
        self.due(now, every)
    }

    /// `Some(n)` when events are pending and `every` has passed since the
    /// last line (or none was written): the count for a closing line.
    pub fn due(&mut self, now: Instant, every: Duration) -> Option<u64> {
        let quiet = self.last_line.is_none_or(|last| now.saturating_duration_since(last) >= every);
        if self.pending == 0 || !quiet {
            return None;
        }
        self.last_line = Some(now);
        Some(std::mem::take(&mut self.pending))
    }

    /// Events not reported yet.
    pub fn pending(&self) -> u64 {
        self.pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_with_the_count() {
        let every = Duration::from_secs(10);
        let t0 = Instant::now();
        let mut tally = Tally::default();
        assert_eq!(tally.add(t0, every), Some(1));
        let lines: Vec<u64> = (1..=1000).filter_map(|i| tally.add(t0 + Duration::from_millis(i), every)).collect();
        assert!(lines.is_empty(), "{lines:?}");
        assert_eq!((tally.pending(), tally.due(t0 + Duration::from_secs(5), every)), (1000, None));
        assert_eq!(tally.due(t0 + every, every), Some(1000));
        assert_eq!(tally.due(t0 + every * 3, every), None);
        assert_eq!(tally.add(t0 + every * 3, every), Some(1));
    }
}
