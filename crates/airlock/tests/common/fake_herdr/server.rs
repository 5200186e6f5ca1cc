//! The socket side: the accept loop, herdr's framing (one first line a connection, read byte by
//! byte), what is recorded, the stall and fail hooks, and the connections a method holds open.

use std::collections::{HashMap, HashSet};
use std::io::{self, ErrorKind, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::answers::{Answer, Failure};
use super::methods::{Reply, Wait, handle};
use super::schema::parse_request;
use super::state::Session;
use super::{MAX_LINE, READ_TIMEOUT};

/// How often blocked reads and waits look at the stop flag.
const POLL: Duration = Duration::from_millis(20);

/// What the server threads and the [`super::FakeHerdr`] handle share.
#[derive(Default)]
pub(super) struct Shared {
    stopping: AtomicBool,
    state: Mutex<State>,
    /// Notified when something was recorded.
    pub(super) changed: Condvar,
}

/// What was recorded, the hooks, the held connections and the session model.
#[derive(Default)]
pub(super) struct State {
    pub(super) connections: usize,
    pub(super) received: Vec<Vec<u8>>,
    pub(super) raw: Vec<Vec<u8>>,
    pub(super) requests: Vec<Value>,
    pub(super) responses: Vec<Value>,
    pub(super) notifications: Vec<Value>,
    pub(super) stalled: HashSet<String>,
    pub(super) failures: HashMap<String, (String, String)>,
    pub(super) held: Vec<UnixStream>,
    pub(super) session: Session,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Raises the stop flag the server threads look at.
    pub(super) fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }
}

/// Serves `listener` on a background thread until [`Shared::stop`] (and a connection to wake it).
pub(super) fn spawn_acceptor(
    listener: UnixListener,
    shared: &Arc<Shared>,
) -> io::Result<JoinHandle<()>> {
    let shared = Arc::clone(shared);
    thread::Builder::new()
        .name("fake-herdr-accept".into())
        .spawn(move || accept_loop(&listener, &shared))
}

fn accept_loop(listener: &UnixListener, shared: &Arc<Shared>) {
    loop {
        let accepted = listener.accept();
        if shared.stopping() {
            return;
        }
        match accepted {
            Ok((stream, _)) => {
                shared.lock().connections += 1;
                let shared = Arc::clone(shared);
                let spawned = thread::Builder::new()
                    .name("fake-herdr-conn".into())
                    .spawn(move || serve(&shared, stream));
                if spawned.is_err() {
                    thread::sleep(POLL);
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => thread::sleep(POLL),
        }
    }
}

enum LineEnd {
    Newline,
    Closed,
    TooLong,
    TimedOut,
    Failed,
    Stopped,
}

/// Reads the first line one byte at a time (nothing after the `\n` leaves the kernel's buffer).
fn read_first_line(shared: &Shared, stream: &mut UnixStream) -> (Vec<u8>, LineEnd) {
    let deadline = Instant::now() + READ_TIMEOUT;
    let mut bytes = Vec::new();
    let mut byte = [0u8; 1];
    let _ = stream.set_read_timeout(Some(POLL));
    loop {
        if shared.stopping() {
            return (bytes, LineEnd::Stopped);
        }
        match stream.read(&mut byte) {
            Ok(0) => return (bytes, LineEnd::Closed),
            Ok(_) => {
                bytes.push(byte[0]);
                if byte[0] == b'\n' {
                    return (bytes, LineEnd::Newline);
                }
                if bytes.len() > MAX_LINE {
                    return (bytes, LineEnd::TooLong);
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if Instant::now() >= deadline {
                    return (bytes, LineEnd::TimedOut);
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return (bytes, LineEnd::Failed),
        }
    }
}

fn serve(shared: &Shared, mut stream: UnixStream) {
    let _ = stream.set_write_timeout(Some(READ_TIMEOUT));
    let (bytes, end) = read_first_line(shared, &mut stream);
    let complete = matches!(end, LineEnd::Newline);
    {
        let mut state = shared.lock();
        state.received.push(bytes.clone());
        if complete {
            state.raw.push(bytes[..bytes.len() - 1].to_vec());
        }
    }
    shared.changed.notify_all();
    if !complete {
        return; // closed, too long, silent, failed: herdr drops the connection without a word
    }
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return; // herdr cannot read invalid UTF-8 as a line: no answer either
    };
    let text = text.trim();
    if text.is_empty() {
        return;
    }
    let parsed = serde_json::from_str::<Value>(text);
    if let Ok(value) = &parsed {
        shared.lock().requests.push(value.clone());
        shared.changed.notify_all();
    }
    let request = match parsed
        .map_err(|e| e.to_string())
        .and_then(|v| parse_request(&v))
    {
        Ok(request) => request,
        Err(message) => {
            let response = error("", "invalid_request", format!("invalid request: {message}"));
            write_response(shared, &mut stream, &response);
            return;
        }
    };

    let reply = {
        let mut state = shared.lock();
        if state.stalled.contains(request.method) {
            state.held.push(stream);
            return;
        }
        if let Some((code, message)) = state.failures.get(request.method).cloned() {
            Reply::Now(Err(Failure::new(&code, message)))
        } else {
            handle(&mut state, &request)
        }
    };
    match reply {
        Reply::Now(answer) => {
            let response = respond(&request.id, answer);
            write_response(shared, &mut stream, &response);
        }
        Reply::Subscribe => {
            let ack = success(&request.id, json!({"type": "subscription_started"}));
            if write_response(shared, &mut stream, &ack) {
                while !shared.stopping() && !peer_closed(&stream) {
                    thread::sleep(POLL);
                }
            }
        }
        Reply::Wait(wait) => {
            if let Some(answer) = wait_until(shared, &stream, &wait) {
                let response = respond(&request.id, answer);
                write_response(shared, &mut stream, &response);
            }
        }
    }
}

/// Writes one response line; false when the client is gone.
fn write_response(shared: &Shared, stream: &mut UnixStream, response: &Value) -> bool {
    shared.lock().responses.push(response.clone());
    let mut line = response.to_string();
    line.push('\n');
    stream.write_all(line.as_bytes()).is_ok()
}

/// True when the client closed its end (bytes it sent meanwhile are read and ignored).
fn peer_closed(stream: &UnixStream) -> bool {
    if stream.set_nonblocking(true).is_err() {
        return true;
    }
    let mut buf = [0u8; 256];
    let closed = match (&*stream).read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted),
    };
    let _ = stream.set_nonblocking(false);
    closed
}

/// Polls a waiting request's condition; `None` when the client left or the fake stops.
fn wait_until(shared: &Shared, stream: &UnixStream, wait: &Wait) -> Option<Answer> {
    loop {
        if let Some(answer) = wait.outcome(&shared.lock().session) {
            return Some(answer);
        }
        if shared.stopping() || peer_closed(stream) {
            return None;
        }
        thread::sleep(POLL);
    }
}

fn success(id: &str, result: Value) -> Value {
    json!({"id": id, "result": result})
}

fn error(id: &str, code: &str, message: String) -> Value {
    json!({"id": id, "error": {"code": code, "message": message}})
}

fn respond(id: &str, answer: Answer) -> Value {
    match answer {
        Ok(result) => success(id, result),
        Err(f) => error(id, &f.code, f.message),
    }
}
