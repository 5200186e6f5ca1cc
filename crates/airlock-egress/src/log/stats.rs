//! `--stats`: decisions summed per host.

use std::collections::BTreeMap;

use serde::Serialize;

use super::read::Logged;
use super::record::LogDecision;

/// Requests to one host by decision.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub requests: u64,
    pub allowed: u64,
    pub denied: u64,
    pub errors: u64,
}

impl Counts {
    pub fn add(&mut self, decision: LogDecision) {
        self.requests += 1;
        match decision {
            LogDecision::Allowed => self.allowed += 1,
            LogDecision::Denied => self.denied += 1,
            LogDecision::Error => self.errors += 1,
        }
    }
}

/// One row of `airlock logs network --stats` (and of its `--json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostStats {
    /// The host (empty for requests too malformed to name one).
    pub host: String,
    #[serde(flatten)]
    pub counts: Counts,
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// The earliest and latest `time` of its requests.
    pub first_seen: String,
    pub last_seen: String,
}

/// Sums records per host as they are read.
#[derive(Debug, Default)]
pub struct Stats {
    hosts: BTreeMap<String, (HostStats, i64, i64)>,
}

impl Stats {
    pub fn add(&mut self, logged: &Logged) {
        let r = &logged.record;
        let (row, first, last) = self.hosts.entry(r.host.clone()).or_insert_with(|| {
            let row = HostStats {
                host: r.host.clone(),
                counts: Counts::default(),
                bytes_up: 0,
                bytes_down: 0,
                first_seen: r.time.clone(),
                last_seen: r.time.clone(),
            };
            (row, logged.time, logged.time)
        });
        row.counts.add(r.decision);
        row.bytes_up = row.bytes_up.saturating_add(r.bytes_up);
        row.bytes_down = row.bytes_down.saturating_add(r.bytes_down);
        if logged.time < *first {
            (*first, row.first_seen) = (logged.time, r.time.clone());
        }
        if logged.time > *last {
            (*last, row.last_seen) = (logged.time, r.time.clone());
        }
    }

    /// Busiest host first (ties by name).
    pub fn rows(self) -> Vec<HostStats> {
        let mut rows: Vec<HostStats> = self.hosts.into_values().map(|(row, _, _)| row).collect();
        rows.sort_by(|a, b| {
            b.counts
                .requests
                .cmp(&a.counts.requests)
                .then_with(|| a.host.cmp(&b.host))
        });
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::read::tests::record;

    fn logged(time: i64, host: &str, decision: LogDecision, up: u64, down: u64) -> Logged {
        let mut record = record(time, host);
        record.decision = decision;
        record.bytes_up = up;
        record.bytes_down = down;
        Logged {
            line: String::new(),
            record,
            time,
            seq: 0,
        }
    }

    #[test]
    fn per_host_counts_bytes_and_first_and_last_seen() {
        let mut stats = Stats::default();
        stats.add(&logged(2_000, "b.test", LogDecision::Allowed, 10, 100));
        stats.add(&logged(1_000, "b.test", LogDecision::Denied, 0, 0));
        stats.add(&logged(3_000, "b.test", LogDecision::Error, 1, 2));
        stats.add(&logged(500, "a.test", LogDecision::Denied, 0, 0));
        let rows = stats.rows();
        assert_eq!(rows.len(), 2);
        let b = &rows[0];
        assert_eq!(b.host, "b.test");
        assert_eq!(
            b.counts,
            Counts {
                requests: 3,
                allowed: 1,
                denied: 1,
                errors: 1
            }
        );
        assert_eq!((b.bytes_up, b.bytes_down), (11, 102));
        assert_eq!(b.first_seen, "1970-01-01T00:00:01.000Z");
        assert_eq!(b.last_seen, "1970-01-01T00:00:03.000Z");
        let json = serde_json::to_value(&rows[1]).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"host": "a.test", "requests": 1, "allowed": 0, "denied": 1,
                "errors": 0, "bytes_up": 0, "bytes_down": 0,
                "first_seen": "1970-01-01T00:00:00.500Z", "last_seen": "1970-01-01T00:00:00.500Z"})
        );
    }
}
