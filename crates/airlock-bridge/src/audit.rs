//! The audit log: one line per decision, never a secret.
//!
//! Lines look like `2026-11-29T18:22:04Z /open ok url="https://example.com/x"`. Only the fields a
//! route chooses to show are written, clipped and escaped by [`clip`]; credential input and output,
//! sound bytes and the token have no way in, because no route passes them here.

use std::fmt::Write as _;
use std::io;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use airlock_config::logfile::{RotatingFile, Rotation};

/// Refused unauthenticated requests are summed into one line at most this often: any local user
/// can send them, and a line each would let them flood the log.
pub const UNAUTHENTICATED_EVERY: Duration = Duration::from_secs(10);

/// How long a logged URL or path may be, in characters.
pub const LONG_FIELD: usize = 256;
/// How long a logged name may be, in characters.
pub const SHORT_FIELD: usize = 64;

/// The outcome of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Rejected(String),
    Failed(String),
}

/// The append-only log file (0600), shared by every connection. It rotates past 8 MiB into
/// `log.1` … `log.3` (the oldest dropped), so a flood cannot fill the disk.
#[derive(Debug)]
pub struct AuditLog {
    file: Mutex<Option<RotatingFile>>,
    unauthenticated: Mutex<Unauthenticated>,
}

#[derive(Debug, Default)]
struct Unauthenticated {
    pending: u64,
    last: Option<Instant>,
}

impl AuditLog {
    /// Opens `path` for appending, creating it 0600.
    pub fn open(path: &Path) -> io::Result<AuditLog> {
        Ok(AuditLog {
            file: Mutex::new(Some(RotatingFile::open(path, Rotation::default())?)),
            unauthenticated: Mutex::default(),
        })
    }

    /// A log that writes nowhere (unit tests).
    pub fn discard() -> AuditLog {
        AuditLog {
            file: Mutex::new(None),
            unauthenticated: Mutex::default(),
        }
    }

    /// Counts a request refused for a missing or wrong token; one line sums them at most every
    /// [`UNAUTHENTICATED_EVERY`].
    pub fn unauthenticated(&self, route: &str) {
        let mut state = match self.unauthenticated.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        state.pending += 1;
        let due = state
            .last
            .is_none_or(|last| last.elapsed() >= UNAUTHENTICATED_EVERY);
        if !due {
            return;
        }
        let n = std::mem::take(&mut state.pending);
        state.last = Some(Instant::now());
        drop(state);
        let what = if n == 1 {
            "1 request".to_owned()
        } else {
            format!("{n} requests")
        };
        self.record(
            route,
            &Outcome::Rejected(format!("bad token: {what} since the last such line")),
            &[],
        );
    }

    /// Writes one decision: `route`, its outcome, and `fields` as `key="value"` (already clipped).
    pub fn record(&self, route: &str, outcome: &Outcome, fields: &[(&str, String)]) {
        let mut line = format!(
            "{} {route} ",
            humantime::format_rfc3339_seconds(SystemTime::now())
        );
        match outcome {
            Outcome::Ok => line.push_str("ok"),
            Outcome::Rejected(reason) => {
                let _ = write!(line, "rejected ({})", clip(reason, LONG_FIELD));
            }
            Outcome::Failed(reason) => {
                let _ = write!(line, "failed ({})", clip(reason, 1024));
            }
        }
        for (key, value) in fields {
            let _ = write!(line, " {key}=\"{value}\"");
        }
        line.push('\n');
        self.note(&line);
    }

    /// Writes a free-form daemon message (start, stop, a listener that could not be bound).
    pub fn message(&self, text: &str) {
        let line = format!(
            "{} daemon {}\n",
            humantime::format_rfc3339_seconds(SystemTime::now()),
            clip(text, 1024)
        );
        self.note(&line);
    }

    fn note(&self, line: &str) {
        let mut guard = match self.file.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(sink) = guard.as_mut() {
            // One write per line, so concurrent decisions never interleave inside a line.
            let _ = sink.append(line.as_bytes());
        }
    }
}

/// `value` with control characters, quotes and backslashes escaped, cut to `max` characters (a cut
/// value ends in `…`). Keeps a hostile value from forging log lines.
pub fn clip(value: &str, max: usize) -> String {
    let mut out = String::new();
    for (count, c) in value.chars().enumerate() {
        if count == max {
            out.push('…');
            break;
        }
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use airlock_config::logfile::{
        DEFAULT_FILES as ROTATED_FILES, DEFAULT_MAX_BYTES as MAX_LOG_BYTES,
    };

    #[test]
    fn the_log_rotates_past_its_cap_keeping_three_old_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut full = vec![b'x'; MAX_LOG_BYTES as usize - 10];
        *full.last_mut().unwrap() = b'\n';
        std::fs::write(&path, full).unwrap();
        let log = AuditLog::open(&path).unwrap();
        for _ in 0..5 {
            log.record("/open", &Outcome::Ok, &[]);
        }
        let old = std::fs::metadata(dir.path().join("log.1")).unwrap().len();
        assert_eq!(old, MAX_LOG_BYTES - 10, "the full file moved to log.1");
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 5, "{text}");
        // The oldest beyond ROTATED_FILES is dropped.
        for n in 1..=ROTATED_FILES + 1 {
            let mut sink = log.file.lock().unwrap();
            sink.as_mut().unwrap().rotate();
            drop(sink);
            let _ = n;
        }
        assert!(dir.path().join(format!("log.{ROTATED_FILES}")).exists());
        assert!(
            !dir.path()
                .join(format!("log.{}", ROTATED_FILES + 1))
                .exists()
        );
    }

    #[test]
    fn unauthenticated_requests_are_summed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let log = AuditLog::open(&path).unwrap();
        for _ in 0..1000 {
            log.unauthenticated("/open");
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(text.contains("bad token: 1 request since"), "{text}");
    }

    #[test]
    fn clip_escapes_and_cuts() {
        assert_eq!(clip("a\nb\"c\\", 10), "a\\nb\\\"c\\\\");
        assert_eq!(clip(&"x".repeat(300), 256).chars().count(), 257);
        assert_eq!(clip("short", 64), "short");
    }

    #[test]
    fn lines_are_appended_with_mode_0600() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let log = AuditLog::open(&path).unwrap();
        log.record("/open", &Outcome::Ok, &[("url", clip("https://x/\n", 256))]);
        log.record(
            "/edit",
            &Outcome::Rejected("editor not allowed".into()),
            &[],
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].ends_with("/open ok url=\"https://x/\\n\""),
            "{text}"
        );
        assert!(
            lines[1].ends_with("/edit rejected (editor not allowed)"),
            "{text}"
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
