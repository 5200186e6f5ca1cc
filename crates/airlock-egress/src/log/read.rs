//! Reading a decision log back: `network.jsonl` and its rotated files, oldest first, lines that
//! are not records counted and skipped, then what is appended later.

use std::cmp::Ordering;
use std::io;
use std::path::{Path, PathBuf};

use airlock_config::logfile::{self, Tail};

use super::order::Latest;
use super::query::Query;
use super::record::{LogRecord, unix_millis_from_rfc3339};

/// One decision read back.
#[derive(Debug, Clone)]
pub struct Logged {
    pub record: LogRecord,
    /// `record.time` in unix milliseconds.
    pub time: i64,
    /// The line as logged (what `--json` prints).
    pub line: String,
    /// Its place in the reading order, which breaks ties in `time`.
    pub seq: u64,
}

impl Logged {
    fn key(&self) -> (i64, u64) {
        (self.time, self.seq)
    }
}

/// Ordered by `time`, then by the order read.
impl Ord for Logged {
    fn cmp(&self, other: &Logged) -> Ordering {
        self.key().cmp(&other.key())
    }
}

impl PartialOrd for Logged {
    fn partial_cmp(&self, other: &Logged) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Logged {
    fn eq(&self, other: &Logged) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Logged {}

/// A sandbox's decision log being read.
pub struct LogReader {
    path: PathBuf,
    tail: Option<Tail>,
    seq: u64,
    unreadable: usize,
}

impl LogReader {
    /// The log at `path` (`<state root>/logs/network.jsonl`) and its rotated files.
    pub fn new(path: &Path) -> LogReader {
        LogReader {
            path: path.to_path_buf(),
            tail: None,
            seq: 0,
            unreadable: 0,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the log or a rotated file of it exists.
    pub fn exists(&self) -> bool {
        !logfile::files_oldest_first(&self.path).is_empty()
    }

    /// Passes every record `query` keeps to `each` in the order read (rotated files first, each
    /// as written); [`LogReader::poll`] goes on after the last whole line.
    pub fn scan(&mut self, query: &Query, mut each: impl FnMut(Logged)) -> io::Result<()> {
        let (seq, unreadable) = (&mut self.seq, &mut self.unreadable);
        let tail = logfile::read(&self.path, |line| {
            keep(line, query, seq, unreadable, &mut each);
        })?;
        self.tail = Some(tail);
        Ok(())
    }

    /// The `n` latest records by `time` that `query` keeps, oldest first.
    pub fn latest(&mut self, query: &Query, n: usize) -> io::Result<Vec<Logged>> {
        let mut latest = Latest::new(n);
        self.scan(query, |logged| latest.push(logged))?;
        Ok(latest.into_sorted())
    }

    /// Passes the records appended since the last scan or poll that `query` keeps, in the order
    /// read, across rotations.
    pub fn poll(&mut self, query: &Query, mut each: impl FnMut(Logged)) -> io::Result<()> {
        let tail = self.tail.get_or_insert_with(|| Tail::new(&self.path));
        let (seq, unreadable) = (&mut self.seq, &mut self.unreadable);
        tail.poll(|line| keep(line, query, seq, unreadable, &mut each))
    }

    /// How many lines were not decision records (a half-written line, garbage) since the last
    /// call. They are skipped, never fatal.
    pub fn take_unreadable(&mut self) -> usize {
        std::mem::take(&mut self.unreadable)
    }
}

fn keep(
    line: &[u8],
    query: &Query,
    seq: &mut u64,
    unreadable: &mut usize,
    each: &mut impl FnMut(Logged),
) {
    *seq += 1;
    match parse(line, *seq) {
        Some(logged) if query.keeps(&logged.record, logged.time) => each(logged),
        Some(_) => {}
        None => *unreadable += 1,
    }
}

/// A record, or `None` for a line that is not one (its `time` must be RFC 3339 too).
fn parse(line: &[u8], seq: u64) -> Option<Logged> {
    let record: LogRecord = serde_json::from_slice(line).ok()?;
    let time = unix_millis_from_rfc3339(&record.time)?;
    let line = String::from_utf8(line.to_vec()).ok()?;
    Some(Logged {
        record,
        time,
        line,
        seq,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::log::record::{LogDecision, rfc3339_from_unix_millis};

    pub(crate) fn record(time: i64, host: &str) -> LogRecord {
        LogRecord {
            time: rfc3339_from_unix_millis(time),
            host: host.into(),
            port: 443,
            method: "CONNECT".into(),
            decision: LogDecision::Allowed,
            status: None,
            rule: None,
            bytes_up: 0,
            bytes_down: 0,
            duration_ms: 0,
            reason: None,
            via: None,
            credentials: Vec::new(),
        }
    }

    pub(crate) fn logged(time: i64, seq: u64) -> Logged {
        let record = record(time, "example.org");
        Logged {
            line: serde_json::to_string(&record).unwrap(),
            record,
            time,
            seq,
        }
    }

    fn line(time: i64, host: &str) -> String {
        serde_json::to_string(&record(time, host)).unwrap() + "\n"
    }

    #[test]
    fn rotated_files_are_read_oldest_first_and_bad_lines_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("network.jsonl");
        std::fs::write(logfile::numbered(&path, 2), line(1_000, "a.test")).unwrap();
        std::fs::write(
            logfile::numbered(&path, 1),
            format!("{}not json\n{{\"time\":\"nope\"}}\n", line(2_000, "b.test")),
        )
        .unwrap();
        std::fs::write(
            &path,
            format!("{}{{\"time\":\"2026-", line(3_000, "c.test")),
        )
        .unwrap();
        let mut reader = LogReader::new(&path);
        let mut hosts = Vec::new();
        reader
            .scan(&Query::default(), |l| hosts.push(l.record.host))
            .unwrap();
        assert_eq!(hosts, ["a.test", "b.test", "c.test"]);
        // Two bad lines; the current file's unfinished last line is not counted: it is being written.
        assert_eq!(reader.take_unreadable(), 2);
        assert_eq!(reader.take_unreadable(), 0);

        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        use std::io::Write as _;
        file.write_all(b"11-29T18:22:34.123Z\"}\n").unwrap();
        file.write_all(line(4_000, "d.test").as_bytes()).unwrap();
        let mut more = Vec::new();
        reader
            .poll(&Query::default(), |l| more.push(l.record.host))
            .unwrap();
        assert_eq!(more, ["d.test"]);
        assert_eq!(reader.take_unreadable(), 1, "the finished line has no host");
    }

    #[test]
    fn latest_is_by_time_and_filtered() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("network.jsonl");
        let text: String = [
            (5_000, "short.test"),
            (6_000, "short.test"),
            (1_000, "tunnel.test"),
        ]
        .iter()
        .map(|(t, h)| line(*t, h))
        .collect();
        std::fs::write(&path, text).unwrap();
        let times = |v: Vec<Logged>| v.iter().map(|l| l.time).collect::<Vec<_>>();
        let mut reader = LogReader::new(&path);
        assert_eq!(
            times(reader.latest(&Query::default(), 10).unwrap()),
            [1_000, 5_000, 6_000]
        );
        assert_eq!(
            times(reader.latest(&Query::default(), 2).unwrap()),
            [5_000, 6_000]
        );
        let tunnel = Query::default().hosts(&["tunnel.*".into()]).unwrap();
        assert_eq!(times(reader.latest(&tunnel, 2).unwrap()), [1_000]);
        assert!(!LogReader::new(&dir.path().join("none")).exists());
        assert!(reader.exists());
    }
}
