//! Ask mode (`[network] unmatched = "ask"`): a request no rule matches waits, for a bounded time,
//! for a decision from `airlock network monitor` instead of being denied at once.
//!
//! The proxy of a session listens on a unix socket in a host-only directory
//! (`$XDG_STATE_HOME/airlock/monitor/<sandbox>.<pid>.sock`, 0600 in a 0700 dir; never mounted in a
//! sandbox) and accepts only its own user's connections (`SO_PEERCRED`). The protocol is JSON lines
//! ([`protocol`]): the proxy sends `hello` on connect, then `ask` for each question and `decided`
//! when one is settled (by a monitor, or the timeout); a monitor answers `{"id", "decision"}`.
//! Every connected monitor gets every question; the first answer wins. Decisions other than
//! `once` hold for the rest of the session; concurrent requests for one host share a question.
//! Nobody answering within the timeout, or the last monitor leaving with questions open, denies.
//! With a [`notify::Notifier`], a question opened while no monitor is connected is also posted as
//! a desktop notification with "Allow once" and "Deny" ([`notify`] says what it trusts).

pub mod client;
pub mod notify;
pub mod protocol;

use std::collections::{HashMap, HashSet};
use std::io;
use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::{mpsc, watch};

use protocol::{Answer, Decision, MAX_LINE, ServerMessage};

/// How a question ended, for the request that waited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Allowed by the monitor (`once`, `session` or `always`).
    Allowed(Decision),
    /// Denied by the monitor, cached, or nobody answered: the reason for the log and the 403.
    Denied(String),
}

type Key = (String, u16);

/// How many desktop notifications one session shows at once: a sandbox asking for a hundred
/// hosts must not bury the desktop; the rest wait for a monitor or their timeout.
pub const MAX_NOTIFICATIONS: usize = 3;

#[derive(Default)]
struct State {
    next_id: u64,
    monitors: HashMap<u64, mpsc::UnboundedSender<String>>,
    next_monitor: u64,
    /// Open questions: key → (id, the channel its waiters watch).
    pending: HashMap<Key, (u64, watch::Sender<Option<Decision>>)>,
    allowed: HashSet<Key>,
    denied: HashSet<Key>,
}

/// One session's ask gate: its socket, timeout and decisions.
pub struct AskGate {
    sandbox: String,
    project: PathBuf,
    path: PathBuf,
    timeout: Duration,
    listener: Mutex<Option<std::os::unix::net::UnixListener>>,
    state: Mutex<State>,
    notifier: Option<notify::Notifier>,
    notifying: AtomicUsize,
    /// Set once a notification failed (said once on stderr, not per question).
    notify_failed: AtomicBool,
}

impl std::fmt::Debug for AskGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AskGate").field("path", &self.path).finish()
    }
}

