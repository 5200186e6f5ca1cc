//! The decision log of a filter: `<state root>/logs/internal/<filter>.log`, rotated like every
//! airlock log (8 MiB, 3 old files kept); and reading those logs back ([`InternalLogs`]).

mod read;

pub use read::{InternalLine, InternalLogs};

use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use airlock_config::logfile::{RotatingFile, Rotation};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny,
}

/// One line per request: `<unix ms> <method> allow|deny <reason>`. Callers pass only the method
/// and a fixed reason, never a value from the request, so nothing the sandbox sent (a session id,
/// a path, text) reaches the log.
pub struct DecisionLog {
    file: Option<Mutex<RotatingFile>>,
}

impl DecisionLog {
    /// Appends to `<state_root>/logs/internal/<name>.log` (0600, never through a symlink); a log
    /// that cannot be opened logs nothing (the filter still decides).
    pub fn open(state_root: &Path, name: &str) -> DecisionLog {
        let path = state_root
            .join("logs")
            .join("internal")
            .join(format!("{name}.log"));
        DecisionLog {
            file: RotatingFile::open(&path, Rotation::default())
                .ok()
                .map(Mutex::new),
        }
    }

    /// A log that keeps nothing (tests, dry runs).
    pub fn discard() -> DecisionLog {
        DecisionLog { file: None }
    }

    pub fn write(&self, method: &str, decision: Decision, reason: &str) {
        let Some(file) = &self.file else {
            return;
        };
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let verdict = match decision {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
        };
        // Method names are herdr's own (`pane.read`); anything else is shown escaped.
        let method: String = method
            .chars()
            .take(64)
            .map(|c| if c.is_ascii_graphic() { c } else { '?' })
            .collect();
        if let Ok(mut f) = file.lock() {
            let _ = f.append(format!("{ms} {method} {verdict} {reason}\n").as_bytes());
        }
    }
}
