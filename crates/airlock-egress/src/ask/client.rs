//! The monitor side of ask mode: find the sessions' sockets, connect, and turn their lines into
//! [`Event`]s on one channel; answer through [`Monitor::answer`]. `airlock network monitor` draws
//! them; tests drive sessions with it.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use super::protocol::{self, Answer, Decision, ServerMessage};

/// Something a session said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A session's socket was connected: its sandbox and project.
    Joined {
        session: u64,
        sandbox: String,
        project: String,
    },
    Ask {
        session: u64,
        id: u64,
        host: String,
        port: u16,
    },
    Decided {
        session: u64,
        id: u64,
        decision: String,
    },
    /// The session ended (or spoke nonsense and was dropped).
    Left { session: u64 },
}

/// The sessions a monitor is connected to.
pub struct Monitor {
    dir: PathBuf,
    sandbox: Option<String>,
    events: mpsc::Sender<Event>,
    seen: HashSet<PathBuf>,
    writers: HashMap<u64, UnixStream>,
    next: u64,
}

impl Monitor {
    /// A monitor of the sockets in `dir` (only `sandbox`'s when given); events arrive on the
    /// returned receiver once [`Monitor::scan`] connected.
    pub fn new(dir: &Path, sandbox: Option<&str>) -> (Monitor, mpsc::Receiver<Event>) {
        let (tx, rx) = mpsc::channel();
        (
            Monitor {
                dir: dir.to_path_buf(),
                sandbox: sandbox.map(str::to_owned),
                events: tx,
                seen: HashSet::new(),
                writers: HashMap::new(),
                next: 0,
            },
            rx,
        )
    }

    /// Connects to every socket not seen yet (call it now and then: sessions start later).
    pub fn scan(&mut self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "sock") || self.seen.contains(&path) {
                continue;
            }
            self.seen.insert(path.clone());
            let Ok(stream) = UnixStream::connect(&path) else {
                continue; // a session that ended without removing it
            };
            let Ok(reader) = stream.try_clone() else {
                continue;
            };
            let session = self.next;
            self.next += 1;
            self.writers.insert(session, stream);
            let events = self.events.clone();
            let only = self.sandbox.clone();
            std::thread::spawn(move || read_session(session, reader, events, only));
        }
    }

    /// Sends `decision` for question `id` of `session`; false when the session is gone.
    pub fn answer(&mut self, session: u64, id: u64, decision: Decision) -> bool {
        let Some(stream) = self.writers.get_mut(&session) else {
            return false;
        };
        let mut line = serde_json::to_string(&Answer { id, decision }).unwrap_or_default();
        line.push('\n');
        stream.write_all(line.as_bytes()).is_ok()
    }
}

fn read_session(
    session: u64,
    stream: UnixStream,
    events: mpsc::Sender<Event>,
    only: Option<String>,
) {
    let mut lines = BufReader::new(stream);
    let mut line = String::new();
    loop {
        line.clear();
        match lines.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(n) if n > protocol::MAX_LINE => break,
            Ok(_) => {}
        }
        let event = match protocol::parse_server(&line) {
            Ok(ServerMessage::Hello {
                sandbox, project, ..
            }) => {
                if only.as_ref().is_some_and(|o| *o != sandbox) {
                    return; // another sandbox's session: not watched
                }
                Event::Joined {
                    session,
                    sandbox,
                    project,
                }
            }
            Ok(ServerMessage::Ask { id, host, port }) => Event::Ask {
                session,
                id,
                host,
                port,
            },
            Ok(ServerMessage::Decided { id, decision }) => Event::Decided {
                session,
                id,
                decision,
            },
            Err(_) => break,
        };
        if events.send(event).is_err() {
            return;
        }
    }
    let _ = events.send(Event::Left { session });
}
