//! Reading `<state root>/logs/internal/`: every `<name>.log` there (the socket filters', and the
//! egress proxy's diagnostics in `egress.log`), each line `<unix ms> <text>`, merged by time.

use std::io;
use std::path::{Path, PathBuf};

use airlock_config::logfile::{self, Tail};

/// One line of an internal log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InternalLine {
    /// The log's name: the filter (`herdr`, `kitty`, `docker`) or `egress`.
    pub log: String,
    pub unix_ms: i64,
    /// What follows the time, as written (a filter's `<method> allow|deny <reason>`).
    pub text: String,
}

/// The logs in `dir`: the `<name>` of every `<name>.log`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let stem = name.strip_suffix(".log")?;
            (!stem.is_empty() && entry.file_type().ok()?.is_file()).then(|| stem.to_owned())
        })
        .collect();
    names.sort();
    names
}

/// The internal logs of one sandbox being read: all of them, or one.
pub struct InternalLogs {
    dir: PathBuf,
    only: Option<String>,
    tails: Vec<(String, Tail)>,
    unreadable: usize,
}

impl InternalLogs {
    /// The logs in `dir`: the `<name>` of every `<name>.log` there, sorted.
    pub fn names(dir: &Path) -> Vec<String> {
        names(dir)
    }

    /// The logs in `dir`, or only `<only>.log` (a name from [`InternalLogs::names`]).
    pub fn new(dir: &Path, only: Option<&str>) -> InternalLogs {
        InternalLogs {
            dir: dir.to_path_buf(),
            only: only.map(str::to_owned),
            tails: Vec::new(),
            unreadable: 0,
        }
    }

    /// The `n` latest lines by time across the logs, oldest first (rotated files read too).
    pub fn latest(&mut self, n: usize) -> io::Result<Vec<InternalLine>> {
        let mut all = Vec::new();
        for name in self.selected() {
            let path = self.dir.join(format!("{name}.log"));
            let unreadable = &mut self.unreadable;
            let tail = logfile::read(&path, |line| match parse(&name, line) {
                Some(line) => all.push(line),
                None => *unreadable += 1,
            })?;
            self.tails.push((name, tail));
        }
        // Each log is in time order already; a stable sort merges them.
        all.sort_by_key(|l| l.unix_ms);
        let skip = all.len().saturating_sub(n);
        Ok(all.split_off(skip))
    }

    /// The lines appended since the last call (or [`InternalLogs::latest`]), in time order; a
    /// log that appears meanwhile is read from its start.
    pub fn poll(&mut self) -> io::Result<Vec<InternalLine>> {
        for name in self.selected() {
            if !self.tails.iter().any(|(n, _)| *n == name) {
                let tail = Tail::new(&self.dir.join(format!("{name}.log")));
                self.tails.push((name, tail));
            }
        }
        let mut new = Vec::new();
        for (name, tail) in &mut self.tails {
            let unreadable = &mut self.unreadable;
            tail.poll(|line| match parse(name, line) {
                Some(line) => new.push(line),
                None => *unreadable += 1,
            })?;
        }
        new.sort_by_key(|l| l.unix_ms);
        Ok(new)
    }

    /// How many lines did not start with a time since the last call (skipped).
    pub fn take_unreadable(&mut self) -> usize {
        std::mem::take(&mut self.unreadable)
    }

    fn selected(&self) -> Vec<String> {
        match &self.only {
            Some(name) => vec![name.clone()],
            None => names(&self.dir),
        }
    }
}

fn parse(log: &str, line: &[u8]) -> Option<InternalLine> {
    let line = std::str::from_utf8(line).ok()?;
    let (ms, text) = line.split_once(' ')?;
    Some(InternalLine {
        log: log.to_owned(),
        unix_ms: ms.parse().ok()?,
        text: text.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{Decision, DecisionLog};

    #[test]
    fn logs_are_merged_by_time_and_followed() {
        let state = tempfile::tempdir().unwrap();
        let dir = state.path().join("logs/internal");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("herdr.log"),
            "100 pane.read allow owned\n300 pane.close deny not owned\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("egress.log"),
            "200 cannot accept a connection\ngarbage\n",
        )
        .unwrap();
        std::fs::write(dir.join("notes.txt"), "400 not a log\n").unwrap();
        assert_eq!(names(&dir), ["egress", "herdr"]);

        let mut logs = InternalLogs::new(&dir, None);
        let got: Vec<(String, i64)> = logs
            .latest(10)
            .unwrap()
            .into_iter()
            .map(|l| (l.log, l.unix_ms))
            .collect();
        assert_eq!(
            got,
            [
                ("herdr".into(), 100),
                ("egress".into(), 200),
                ("herdr".into(), 300)
            ]
        );
        assert_eq!(logs.take_unreadable(), 1);

        DecisionLog::open(state.path(), "kitty").write("ls", Decision::Allow, "own window");
        DecisionLog::open(state.path(), "herdr").write("pane.list", Decision::Allow, "scoped");
        let new = logs.poll().unwrap();
        let mut got: Vec<(&str, &str)> = new
            .iter()
            .map(|l| (l.log.as_str(), l.text.as_str()))
            .collect();
        got.sort();
        assert_eq!(
            got,
            [
                ("herdr", "pane.list allow scoped"),
                ("kitty", "ls allow own window")
            ]
        );

        let mut only = InternalLogs::new(&dir, Some("herdr"));
        let last = only.latest(1).unwrap();
        assert_eq!(last[0].text, "pane.list allow scoped");
    }
}
