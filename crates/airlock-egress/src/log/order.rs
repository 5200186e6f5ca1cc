//! Putting decisions in `time` order. Records are written when their connection closes, so a long
//! tunnel is logged after requests that arrived later; readers sort. A snapshot sorts exactly
//! ([`Latest`]); following the log holds new records for a moment ([`Reorder`]).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use super::read::Logged;

/// The `n` latest records by `time` (ties in the order read), in a heap of `n`.
pub struct Latest {
    n: usize,
    heap: BinaryHeap<Reverse<Logged>>,
}

impl Latest {
    pub fn new(n: usize) -> Latest {
        Latest {
            n,
            heap: BinaryHeap::with_capacity(n.min(4096) + 1),
        }
    }

    pub fn push(&mut self, logged: Logged) {
        if self.n == 0 {
            return;
        }
        self.heap.push(Reverse(logged));
        if self.heap.len() > self.n {
            self.heap.pop();
        }
    }

    /// Oldest first.
    pub fn into_sorted(self) -> Vec<Logged> {
        let mut out: Vec<Logged> = self.heap.into_iter().map(|Reverse(l)| l).collect();
        out.sort();
        out
    }
}

/// How long `airlock logs network -f` holds a new record before printing it, so that one whose
/// connection closed up to this much later than a younger one's still prints first.
pub const FOLLOW_WINDOW: Duration = Duration::from_secs(2);

/// New records held for a window and let out in `time` order. A record whose connection lasted
/// longer than the window comes out when it is read, after younger ones: holding it longer would
/// mean holding every line for as long as the longest tunnel.
pub struct Reorder {
    window: Duration,
    held: Vec<(Instant, Logged)>,
}

impl Reorder {
    pub fn new(window: Duration) -> Reorder {
        Reorder {
            window,
            held: Vec::new(),
        }
    }

    /// Holds `logged`, read at `now`.
    pub fn push(&mut self, logged: Logged, now: Instant) {
        self.held.push((now + self.window, logged));
    }

    /// The records due at `now`, oldest `time` first: each one held for the window, and every
    /// held one older than it.
    pub fn due(&mut self, now: Instant) -> Vec<Logged> {
        self.held.sort_by(|a, b| a.1.cmp(&b.1));
        let Some(last_due) = self.held.iter().rposition(|(due, _)| *due <= now) else {
            return Vec::new();
        };
        self.held.drain(..=last_due).map(|(_, l)| l).collect()
    }

    /// When the next record falls due, if one is held.
    pub fn next_due(&self) -> Option<Instant> {
        self.held.iter().map(|(due, _)| *due).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::read::tests::logged;

    fn times(records: &[Logged]) -> Vec<i64> {
        records.iter().map(|l| l.time).collect()
    }

    #[test]
    fn latest_keeps_the_n_newest_by_time_not_by_position() {
        let mut latest = Latest::new(3);
        // A tunnel that arrived at 1 is logged last, after shorter requests.
        for (seq, time) in [10, 20, 30, 40, 1].into_iter().enumerate() {
            latest.push(logged(time, seq as u64));
        }
        assert_eq!(times(&latest.into_sorted()), [20, 30, 40]);
        let mut all = Latest::new(10);
        for (seq, time) in [10, 20, 5, 20, 1].into_iter().enumerate() {
            all.push(logged(time, seq as u64));
        }
        let sorted = all.into_sorted();
        assert_eq!(times(&sorted), [1, 5, 10, 20, 20]);
        assert!(sorted[3].seq < sorted[4].seq, "ties keep the order read");
        let mut none = Latest::new(0);
        none.push(logged(1, 0));
        assert!(none.into_sorted().is_empty());
    }

    #[test]
    fn reorder_lets_records_out_in_time_order_after_the_window() {
        let start = Instant::now();
        let s = Duration::from_secs;
        let mut r = Reorder::new(s(2));
        r.push(logged(300, 0), start);
        r.push(logged(100, 1), start + s(1));
        assert!(r.due(start + s(1)).is_empty(), "nothing held 2 s yet");
        assert_eq!(r.next_due(), Some(start + s(2)));
        // At 2 s the first is due, and the older one read after it comes out before it.
        assert_eq!(times(&r.due(start + s(2))), [100, 300]);
        r.push(logged(500, 2), start + s(3));
        r.push(logged(450, 3), start + s(4));
        r.push(logged(400, 4), start + s(4));
        // 500 is due at 5 s and takes the older ones read meanwhile with it.
        assert_eq!(times(&r.due(start + s(5))), [400, 450, 500]);
        // Read later than the window allows: out after younger ones, not lost.
        r.push(logged(200, 5), start + s(6));
        assert!(r.due(start + s(7)).is_empty());
        assert_eq!(times(&r.due(start + s(8))), [200]);
        assert_eq!(r.next_due(), None);
    }
}
