//! Writing the decision log: one writer task appends every connection's record, rotating the file;
//! and the proxy's own diagnostics, which also go to `logs/internal/egress.log`.

use std::path::Path;
use std::sync::{Arc, Mutex};

use airlock_config::logfile::{RotatingFile, Rotation};
use tokio::sync::mpsc;

use super::record::{LogRecord, unix_millis};

/// The sending side, cloned into every connection task.
#[derive(Clone)]
pub(crate) struct LogSender(mpsc::UnboundedSender<LogRecord>);

impl LogSender {
    pub(crate) fn send(&self, record: LogRecord) {
        // The writer outlives every connection task; a send after it stopped has nowhere to go.
        let _ = self.0.send(record);
    }
}

/// Starts the writer task on the current runtime. It drains what is queued, writes it in one go
/// (rotating `file` at its cap), and ends (having flushed) once every sender is dropped.
pub(crate) fn start_writer(
    mut file: RotatingFile,
    diagnostics: Arc<Diagnostics>,
) -> (LogSender, tokio::task::JoinHandle<()>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<LogRecord>();
    let task = tokio::spawn(async move {
        let mut batch = Vec::new();
        while rx.recv_many(&mut batch, 256).await > 0 {
            let mut buf = Vec::new();
            for record in batch.drain(..) {
                if serde_json::to_writer(&mut buf, &record).is_ok() {
                    buf.push(b'\n');
                }
            }
            // Local appends of a few hundred bytes; an error (disk full) must not stop the proxy.
            if let Err(e) = file.append(&buf) {
                diagnostics.note(&format!("cannot append to the network decision log: {e}"));
            }
        }
        let _ = file.flush();
    });
    (LogSender(tx), task)
}

/// The proxy's diagnostics (a listener it cannot use, accept errors, a log it cannot write): on
/// stderr as ever, and a line `<unix ms> <text>` each in `egress.log`, next to the socket
/// filters' logs, where `airlock logs internal` reads them.
pub(crate) struct Diagnostics {
    file: Option<Mutex<RotatingFile>>,
}

impl Diagnostics {
    /// Appends to `path`; a file that cannot be opened leaves the diagnostics on stderr only.
    pub(crate) fn open(path: &Path) -> Diagnostics {
        Diagnostics {
            file: RotatingFile::open(path, Rotation::default())
                .ok()
                .map(Mutex::new),
        }
    }

    pub(crate) fn note(&self, text: &str) {
        eprintln!("airlock: {text}");
        if let Some(file) = &self.file {
            let ms = unix_millis(std::time::SystemTime::now());
            let line = format!("{ms} {}\n", text.replace(['\n', '\r'], " "));
            let mut file = match file.lock() {
                Ok(guard) => guard,
                Err(poisoned) => poisoned.into_inner(),
            };
            let _ = file.append(line.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diagnostic_is_one_line_with_its_unix_ms() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/internal/egress.log");
        let diagnostics = Diagnostics::open(&path);
        diagnostics.note("cannot accept a connection: Too many open files\n(os error 24)");
        let text = std::fs::read_to_string(&path).unwrap();
        let (ms, rest) = text.split_once(' ').unwrap();
        assert!(ms.parse::<i64>().unwrap() > 1_700_000_000_000, "{text}");
        assert_eq!(
            rest,
            "cannot accept a connection: Too many open files (os error 24)\n"
        );
    }
}
