//! The socket side: the accept loop, kitty's framing (any number of frames on one connection,
//! answered in order), what is recorded, and the stall and fail hooks.

use std::collections::{HashMap, HashSet};
use std::io::{self, ErrorKind, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use serde_json::{Value, json};

use super::commands::{Answer, Session, handle, parse_request};
use super::{FRAME_PREFIX, FRAME_SUFFIX, MAX_FRAME, find, frame};

/// How often blocked reads look at the stop flag.
const POLL: Duration = Duration::from_millis(20);
/// How long writing an answer may block before the connection is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// What the server threads and the [`super::FakeKitty`] handle share.
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
    /// The bytes read, one entry per accepted connection.
    pub(super) received: Vec<Vec<u8>>,
    pub(super) frames: Vec<Vec<u8>>,
    pub(super) requests: Vec<Value>,
    pub(super) responses: Vec<Value>,
    pub(super) stalled: HashSet<String>,
    pub(super) failures: HashMap<String, String>,
    pub(super) held: Vec<UnixStream>,
    pub(super) session: Session,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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
        .name("fake-kitty-accept".into())
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
                let conn = {
                    let mut state = shared.lock();
                    state.received.push(Vec::new());
                    state.received.len() - 1
                };
                shared.changed.notify_all();
                let shared = Arc::clone(shared);
                let spawned = thread::Builder::new()
                    .name("fake-kitty-conn".into())
                    .spawn(move || serve(&shared, stream, conn));
                if spawned.is_err() {
                    thread::sleep(POLL);
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => thread::sleep(POLL),
        }
    }
}

/// What the start of a connection's buffer holds.
enum Next {
    /// A whole frame of `len` bytes; its JSON is between the prefix and the suffix.
    Frame { len: usize },
    /// Nothing yet, or the start of a frame.
    Incomplete,
    /// Bytes outside a frame, or a frame past [`MAX_FRAME`]: the connection is closed.
    Bad,
}

fn next_frame(buf: &[u8]) -> Next {
    let head = buf.len().min(FRAME_PREFIX.len());
    if buf[..head] != FRAME_PREFIX[..head] {
        return Next::Bad;
    }
    match find(buf, FRAME_SUFFIX, FRAME_PREFIX.len()) {
        Some(at) if at + FRAME_SUFFIX.len() <= MAX_FRAME => Next::Frame {
            len: at + FRAME_SUFFIX.len(),
        },
        Some(_) => Next::Bad,
        // Whatever is still missing makes the frame longer than the buffer.
        None if buf.len() >= MAX_FRAME => Next::Bad,
        None => Next::Incomplete,
    }
}

/// What to do after one frame.
enum Outcome {
    Answer(Value),
    Silent,
    Stall,
}

fn serve(shared: &Shared, mut stream: UnixStream, conn: usize) {
    let _ = stream.set_read_timeout(Some(POLL));
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        loop {
            let len = match next_frame(&buf) {
                Next::Frame { len } => len,
                Next::Incomplete => break,
                Next::Bad => return,
            };
            let json = buf[FRAME_PREFIX.len()..len - FRAME_SUFFIX.len()].to_vec();
            buf.drain(..len);
            match on_frame(shared, &json) {
                Outcome::Answer(answer) => {
                    if !write_answer(shared, &mut stream, answer) {
                        return;
                    }
                }
                Outcome::Silent => {}
                Outcome::Stall => {
                    let mut state = shared.lock();
                    if !shared.stopping() {
                        state.held.push(stream);
                    }
                    return;
                }
            }
        }
        if shared.stopping() {
            return;
        }
        match stream.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => {
                shared.lock().received[conn].extend_from_slice(&chunk[..n]);
                buf.extend_from_slice(&chunk[..n]);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(_) => return,
        }
    }
}

/// Records one frame and runs it (unless a hook says otherwise).
fn on_frame(shared: &Shared, json: &[u8]) -> Outcome {
    let mut state = shared.lock();
    state.frames.push(json.to_vec());
    let Ok(value) = serde_json::from_slice::<Value>(json) else {
        shared.changed.notify_all();
        return Outcome::Answer(answer(Err("invalid JSON".to_owned())));
    };
    state.requests.push(value.clone());
    shared.changed.notify_all();
    let request = match parse_request(&value) {
        Ok(request) => request,
        Err(message) => return Outcome::Answer(answer(Err(message))),
    };
    if state.stalled.contains(&request.cmd) {
        return Outcome::Stall;
    }
    let result = match state.failures.get(&request.cmd) {
        Some(error) => Err(error.clone()),
        None => handle(&mut state.session, &request),
    };
    if request.no_response {
        Outcome::Silent
    } else {
        Outcome::Answer(answer(result))
    }
}

fn answer(result: Answer) -> Value {
    match result {
        Ok(None) => json!({"ok": true}),
        Ok(Some(data)) => json!({"ok": true, "data": data}),
        Err(error) => json!({"ok": false, "error": error}),
    }
}

/// Records and writes one answer frame; false when the client is gone.
fn write_answer(shared: &Shared, stream: &mut UnixStream, answer: Value) -> bool {
    let bytes = frame(answer.to_string().as_bytes());
    shared.lock().responses.push(answer);
    shared.changed.notify_all();
    stream.write_all(&bytes).is_ok()
}