impl AskGate {
    /// Binds the session's socket at `path` (its directory made 0700 when missing; a stale socket
    /// at `path` removed, never followed). `timeout` bounds every question.
    pub fn bind(
        path: &Path,
        sandbox: &str,
        project: &Path,
        timeout: Duration,
    ) -> io::Result<AskGate> {
        if let Some(dir) = path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        match std::fs::symlink_metadata(path) {
            Ok(_) => std::fs::remove_file(path)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let listener = std::os::unix::net::UnixListener::bind(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        listener.set_nonblocking(true)?;
        Ok(AskGate {
            sandbox: sandbox.to_owned(),
            project: project.to_path_buf(),
            path: path.to_path_buf(),
            timeout,
            listener: Mutex::new(Some(listener)),
            state: Mutex::new(State::default()),
            notifier: None,
            notifying: AtomicUsize::new(0),
            notify_failed: AtomicBool::new(false),
        })
    }

    /// Also posts questions as desktop notifications while no monitor is connected.
    pub fn with_notifier(mut self, notifier: notify::Notifier) -> AskGate {
        self.notifier = Some(notifier);
        self
    }

    /// The socket monitors connect to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Accepts monitors until the runtime stops (spawned by the proxy on its runtime).
    pub(crate) async fn serve(self: Arc<Self>) {
        let Some(listener) = self
            .listener
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        else {
            return;
        };
        let Ok(listener) = tokio::net::UnixListener::from_std(listener) else {
            return;
        };
        let me = nix::unistd::getuid().as_raw();
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            // Only this user's monitors: another local user must not approve egress.
            if stream.peer_cred().map(|c| c.uid()).ok() != Some(me) {
                continue;
            }
            tokio::spawn(self.clone().monitor(stream));
        }
    }

    async fn monitor(self: Arc<Self>, stream: UnixStream) {
        let (read, mut write) = stream.into_split();
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        let id = {
            let mut state = self.lock();
            let id = state.next_monitor;
            state.next_monitor += 1;
            let hello = ServerMessage::Hello {
                sandbox: self.sandbox.clone(),
                project: self.project.display().to_string(),
                pid: std::process::id(),
                timeout_secs: self.timeout.as_secs(),
            };
            let _ = tx.send(hello.line());
            // Questions already open reach a monitor that connects late.
            for ((host, port), (qid, _)) in &state.pending {
                let _ = tx.send(
                    ServerMessage::Ask {
                        id: *qid,
                        host: host.clone(),
                        port: *port,
                    }
                    .line(),
                );
            }
            state.monitors.insert(id, tx);
            id
        };
        let writer = tokio::spawn(async move {
            while let Some(line) = rx.recv().await {
                if write.write_all(line.as_bytes()).await.is_err() {
                    break;
                }
            }
        });
        let mut lines = BufReader::new(read);
        let mut line = String::new();
        loop {
            line.clear();
            match (&mut lines)
                .take(MAX_LINE as u64 + 1)
                .read_line(&mut line)
                .await
            {
                Ok(0) | Err(_) => break,
                Ok(n) if n > MAX_LINE => break,
                Ok(_) => {}
            }
            match protocol::parse_answer(&line) {
                Ok(answer) => self.settle(answer),
                // A monitor that speaks nonsense is dropped; its questions stay open for others.
                Err(_) => break,
            }
        }
        writer.abort();
        let mut state = self.lock();
        state.monitors.remove(&id);
        if state.monitors.is_empty() {
            // Nobody left to answer what is open: deny it now rather than at the timeout.
            let open: Vec<Key> = state.pending.keys().cloned().collect();
            for key in open {
                if let Some((qid, tx)) = state.pending.remove(&key) {
                    let _ = tx.send(Some(Decision::Deny));
                    state.denied.insert(key);
                    broadcast(
                        &state,
                        &ServerMessage::Decided {
                            id: qid,
                            decision: "deny".into(),
                        },
                    );
                }
            }
        }
    }

    /// A monitor's answer: the question's waiters get it; `session`/`always`/`deny` are cached.
    fn settle(&self, answer: Answer) {
        let mut state = self.lock();
        let Some(key) = state
            .pending
            .iter()
            .find(|(_, (id, _))| *id == answer.id)
            .map(|(k, _)| k.clone())
        else {
            return; // settled already (another monitor, or the timeout)
        };
        let (id, tx) = state.pending.remove(&key).expect("found above");
        match answer.decision {
            Decision::Once => {}
            Decision::Session | Decision::Always => {
                state.allowed.insert(key);
            }
            Decision::Deny => {
                state.denied.insert(key);
            }
        }
        let _ = tx.send(Some(answer.decision));
        broadcast(
            &state,
            &ServerMessage::Decided {
                id,
                decision: answer.decision.as_str().into(),
            },
        );
    }

    /// Asks about `host:port` (no rule matched it), waiting at most the timeout.
    pub async fn ask(self: &Arc<Self>, host: &str, port: u16) -> Outcome {
        let key = (host.to_owned(), port);
        let mut rx = {
            let mut state = self.lock();
            if state.allowed.contains(&key) {
                return Outcome::Allowed(Decision::Session);
            }
            if state.denied.contains(&key) {
                return Outcome::Denied("denied when asked earlier in this session".into());
            }
            if let Some((_, tx)) = state.pending.get(&key) {
                tx.subscribe()
            } else {
                let id = state.next_id;
                state.next_id += 1;
                let (tx, rx) = watch::channel(None);
                state.pending.insert(key.clone(), (id, tx));
                broadcast(
                    &state,
                    &ServerMessage::Ask {
                        id,
                        host: host.to_owned(),
                        port,
                    },
                );
                if state.monitors.is_empty() {
                    self.notify(id, host, port, rx.clone());
                }
                rx
            }
        };
        let waited = tokio::time::timeout(self.timeout, rx.wait_for(Option::is_some)).await;
        match waited {
            Ok(Ok(decided)) => match (*decided).expect("waited for Some") {
                Decision::Deny => Outcome::Denied(
                    "denied when asked (airlock network monitor or a desktop notification)".into(),
                ),
                allowed => Outcome::Allowed(allowed),
            },
            _ => {
                let mut state = self.lock();
                if let Some((id, _)) = state.pending.remove(&key) {
                    broadcast(
                        &state,
                        &ServerMessage::Decided {
                            id,
                            decision: "timeout".into(),
                        },
                    );
                }
                Outcome::Denied(format!(
                    "not answered in airlock network monitor within {} s",
                    self.timeout.as_secs()
                ))
            }
        }
    }
}

impl AskGate {
    /// Posts question `id` on the desktop, on a thread of its own (the D-Bus client blocks),
    /// within [`MAX_NOTIFICATIONS`]; an action there settles it like a monitor's answer.
    fn notify(
        self: &Arc<Self>,
        id: u64,
        host: &str,
        port: u16,
        rx: watch::Receiver<Option<Decision>>,
    ) {
        let Some(notifier) = self.notifier.clone() else {
            return;
        };
        if self.notifying.fetch_add(1, Ordering::SeqCst) >= MAX_NOTIFICATIONS {
            self.notifying.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        let (gate, host) = (Arc::clone(self), host.to_owned());
        let spawned = std::thread::Builder::new()
            .name("airlock-ask-notify".into())
            .spawn(move || {
                let question = notify::Question {
                    sandbox: &gate.sandbox,
                    host: &host,
                    port,
                    timeout: gate.timeout,
                };
                let settled = || rx.borrow().is_some() || !gate.is_open(id);
                let until = Instant::now() + gate.timeout;
                match notifier.ask(&question, until, &settled) {
                    Ok(Some(decision)) => gate.settle(Answer { id, decision }),
                    Ok(None) => {}
                    Err(e) => {
                        if !gate.notify_failed.swap(true, Ordering::SeqCst) {
                            eprintln!(
                                "airlock: warning: ask mode: no desktop notification ({e}); \
                                 answer in `airlock network monitor`"
                            );
                        }
                    }
                }
                gate.notifying.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            self.notifying.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Whether question `id` still waits.
    fn is_open(&self, id: u64) -> bool {
        self.lock().pending.values().any(|(qid, _)| *qid == id)
    }
}

impl Drop for AskGate {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn broadcast(state: &State, message: &ServerMessage) {
    let line = message.line();
    for tx in state.monitors.values() {
        let _ = tx.send(line.clone());
    }
}
