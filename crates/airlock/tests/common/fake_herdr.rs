//! A fake herdr *server*: the control socket of herdr 0.8.2 (protocol 20), for tests of the code that
//! talks to it (the herdr socket filter, `airlock` inside a herdr pane).
//!
//! # What herdr does
//!
//! herdr listens on a Unix socket (mode 0600). The framing is newline-delimited JSON with ONE request
//! per connection: the server reads only the first line (byte by byte, so nothing after the `\n` is
//! consumed; at most 1 MiB before the newline; it gives up after 5 s), writes one response line and
//! closes. A client that closes before the newline, sends an over-long line, sends invalid UTF-8, stays
//! silent for 5 s or sends an empty line gets no answer at all. A request is
//! `{"id":"<string>","method":"<name>","params":{...}}`; a line that does not deserialize into one
//! (bad JSON, a missing `id`/`method`/`params`, an unknown method, a missing or ill-typed parameter)
//! is answered `{"id":"","error":{"code":"invalid_request","message":"invalid request: ..."}}`, with
//! an EMPTY id. Unknown fields are ignored. Otherwise the answer carries the request's id:
//! `{"id":"<same>","result":{"type":"<snake_case>",...}}` or
//! `{"id":"<same>","error":{"code":"<snake_case>","message":"..."}}`. A few methods hold the
//! connection: `events.subscribe` (an ack line, then event lines), `events.wait`, `agent.wait`,
//! `agent.prompt` with `wait`, `pane.wait_for_output`.
//!
//! # What the fake does
//!
//! [`FakeHerdr::start`] binds the socket (0600) and serves it on background threads until dropped,
//! with the framing above. It accepts every one of the 91 methods of the protocol-20 schema
//! (`/work/shared/reference/herdr-api.schema.json`), checks their parameters as herdr's deserializer
//! would (required fields, JSON types, enum values; nested objects only roughly), and answers with
//! result shapes taken from the schema. It keeps a small session model so ids behave like herdr's:
//!
//! - at start: workspace [`WORKSPACE_ID`] (`w1`) with tab [`TAB_ID`] (`w1:t1`) holding panes
//!   [`OTHER_PANE_ID`] (`w1:p1`) and [`PANE_ID`] (`w1:p2`, focused: where a user would run airlock);
//! - `tab.create` makes `w1:t2` with root pane `w1:p3`, then `w1:t3`/`w1:p4`, ... (tab and pane numbers
//!   count per workspace and are never reused); `pane.split` adds panes; `*.close` removes them;
//! - any method naming a pane, tab or workspace that does not exist (never created, or closed) gets
//!   `pane_not_found` / `tab_not_found` / `workspace_not_found`, as herdr does. Note that, like herdr,
//!   the fake happily serves the panes that existed before (`w1:p1`, `w1:p2`): whether a filter let a
//!   request through is told by [`FakeHerdr::requests`], not by the answer;
//! - `pane.read` returns the pane's screen ([`SCREEN_TEXT`] unless [`FakeHerdr::set_pane_text`]);
//! - `pane.report_agent` / `pane.report_agent_session` / `pane.release_agent` change what `pane.get`,
//!   `pane.list` and `agent.*` report.
//!
//! Not modelled: events (a subscription gets its ack and then silence; `events.wait` only times out),
//! git worktrees (`worktree.create`/`open` fail), plugin manifests beyond `id`/`name`/`version`, regexes
//! (`pane.wait_for_output` matches a `regex` as a literal substring), herdr's alternative id spellings
//! (`p_3`, `w1-3`, ...). `server.stop` answers `ok` and the fake keeps serving.
//!
//! Everything is recorded: [`FakeHerdr::received`] (bytes read per connection), [`FakeHerdr::raw`]
//! (each first line, without its `\n`), [`FakeHerdr::requests`] (those lines parsed), and
//! [`FakeHerdr::responses`]. Hooks: [`FakeHerdr::stall`] (hold a method's connections open without an
//! answer, to test a client's timeout) and [`FakeHerdr::fail`] (answer a method with a given error).
//!
//! Include it with `#[path = "common/fake_herdr.rs"] #[allow(dead_code)] mod fake_herdr;` (each test
//! uses its own part of it), or as a module of `common`, whose `#![allow(dead_code)]` covers it.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{self, ErrorKind, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

/// The herdr release the fake answers `ping` with.
pub const VERSION: &str = "0.8.2";
/// The protocol number of that release.
pub const PROTOCOL: u64 = 20;
/// Longest first line (before its `\n`) herdr reads; a longer one is dropped without an answer.
pub const MAX_LINE: usize = 1024 * 1024;
/// How long herdr waits for the first line before dropping the connection without an answer.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// The workspace that exists from the start.
pub const WORKSPACE_ID: &str = "w1";
/// The tab that exists from the start (in [`WORKSPACE_ID`]).
pub const TAB_ID: &str = "w1:t1";
/// The focused pane that exists from the start (in [`TAB_ID`]): the host pane a test runs airlock in.
pub const PANE_ID: &str = "w1:p2";
/// The other pane that exists from the start (in [`TAB_ID`]).
pub const OTHER_PANE_ID: &str = "w1:p1";
/// What `pane.read` returns for a pane whose text a test has not set.
pub const SCREEN_TEXT: &str = "fake-herdr screen: secret-looking text FAKE_HERDR_SCREEN\n$ ";
/// The working directory of the panes that exist from the start.
pub const START_CWD: &str = "/";

/// How often blocked reads and waits look at the stop flag.
const POLL: Duration = Duration::from_millis(20);

/// The running fake. Dropping it stops the server, closes held connections and removes the socket
/// file (only if it is still the one the fake bound).
pub struct FakeHerdr {
    path: PathBuf,
    identity: (u64, u64),
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

struct Shared {
    stopping: AtomicBool,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    connections: usize,
    received: Vec<Vec<u8>>,
    raw: Vec<Vec<u8>>,
    requests: Vec<Value>,
    responses: Vec<Value>,
    notifications: Vec<Value>,
    stalled: HashSet<String>,
    failures: HashMap<String, (String, String)>,
    held: Vec<UnixStream>,
    session: Session,
}

impl FakeHerdr {
    /// Binds `socket` (mode 0600) and serves it until the returned value is dropped. A stale socket
    /// file is replaced; a live one (something answers a connect) is a panic, as herdr refuses to
    /// start twice. Panics when the socket cannot be bound.
    pub fn start(socket: &Path) -> FakeHerdr {
        FakeHerdr::try_start(socket)
            .unwrap_or_else(|err| panic!("fake herdr: bind {}: {err}", socket.display()))
    }

    /// [`FakeHerdr::start`], returning the error instead of panicking.
    pub fn try_start(socket: &Path) -> io::Result<FakeHerdr> {
        if let Ok(meta) = fs::symlink_metadata(socket) {
            if !meta.file_type().is_socket() {
                return Err(io::Error::new(
                    ErrorKind::AlreadyExists,
                    format!("{} exists and is not a socket", socket.display()),
                ));
            }
            if UnixStream::connect(socket).is_ok() {
                return Err(io::Error::new(
                    ErrorKind::AddrInUse,
                    format!(
                        "herdr is already running (socket busy at {})",
                        socket.display()
                    ),
                ));
            }
            fs::remove_file(socket)?;
        }
        let listener = UnixListener::bind(socket)?;
        fs::set_permissions(socket, fs::Permissions::from_mode(0o600))?;
        let meta = fs::symlink_metadata(socket)?;
        let shared = Arc::new(Shared {
            stopping: AtomicBool::new(false),
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        });
        let acceptor = {
            let shared = Arc::clone(&shared);
            thread::Builder::new()
                .name("fake-herdr-accept".into())
                .spawn(move || accept_loop(&listener, &shared))?
        };
        Ok(FakeHerdr {
            path: socket.to_path_buf(),
            identity: (meta.dev(), meta.ino()),
            shared,
            acceptor: Some(acceptor),
        })
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many connections were accepted.
    pub fn connections(&self) -> usize {
        self.state().connections
    }

    /// The bytes read on each connection, in the order the reads finished: the first line with its
    /// `\n`, or what came before the client closed, went silent or passed [`MAX_LINE`]. Bytes after
    /// the first `\n` are never read, as with herdr.
    pub fn received(&self) -> Vec<Vec<u8>> {
        self.state().received.clone()
    }

    /// Every complete first line that reached the fake (without its `\n`), in order, whether or
    /// not it was a valid request.
    pub fn raw(&self) -> Vec<Vec<u8>> {
        self.state().raw.clone()
    }

    /// The lines of [`FakeHerdr::raw`] that were JSON, parsed, in order (valid requests or not).
    pub fn requests(&self) -> Vec<Value> {
        self.state().requests.clone()
    }

    /// The `method` of each of [`FakeHerdr::requests`] (`""` where it had none).
    pub fn methods(&self) -> Vec<String> {
        self.state()
            .requests
            .iter()
            .map(|r| {
                r.get("method")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned()
            })
            .collect()
    }

    /// The requests whose `method` is `method`.
    pub fn requests_for(&self, method: &str) -> Vec<Value> {
        self.state()
            .requests
            .iter()
            .filter(|r| r.get("method").and_then(Value::as_str) == Some(method))
            .cloned()
            .collect()
    }

    /// Every response line the fake wrote, parsed, in order (a subscription's ack included).
    pub fn responses(&self) -> Vec<Value> {
        self.state().responses.clone()
    }

    /// The notifications `notification.show` accepted: `{"title","body","sound","position"}`, the
    /// title cut to 80 characters and the body to 240, as herdr does.
    pub fn notifications(&self) -> Vec<Value> {
        self.state().notifications.clone()
    }

    /// Waits until at least `n` requests were recorded; false when `timeout` passed first.
    pub fn wait_for_requests(&self, n: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.state();
        while state.requests.len() < n {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }

    /// From now on, a valid `method` request is recorded and its connection held open with no
    /// answer (until [`FakeHerdr::release_stalled`] or the fake is dropped), e.g.
    /// `fake.stall("tab.create")` to test a client's timeout. Nothing of it happens in the session.
    pub fn stall(&self, method: &str) {
        self.state().stalled.insert(method.to_owned());
    }

    /// Answers `method` normally again (connections already held stay held).
    pub fn unstall(&self, method: &str) {
        self.state().stalled.remove(method);
    }

    /// How many stalled connections are being held.
    pub fn held(&self) -> usize {
        self.state().held.len()
    }

    /// Closes the held connections without an answer.
    pub fn release_stalled(&self) {
        let held = std::mem::take(&mut self.state().held);
        drop(held);
    }

    /// From now on, a valid `method` request is answered with this error (the request's id, `code`,
    /// `message`) and changes nothing.
    pub fn fail(&self, method: &str, code: &str, message: &str) {
        self.state()
            .failures
            .insert(method.to_owned(), (code.to_owned(), message.to_owned()));
    }

    /// Undoes [`FakeHerdr::fail`].
    pub fn unfail(&self, method: &str) {
        self.state().failures.remove(method);
    }

    /// The ids of the open tabs, in order.
    pub fn tabs(&self) -> Vec<String> {
        let state = self.state();
        let ws = &state.session.workspaces;
        ws.iter()
            .flat_map(|w| w.tabs.iter().map(|t| t.id.clone()))
            .collect()
    }

    /// The ids of the open panes, in order.
    pub fn panes(&self) -> Vec<String> {
        let state = self.state();
        let ws = &state.session.workspaces;
        ws.iter()
            .flat_map(|w| {
                w.tabs
                    .iter()
                    .flat_map(|t| t.panes.iter().map(|p| p.id.clone()))
            })
            .collect()
    }

    /// The pane as `pane.get` would describe it (herdr's `PaneInfo`), if it is open.
    pub fn pane(&self, pane_id: &str) -> Option<Value> {
        let state = self.state();
        let at = state.session.pane_at(pane_id)?;
        Some(state.session.pane_info(at))
    }

    /// Sets what `pane.read` (and `pane.wait_for_output`) see in the pane; false if it is not open.
    pub fn set_pane_text(&self, pane_id: &str, text: &str) -> bool {
        let mut state = self.state();
        let Some(at) = state.session.pane_at(pane_id) else {
            return false;
        };
        let pane = state.session.pane_mut(at);
        pane.text = text.to_owned();
        pane.revision += 1;
        true
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.shared.lock()
    }
}

impl Drop for FakeHerdr {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        self.release_stalled();
        let ours = fs::symlink_metadata(&self.path)
            .map(|m| (m.dev(), m.ino()) == self.identity)
            .unwrap_or(false);
        // The acceptor blocks in accept(); a connection wakes it to see the stop flag. When the
        // file is gone or replaced there is no way to reach it, and the thread is left behind.
        if ours
            && UnixStream::connect(&self.path).is_ok()
            && let Some(acceptor) = self.acceptor.take()
        {
            let _ = acceptor.join();
        }
        if ours {
            let _ = fs::remove_file(&self.path);
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }
}

/// Every method of the protocol-20 schema (91), in the schema's order.
pub fn schema_methods() -> Vec<&'static str> {
    SPECS.iter().map(|(name, _)| *name).collect()
}

/// Parameters that deserialize for `method`: its required fields with placeholder values (ids are
/// the ones that exist from the start). `None` for a method the schema does not list.
pub fn sample_params(method: &str) -> Option<Value> {
    let spec = spec(method)?;
    let mut params = Map::new();
    for field in fields(spec).filter(|f| f.required) {
        let value = match (field.name, field.ty) {
            (_, ty @ Ty::Enum(_)) => ty.sample(),
            ("pane_id" | "target" | "source_pane_id", _) => json!(PANE_ID),
            ("tab_id", _) => json!(TAB_ID),
            ("workspace_id", _) => json!(WORKSPACE_ID),
            ("workspace_ids", _) => json!([WORKSPACE_ID]),
            ("match", _) => json!({"type": "substring", "value": "$"}),
            ("match_event", _) => json!({"event": "tab_created"}),
            ("root", _) => json!({"type": "pane"}),
            ("destination", _) => json!({"type": "new_tab"}),
            ("subscriptions", _) => json!([{"type": "tab.created"}]),
            (_, ty) => ty.sample(),
        };
        params.insert(field.name.to_owned(), value);
    }
    Some(Value::Object(params))
}

/// Client side, for tests: connects to `socket`, writes `bytes` as they are, and reads until the
/// server closes (an `ECONNRESET` after some data counts as the close: Linux reports it when the
/// server closes with unread bytes). Gives up reading after 10 s.
pub fn roundtrip(socket: &Path, bytes: &[u8]) -> io::Result<Vec<u8>> {
    let mut stream = UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(bytes)?;
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset && !out.is_empty() => return Ok(out),
            Err(e) => return Err(e),
        }
    }
}

/// Client side, for tests: one request `{"id":"fake-client","method":..,"params":..}` and its parsed
/// answer. Panics when there is no answer line.
pub fn call(socket: &Path, method: &str, params: Value) -> Value {
    let mut line = json!({"id": "fake-client", "method": method, "params": params}).to_string();
    line.push('\n');
    let out =
        roundtrip(socket, line.as_bytes()).unwrap_or_else(|e| panic!("fake herdr: {method}: {e}"));
    let first = out.split(|b| *b == b'\n').next().unwrap_or_default();
    serde_json::from_slice(first).unwrap_or_else(|e| {
        panic!(
            "fake herdr: {method}: answer {:?}: {e}",
            String::from_utf8_lossy(&out)
        )
    })
}

// ---------------------------------------------------------------------------------------------
// Serving

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
            Reply::Now(Err(Failure { code, message }))
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
        if let Some(answer) = wait.check(&shared.lock().session) {
            return Some(answer);
        }
        if wait.deadline.is_some_and(|d| Instant::now() >= d) {
            return Some(Err(Failure::new("timeout", wait.timeout_message.clone())));
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

// ---------------------------------------------------------------------------------------------
// Requests: what herdr's deserializer accepts

struct Request {
    id: String,
    method: &'static str,
    params: Map<String, Value>,
}

/// The parameters of every protocol-20 method, extracted from the schema: `name[!][?]:type`, `!`
/// required, `?` nullable; types `s` string, `b` bool, `u` unsigned, `i` integer, `f` number,
/// `o` object, `v` anything, `e=a|b` enum, `[t]` array of `t`, `{t}` map of `t` (`{s?}`: of
/// nullable strings).
const SPECS: &[(&str, &str)] = &[
    ("ping", ""),
    ("server.stop", ""),
    (
        "server.live_handoff",
        "expected_protocol?:u expected_version?:s import_exe?:s",
    ),
    ("server.reload_config", ""),
    ("server.agent_manifests", ""),
    ("server.reload_agent_manifests", ""),
    (
        "notification.show",
        "body?:s position?:e=top-left|top-right|bottom-left|bottom-right sound:e=none|done|request title!:s",
    ),
    ("client.window_title.set", "title!:s"),
    ("client.window_title.clear", ""),
    ("session.snapshot", ""),
    ("workspace.create", "cwd?:s env:{s} focus:b label?:s"),
    ("workspace.list", ""),
    ("workspace.get", "workspace_id!:s"),
    ("workspace.focus", "workspace_id!:s"),
    ("workspace.rename", "label!:s workspace_id!:s"),
    ("workspace.move", "insert_index!:u workspace_id!:s"),
    (
        "workspace.move_block",
        "before_workspace_id?:s workspace_ids!:[s]",
    ),
    (
        "workspace.report_metadata",
        "seq?:u source!:s tokens!:{s?} ttl_ms?:u workspace_id!:s",
    ),
    ("workspace.close", "workspace_id!:s"),
    ("worktree.list", "cwd?:s workspace_id?:s"),
    (
        "worktree.create",
        "base?:s branch?:s cwd?:s focus:b label?:s path?:s workspace_id?:s",
    ),
    (
        "worktree.open",
        "branch?:s cwd?:s focus:b label?:s path?:s workspace_id?:s",
    ),
    ("worktree.remove", "force:b workspace_id!:s"),
    (
        "tab.create",
        "cwd?:s env:{s} focus:b label?:s workspace_id?:s",
    ),
    ("tab.list", "workspace_id?:s"),
    ("tab.get", "tab_id!:s"),
    ("tab.focus", "tab_id!:s"),
    ("tab.rename", "label!:s tab_id!:s"),
    ("tab.move", "insert_index!:u tab_id!:s"),
    ("tab.close", "tab_id!:s"),
    ("agent.list", ""),
    ("agent.get", "target!:s"),
    (
        "agent.read",
        "format:e=text|ansi lines?:u source!:e=visible|recent|recent_unwrapped|detection strip_ansi:b target!:s",
    ),
    ("agent.explain", "target!:s"),
    ("agent.send_keys", "keys!:[s] target!:s"),
    ("agent.rename", "name?:s target!:s"),
    ("agent.view.set", "filter?:o label?:s sort:[o] source!:s"),
    ("agent.view.clear", "source?:s"),
    ("agent.focus", "target!:s"),
    (
        "agent.start",
        "args:[s] kind!:s name!:s pane_id!:s timeout_ms?:u",
    ),
    ("agent.prompt", "target!:s text!:s wait?:o"),
    (
        "agent.wait",
        "target!:s timeout_ms?:u until:[e=idle|working|blocked|done|unknown]",
    ),
    (
        "pane.split",
        "cwd?:s direction!:e=right|down env:{s} focus:b ratio?:f right_click:e=herdr|pane target_pane_id?:s workspace_id?:s",
    ),
    (
        "pane.swap",
        "direction?:e=left|right|up|down pane_id?:s source_pane_id?:s target_pane_id?:s",
    ),
    ("pane.move", "destination!:o focus:b pane_id!:s"),
    ("pane.zoom", "mode:e=toggle|on|off pane_id?:s"),
    ("pane.layout", "pane_id?:s"),
    ("pane.process_info", "pane_id?:s"),
    ("layout.export", "pane_id?:s tab_id?:s"),
    (
        "layout.apply",
        "focus:b root!:o tab_id?:s tab_label?:s workspace_id?:s",
    ),
    (
        "layout.set_split_ratio",
        "pane_id?:s path!:[b] ratio!:f tab_id?:s",
    ),
    (
        "pane.neighbor",
        "direction!:e=left|right|up|down pane_id?:s",
    ),
    ("pane.edges", "pane_id?:s"),
    (
        "pane.focus_direction",
        "direction!:e=left|right|up|down pane_id?:s",
    ),
    (
        "pane.resize",
        "amount?:f direction!:e=left|right|up|down pane_id?:s",
    ),
    ("pane.list", "workspace_id?:s"),
    ("pane.current", "caller_pane_id?:s"),
    ("pane.get", "pane_id!:s"),
    ("pane.focus", "pane_id!:s"),
    ("pane.input.set", "pane_id!:s right_click!:e=herdr|pane"),
    ("pane.rename", "label?:s pane_id!:s"),
    ("pane.send_text", "pane_id!:s text!:s"),
    ("pane.send_keys", "keys!:[s] pane_id!:s"),
    ("pane.send_input", "keys:[s] pane_id!:s text:s"),
    (
        "pane.read",
        "format:e=text|ansi lines?:u pane_id!:s source!:e=visible|recent|recent_unwrapped|detection strip_ansi:b",
    ),
    (
        "pane.graphics.set",
        "data_base64:s format!:e=png|rgb|rgba|bgra image_height!:u image_width!:u layer_id?:s pane_id!:s placement:o z_index:i",
    ),
    ("pane.graphics.clear", "layer_id?:s pane_id!:s"),
    ("pane.graphics.info", "pane_id!:s"),
    (
        "pane.report_agent",
        "agent!:s agent_session_id?:s agent_session_path?:s message?:s pane_id!:s seq?:u source!:s state!:e=idle|working|blocked|unknown",
    ),
    (
        "pane.report_agent_session",
        "agent!:s agent_session_id?:s agent_session_path?:s pane_id!:s seq?:u session_start_source?:s source!:s",
    ),
    (
        "pane.report_metadata",
        "agent?:s applies_to_source?:s clear_display_agent:b clear_state_labels:b clear_title:b display_agent?:s pane_id!:s seq?:u source!:s state_labels:{s} title?:s tokens:{s?} ttl_ms?:u",
    ),
    ("pane.clear_agent_authority", "pane_id!:s seq?:u source?:s"),
    ("pane.release_agent", "agent!:s pane_id!:s seq?:u source!:s"),
    ("pane.close", "pane_id!:s"),
    ("popup.close", ""),
    ("events.subscribe", "subscriptions!:[o]"),
    ("events.wait", "match_event!:o timeout_ms?:u"),
    (
        "pane.wait_for_output",
        "lines?:u match!:o pane_id!:s source!:e=visible|recent|recent_unwrapped|detection strip_ansi:b timeout_ms?:u",
    ),
    (
        "integration.install",
        "target!:e=pi|omp|claude|codex|copilot|devin|droid|kimi|opencode|kilo|hermes|qodercli|qwen|cursor|mastracode|antigravity_cli|grok",
    ),
    (
        "integration.uninstall",
        "target!:e=pi|omp|claude|codex|copilot|devin|droid|kimi|opencode|kilo|hermes|qodercli|qwen|cursor|mastracode|antigravity_cli|grok",
    ),
    ("plugin.link", "enabled:b path!:s source?:o"),
    ("plugin.list", "plugin_id?:s"),
    ("plugin.unlink", "plugin_id!:s"),
    ("plugin.enable", "plugin_id!:s"),
    ("plugin.disable", "plugin_id!:s"),
    ("plugin.action.list", "plugin_id?:s"),
    (
        "plugin.action.invoke",
        "action_id!:s context?:o plugin_id?:s",
    ),
    ("plugin.log.list", "limit?:u plugin_id?:s"),
    (
        "plugin.pane.open",
        "cwd?:s direction?:e=right|down entrypoint!:s env:{s} focus:b height?:v placement?:e=overlay|popup|split|tab|zoomed plugin_id!:s target_pane_id?:s width?:v workspace_id?:s",
    ),
    ("plugin.pane.focus", "pane_id!:s"),
    ("plugin.pane.close", "pane_id!:s"),
];

#[derive(Clone, Copy)]
enum Ty {
    Str,
    Bool,
    Unsigned,
    Int,
    Number,
    Object,
    Any,
    Enum(&'static str),
    List(&'static str),
    Map(&'static str),
}

struct Field {
    name: &'static str,
    required: bool,
    nullable: bool,
    ty: Ty,
}

fn spec(method: &str) -> Option<&'static str> {
    SPECS
        .iter()
        .find(|(name, _)| *name == method)
        .map(|(_, s)| *s)
}

fn fields(spec: &'static str) -> impl Iterator<Item = Field> {
    spec.split_whitespace().map(|token| {
        let (mut name, ty) = token.split_once(':').expect("field spec name:type");
        let nullable = name.ends_with('?');
        name = name.trim_end_matches('?');
        let required = name.ends_with('!');
        name = name.trim_end_matches('!');
        Field {
            name,
            required,
            nullable,
            ty: Ty::parse(ty),
        }
    })
}

impl Ty {
    fn parse(ty: &'static str) -> Ty {
        if let Some(variants) = ty.strip_prefix("e=") {
            return Ty::Enum(variants);
        }
        if let Some(inner) = ty.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            return Ty::List(inner);
        }
        if let Some(inner) = ty.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
            return Ty::Map(inner);
        }
        match ty {
            "s" => Ty::Str,
            "b" => Ty::Bool,
            "u" => Ty::Unsigned,
            "i" => Ty::Int,
            "f" => Ty::Number,
            "o" => Ty::Object,
            "v" => Ty::Any,
            other => panic!("fake herdr: bad type spec {other}"),
        }
    }

    /// `None` when `value` has this type, else what serde would say was expected.
    fn mismatch(self, value: &Value) -> Option<String> {
        let ok = match self {
            Ty::Str => value.is_string(),
            Ty::Bool => value.is_boolean(),
            Ty::Unsigned => value.is_u64(),
            Ty::Int => value.is_i64() || value.is_u64(),
            Ty::Number => value.is_number(),
            Ty::Object => value.is_object(),
            Ty::Any => true,
            Ty::Enum(variants) => {
                let Some(s) = value.as_str() else {
                    return Some("a string variant".into());
                };
                if variants.split('|').any(|v| v == s) {
                    return None;
                }
                let expected = variants
                    .split('|')
                    .map(|v| format!("`{v}`"))
                    .collect::<Vec<_>>();
                return Some(format!(
                    "one of {} (unknown variant `{s}`)",
                    expected.join(", ")
                ));
            }
            Ty::List(inner) => {
                let Some(items) = value.as_array() else {
                    return Some("a sequence".into());
                };
                let inner = Ty::parse(inner);
                return items.iter().find_map(|item| inner.mismatch(item));
            }
            Ty::Map(inner) => {
                let Some(entries) = value.as_object() else {
                    return Some("a map".into());
                };
                let nullable = inner.ends_with('?');
                let inner = Ty::parse(inner.trim_end_matches('?'));
                return entries
                    .values()
                    .filter(|v| !(nullable && v.is_null()))
                    .find_map(|v| inner.mismatch(v));
            }
        };
        if ok {
            return None;
        }
        Some(
            match self {
                Ty::Str => "a string",
                Ty::Bool => "a boolean",
                Ty::Unsigned => "an unsigned integer",
                Ty::Int => "an integer",
                Ty::Number => "a number",
                _ => "a map",
            }
            .into(),
        )
    }

    fn sample(self) -> Value {
        match self {
            Ty::Str | Ty::Any => json!("x"),
            Ty::Bool => json!(false),
            Ty::Unsigned | Ty::Int => json!(0),
            Ty::Number => json!(0.5),
            Ty::Object | Ty::Map(_) => json!({}),
            Ty::List(_) => json!([]),
            Ty::Enum(variants) => json!(variants.split('|').next().unwrap_or("")),
        }
    }
}

/// Roughly serde's name for what a value is, for error messages.
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("boolean `{b}`"),
        Value::Number(n) if n.is_f64() => format!("floating point `{n}`"),
        Value::Number(n) => format!("integer `{n}`"),
        Value::String(s) => format!("string {s:?}"),
        Value::Array(_) => "sequence".into(),
        Value::Object(_) => "map".into(),
    }
}

/// What herdr's `Request` deserialization accepts (messages shaped like serde's).
fn parse_request(value: &Value) -> Result<Request, String> {
    let Some(object) = value.as_object() else {
        return Err(format!(
            "invalid type: {}, expected struct Request",
            describe(value)
        ));
    };
    let id = match object.get("id") {
        None => return Err("missing field `id`".into()),
        Some(Value::String(id)) => id.clone(),
        Some(other) => {
            return Err(format!(
                "invalid type: {}, expected a string",
                describe(other)
            ));
        }
    };
    let method = match object.get("method") {
        None => return Err("missing field `method`".into()),
        Some(Value::String(m)) => m.as_str(),
        Some(other) => {
            return Err(format!(
                "invalid type: {}, expected variant identifier",
                describe(other)
            ));
        }
    };
    let Some((method, spec)) = SPECS.iter().find(|(name, _)| *name == method).copied() else {
        return Err(format!("unknown variant `{method}`"));
    };
    let params = match object.get("params") {
        None => return Err("missing field `params`".into()),
        Some(Value::Object(params)) => params.clone(),
        Some(other) => {
            return Err(format!(
                "invalid type: {}, expected a map (params of {method})",
                describe(other)
            ));
        }
    };
    for field in fields(spec) {
        match params.get(field.name) {
            None if field.required => return Err(format!("missing field `{}`", field.name)),
            None => {}
            Some(Value::Null) if field.nullable => {}
            Some(v) => {
                if let Some(expected) = field.ty.mismatch(v) {
                    return Err(format!(
                        "invalid type: {}, expected {expected} (field `{}` of {method})",
                        describe(v),
                        field.name
                    ));
                }
            }
        }
    }
    check_nested(method, &params)?;
    Ok(Request { id, method, params })
}

/// The nested tagged objects herdr decodes for a few methods, checked by their tags.
fn check_nested(method: &str, params: &Map<String, Value>) -> Result<(), String> {
    fn tag<'a>(
        value: &'a Value,
        key: &str,
        allowed: &[&str],
        what: &str,
    ) -> Result<&'a str, String> {
        let Some(found) = value.get(key).and_then(Value::as_str) else {
            return Err(format!("missing field `{key}` ({what})"));
        };
        if allowed.is_empty() || allowed.contains(&found) {
            Ok(found)
        } else {
            Err(format!("unknown variant `{found}` ({what})"))
        }
    }
    fn layout_node(node: &Value) -> Result<(), String> {
        if tag(node, "type", &["pane", "split"], "LayoutNode")? == "split" {
            for key in ["first", "second"] {
                layout_node(
                    node.get(key)
                        .ok_or_else(|| format!("missing field `{key}` (LayoutNode)"))?,
                )?;
            }
            tag(node, "direction", &["right", "down"], "LayoutNode")?;
            if !node.get("ratio").is_some_and(Value::is_number) {
                return Err("missing field `ratio` (LayoutNode)".into());
            }
        }
        Ok(())
    }
    match method {
        "pane.wait_for_output" => {
            tag(
                &params["match"],
                "type",
                &["substring", "regex"],
                "OutputMatch",
            )?;
            if !params["match"].get("value").is_some_and(Value::is_string) {
                return Err("missing field `value` (OutputMatch)".into());
            }
        }
        "events.wait" => {
            tag(&params["match_event"], "event", &[], "EventMatch")?;
        }
        "events.subscribe" => {
            for sub in params["subscriptions"].as_array().into_iter().flatten() {
                tag(sub, "type", &[], "Subscription")?;
            }
        }
        "layout.apply" => layout_node(&params["root"])?,
        "pane.move" => {
            tag(
                &params["destination"],
                "type",
                &["tab", "new_tab", "new_workspace"],
                "PaneMoveDestination",
            )?;
        }
        _ => {}
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Answers

type Answer = Result<Value, Failure>;

struct Failure {
    code: String,
    message: String,
}

impl Failure {
    fn new(code: &str, message: impl Into<String>) -> Failure {
        Failure {
            code: code.to_owned(),
            message: message.into(),
        }
    }
}

fn pane_not_found(id: &str) -> Failure {
    Failure::new("pane_not_found", format!("pane {id} not found"))
}

fn tab_not_found(id: &str) -> Failure {
    Failure::new("tab_not_found", format!("tab {id} not found"))
}

fn workspace_not_found(id: &str) -> Failure {
    Failure::new("workspace_not_found", format!("workspace {id} not found"))
}

fn agent_not_found(target: &str) -> Failure {
    Failure::new(
        "agent_not_found",
        format!("agent target {target} not found"),
    )
}

fn plugin_not_found(id: &str) -> Failure {
    Failure::new("plugin_not_found", format!("plugin {id} not found"))
}

enum Reply {
    Now(Answer),
    Subscribe,
    Wait(Wait),
}

struct Wait {
    until: Until,
    deadline: Option<Instant>,
    timeout_message: String,
}

enum Until {
    Never,
    Output {
        pane: String,
        needle: String,
        lines: Option<u64>,
        source: String,
    },
    Agent {
        pane: String,
        states: Vec<String>,
        prompted: bool,
    },
}

impl Wait {
    fn new(until: Until, timeout_ms: Option<u64>, what: &str) -> Wait {
        Wait {
            until,
            deadline: timeout_ms.map(|ms| Instant::now() + Duration::from_millis(ms)),
            timeout_message: format!("timed out waiting for {what}"),
        }
    }

    fn check(&self, session: &Session) -> Option<Answer> {
        match &self.until {
            Until::Never => None,
            Until::Output {
                pane,
                needle,
                lines,
                source,
            } => {
                let Some(at) = session.pane_at(pane) else {
                    return Some(Err(pane_not_found(pane)));
                };
                let read = session.read(at, source, "text", *lines);
                let text = read["text"].as_str().unwrap_or_default();
                let line = text
                    .lines()
                    .find(|l| l.contains(needle.as_str()))?
                    .to_owned();
                Some(Ok(json!({
                    "type": "output_matched",
                    "pane_id": pane,
                    "revision": session.pane(at).revision,
                    "matched_line": line,
                    "read": read,
                })))
            }
            Until::Agent {
                pane,
                states,
                prompted,
            } => {
                let Some(at) = session.pane_at(pane) else {
                    return Some(Err(agent_not_found(pane)));
                };
                if !states.iter().any(|s| *s == session.pane(at).status) {
                    return None;
                }
                let kind = if *prompted {
                    "agent_prompted"
                } else {
                    "agent_info"
                };
                Some(Ok(json!({"type": kind, "agent": session.agent_info(at)})))
            }
        }
    }
}

fn ok() -> Answer {
    Ok(json!({"type": "ok"}))
}

fn str_param<'a>(params: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    params.get(key).and_then(Value::as_str)
}

fn bool_param(params: &Map<String, Value>, key: &str) -> bool {
    params.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn u64_param(params: &Map<String, Value>, key: &str) -> Option<u64> {
    params.get(key).and_then(Value::as_u64)
}

/// Cuts control characters and surrounding blanks, then keeps `max` characters (herdr's toast
/// text rule); `None` when nothing is left.
fn sanitize(text: &str, max: usize) -> Option<String> {
    let cleaned: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let cleaned: String = cleaned.trim().chars().take(max).collect();
    (!cleaned.is_empty()).then_some(cleaned)
}

fn env_param(params: &Map<String, Value>) -> Result<(), Failure> {
    for key in params
        .get("env")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        if key.is_empty() || key.contains('=') || key.contains('\0') {
            return Err(Failure::new(
                "invalid_params",
                format!("invalid environment variable name {key:?}"),
            ));
        }
    }
    Ok(())
}

fn handle(state: &mut State, req: &Request) -> Reply {
    let p = &req.params;
    if let Some(wait) = waiting(state, req) {
        return wait;
    }
    let s = &mut state.session;
    let answer = match req.method {
        "ping" => Ok(json!({
            "type": "pong",
            "version": VERSION,
            "protocol": PROTOCOL,
            "capabilities": {"live_handoff": true, "detached_server_daemon": false},
        })),
        "server.stop" | "server.live_handoff" => ok(),
        "server.reload_config" => {
            Ok(json!({"type": "config_reload", "status": "applied", "diagnostics": []}))
        }
        "server.agent_manifests" => Ok(json!({
            "type": "agent_manifest_status",
            "manifests": [],
            "last_check_unix": null,
            "last_result": null,
        })),
        "server.reload_agent_manifests" => {
            Ok(json!({"type": "agent_manifest_reload", "manifests": []}))
        }
        "notification.show" => match sanitize(str_param(p, "title").unwrap_or(""), 80) {
            None => Err(Failure::new(
                "invalid_params",
                "notification title is empty",
            )),
            Some(title) => {
                state.notifications.push(json!({
                    "title": title,
                    "body": str_param(p, "body").and_then(|b| sanitize(b, 240)),
                    "sound": str_param(p, "sound").unwrap_or("none"),
                    "position": p.get("position").cloned().unwrap_or(Value::Null),
                }));
                Ok(json!({"type": "notification_show", "shown": true, "reason": "shown"}))
            }
        },
        "client.window_title.set" => {
            Ok(json!({"type": "client_window_title", "changed": true, "reason": "set"}))
        }
        "client.window_title.clear" => {
            Ok(json!({"type": "client_window_title", "changed": true, "reason": "cleared"}))
        }
        "session.snapshot" => Ok(json!({"type": "session_snapshot", "snapshot": s.snapshot()})),
        "popup.close" => Err(Failure::new("popup_not_open", "no popup is open")),
        "integration.install" | "integration.uninstall" => {
            let kind = req.method.replace('.', "_");
            let target = str_param(p, "target").unwrap_or_default();
            Ok(json!({
                "type": kind,
                "target": target,
                "details": {"messages": [format!("fake herdr: {} {target}", req.method)]},
            }))
        }
        m if m.starts_with("workspace.") || m.starts_with("worktree.") => workspaces(s, m, p),
        m if m.starts_with("tab.") => tabs(s, m, p),
        m if m.starts_with("agent.") => agents(s, m, p),
        m if m.starts_with("plugin.") => plugins(s, m, p),
        m => panes(s, m, p),
    };
    Reply::Now(answer)
}

/// The methods that hold the connection, or `None` for the others.
fn waiting(state: &mut State, req: &Request) -> Option<Reply> {
    let p = &req.params;
    let s = &mut state.session;
    let timeout = u64_param(p, "timeout_ms");
    Some(match req.method {
        "events.subscribe" => Reply::Subscribe,
        "events.wait" => Reply::Wait(Wait::new(Until::Never, timeout, "event")),
        "pane.wait_for_output" => {
            let pane = str_param(p, "pane_id").unwrap_or_default();
            if s.pane_at(pane).is_none() {
                return Some(Reply::Now(Err(pane_not_found(pane))));
            }
            let until = Until::Output {
                pane: pane.to_owned(),
                needle: p["match"]["value"].as_str().unwrap_or_default().to_owned(),
                lines: u64_param(p, "lines"),
                source: str_param(p, "source").unwrap_or("recent").to_owned(),
            };
            Reply::Wait(Wait::new(until, timeout, "output"))
        }
        "agent.wait" => {
            let target = str_param(p, "target").unwrap_or_default();
            let Some(at) = s.agent_at(target) else {
                return Some(Reply::Now(Err(agent_not_found(target))));
            };
            let until = Until::Agent {
                pane: s.pane(at).id.clone(),
                states: wait_states(p.get("until")),
                prompted: false,
            };
            Reply::Wait(Wait::new(until, timeout, "agent"))
        }
        "agent.prompt" if p.get("wait").is_some_and(Value::is_object) => {
            let target = str_param(p, "target").unwrap_or_default();
            let Some(at) = s.agent_at(target) else {
                return Some(Reply::Now(Err(agent_not_found(target))));
            };
            let wait = &p["wait"];
            let until = Until::Agent {
                pane: s.pane(at).id.clone(),
                states: wait_states(wait.get("until")),
                prompted: true,
            };
            Reply::Wait(Wait::new(until, wait["timeout_ms"].as_u64(), "agent"))
        }
        _ => return None,
    })
}

/// The agent states a wait ends on (`idle`/`done` when the request names none).
fn wait_states(until: Option<&Value>) -> Vec<String> {
    let states: Vec<String> = until
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    if states.is_empty() {
        vec!["idle".into(), "done".into()]
    } else {
        states
    }
}

fn workspaces(s: &mut Session, method: &str, p: &Map<String, Value>) -> Answer {
    let wanted = str_param(p, "workspace_id");
    let find = |s: &Session| -> Result<usize, Failure> {
        let id = wanted.unwrap_or_default();
        s.workspace_at(id).ok_or_else(|| workspace_not_found(id))
    };
    match method {
        "workspace.create" => {
            env_param(p)?;
            let cwd = str_param(p, "cwd").map(str::to_owned);
            let w = s.new_workspace(str_param(p, "label"), cwd, bool_param(p, "focus"));
            Ok(json!({
                "type": "workspace_created",
                "workspace": s.workspace_info(w),
                "tab": s.tab_info((w, 0)),
                "root_pane": s.pane_info((w, 0, 0)),
            }))
        }
        "workspace.list" => {
            let list: Vec<Value> = (0..s.workspaces.len())
                .map(|w| s.workspace_info(w))
                .collect();
            Ok(json!({"type": "workspace_list", "workspaces": list}))
        }
        "workspace.get" => {
            let w = find(s)?;
            Ok(json!({"type": "workspace_info", "workspace": s.workspace_info(w)}))
        }
        "workspace.focus" => {
            let w = find(s)?;
            s.active = s.workspaces[w].id.clone();
            Ok(json!({"type": "workspace_info", "workspace": s.workspace_info(w)}))
        }
        "workspace.rename" => {
            let w = find(s)?;
            s.workspaces[w].label = str_param(p, "label").unwrap_or_default().to_owned();
            Ok(json!({"type": "workspace_info", "workspace": s.workspace_info(w)}))
        }
        "workspace.move" => {
            let w = find(s)?;
            let to =
                (u64_param(p, "insert_index").unwrap_or(0) as usize).min(s.workspaces.len() - 1);
            let moved = s.workspaces.remove(w);
            s.workspaces.insert(to, moved);
            ok()
        }
        "workspace.move_block" => {
            for id in p["workspace_ids"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                s.workspace_at(id).ok_or_else(|| workspace_not_found(id))?;
            }
            ok()
        }
        "workspace.report_metadata" => {
            let w = find(s)?;
            for (key, value) in p["tokens"].as_object().into_iter().flatten() {
                match value {
                    Value::Null => s.workspaces[w].tokens.remove(key),
                    v => s.workspaces[w].tokens.insert(key.clone(), v.clone()),
                };
            }
            ok()
        }
        "workspace.close" => {
            let w = find(s)?;
            s.close_workspace(w);
            ok()
        }
        "worktree.list" => {
            if wanted.is_some() {
                find(s)?;
            }
            let root = str_param(p, "cwd").unwrap_or(START_CWD);
            Ok(json!({
                "type": "worktree_list",
                "source": {
                    "repo_key": root,
                    "repo_name": Path::new(root).file_name().and_then(|n| n.to_str()).unwrap_or("repo"),
                    "repo_root": root,
                    "source_checkout_path": root,
                    "source_workspace_id": wanted,
                },
                "worktrees": [],
            }))
        }
        "worktree.remove" => {
            let w = find(s)?;
            let path = s.workspaces[w].tabs[0].panes[0].cwd.clone();
            let id = s.workspaces[w].id.clone();
            s.close_workspace(w);
            Ok(json!({
                "type": "worktree_removed",
                "workspace_id": id,
                "path": path.unwrap_or_else(|| START_CWD.into()),
                "forced": bool_param(p, "force"),
            }))
        }
        // worktree.create / worktree.open
        _ => Err(Failure::new(
            "internal_error",
            "fake herdr: git worktrees are not modelled",
        )),
    }
}

fn tabs(s: &mut Session, method: &str, p: &Map<String, Value>) -> Answer {
    if method == "tab.create" {
        env_param(p)?;
        let w = match str_param(p, "workspace_id") {
            Some(id) => s.workspace_at(id).ok_or_else(|| workspace_not_found(id))?,
            None => s
                .workspace_at(&s.active.clone())
                .ok_or_else(|| Failure::new("workspace_not_found", "no active workspace"))?,
        };
        let cwd = str_param(p, "cwd").map(str::to_owned);
        let t = s.new_tab(w, str_param(p, "label"), cwd, bool_param(p, "focus"));
        return Ok(json!({
            "type": "tab_created",
            "tab": s.tab_info((w, t)),
            "root_pane": s.pane_info((w, t, 0)),
        }));
    }
    if method == "tab.list" {
        let list: Vec<Value> = match str_param(p, "workspace_id") {
            Some(id) => {
                let w = s.workspace_at(id).ok_or_else(|| workspace_not_found(id))?;
                (0..s.workspaces[w].tabs.len())
                    .map(|t| s.tab_info((w, t)))
                    .collect()
            }
            None => s.all_tabs().into_iter().map(|at| s.tab_info(at)).collect(),
        };
        return Ok(json!({"type": "tab_list", "tabs": list}));
    }
    let id = str_param(p, "tab_id").unwrap_or_default();
    let (w, t) = s.tab_at(id).ok_or_else(|| tab_not_found(id))?;
    match method {
        "tab.focus" => s.focus_tab(w, t),
        "tab.rename" => {
            s.workspaces[w].tabs[t].label = str_param(p, "label").unwrap_or_default().into()
        }
        "tab.move" => {
            let tabs = &mut s.workspaces[w].tabs;
            let to = (u64_param(p, "insert_index").unwrap_or(0) as usize).min(tabs.len() - 1);
            let moved = tabs.remove(t);
            tabs.insert(to, moved);
            return ok();
        }
        "tab.close" => {
            s.close_tab(w, t);
            return ok();
        }
        _ => {} // tab.get
    }
    Ok(json!({"type": "tab_info", "tab": s.tab_info((w, t))}))
}

fn agents(s: &mut Session, method: &str, p: &Map<String, Value>) -> Answer {
    match method {
        "agent.list" => {
            let list: Vec<Value> = s
                .all_panes()
                .into_iter()
                .filter(|at| s.pane(*at).agent.is_some())
                .map(|at| s.agent_info(at))
                .collect();
            return Ok(json!({"type": "agent_list", "agents": list}));
        }
        "agent.view.set" => {
            let label = str_param(p, "label");
            let source = str_param(p, "source");
            s.agent_view = Some(json!({"label": label, "source": source}));
            return Ok(
                json!({"type": "agent_view", "active": true, "label": label, "source": source}),
            );
        }
        "agent.view.clear" => {
            s.agent_view = None;
            return Ok(
                json!({"type": "agent_view", "active": false, "label": null, "source": null}),
            );
        }
        "agent.start" => {
            let pane = str_param(p, "pane_id").unwrap_or_default();
            let at = s.pane_at(pane).ok_or_else(|| pane_not_found(pane))?;
            let kind = str_param(p, "kind").unwrap_or_default().to_owned();
            let name = str_param(p, "name").unwrap_or_default().to_owned();
            if let Some(ms) = u64_param(p, "timeout_ms")
                && !(3001..=300_000).contains(&ms)
            {
                return Err(Failure::new(
                    "invalid_params",
                    "timeout_ms must be greater than 3000 and at most 300000",
                ));
            }
            let mut argv = vec![Value::String(kind.clone())];
            argv.extend(
                p.get("args")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
            );
            let pane = s.pane_mut(at);
            pane.agent = Some(kind);
            pane.name = Some(name);
            pane.status = "idle".into();
            pane.revision += 1;
            return Ok(json!({"type": "agent_started", "agent": s.agent_info(at), "argv": argv}));
        }
        _ => {}
    }
    let target = str_param(p, "target").unwrap_or_default();
    let at = s.agent_at(target).ok_or_else(|| agent_not_found(target))?;
    match method {
        "agent.read" => {
            let read = s.read(
                at,
                str_param(p, "source").unwrap_or("recent"),
                str_param(p, "format").unwrap_or("text"),
                u64_param(p, "lines"),
            );
            Ok(json!({"type": "pane_read", "read": read}))
        }
        "agent.explain" => {
            let pane = s.pane(at);
            Ok(json!({
                "type": "agent_explain",
                "explain": {
                    "pane_id": pane.id,
                    "agent": pane.agent,
                    "agent_status": pane.status,
                    "reason": "reported through pane.report_agent (fake herdr)",
                },
            }))
        }
        "agent.send_keys" => ok(),
        "agent.prompt" => Ok(json!({"type": "agent_prompted", "agent": s.agent_info(at)})),
        "agent.rename" => {
            s.pane_mut(at).name = str_param(p, "name").map(str::to_owned);
            Ok(json!({"type": "agent_info", "agent": s.agent_info(at)}))
        }
        "agent.focus" => {
            s.focus_pane(at);
            Ok(json!({"type": "agent_info", "agent": s.agent_info(at)}))
        }
        _ => Ok(json!({"type": "agent_info", "agent": s.agent_info(at)})), // agent.get
    }
}

fn plugins(s: &mut Session, method: &str, p: &Map<String, Value>) -> Answer {
    let wanted = str_param(p, "plugin_id");
    let find = |s: &Session| -> Result<usize, Failure> {
        let id = wanted.unwrap_or_default();
        s.plugins
            .iter()
            .position(|pl| pl.id == id)
            .ok_or_else(|| plugin_not_found(id))
    };
    match method {
        "plugin.link" => {
            let root = PathBuf::from(str_param(p, "path").unwrap_or_default());
            let manifest = root.join("herdr-plugin.toml");
            let text = fs::read_to_string(&manifest).map_err(|e| {
                Failure::new(
                    "invalid_params",
                    format!("cannot read {}: {e}", manifest.display()),
                )
            })?;
            let key = |k: &str| manifest_string(&text, k);
            let Some(id) = key("id") else {
                return Err(Failure::new("invalid_params", "plugin manifest has no id"));
            };
            let plugin = Plugin {
                name: key("name").unwrap_or_else(|| id.clone()),
                version: key("version").unwrap_or_default(),
                min_herdr_version: key("min_herdr_version").unwrap_or_default(),
                description: key("description"),
                id,
                root: root.display().to_string(),
                manifest: manifest.display().to_string(),
                enabled: p.get("enabled").and_then(Value::as_bool).unwrap_or(true),
            };
            s.plugins.retain(|pl| pl.id != plugin.id);
            s.plugins.push(plugin);
            let info = s.plugins.last().map(Plugin::info);
            Ok(json!({"type": "plugin_linked", "plugin": info}))
        }
        "plugin.list" => {
            let list: Vec<Value> = s
                .plugins
                .iter()
                .filter(|pl| wanted.is_none_or(|id| pl.id == id))
                .map(Plugin::info)
                .collect();
            Ok(json!({"type": "plugin_list", "plugins": list}))
        }
        "plugin.unlink" => {
            let id = wanted.unwrap_or_default();
            let before = s.plugins.len();
            s.plugins.retain(|pl| pl.id != id);
            Ok(
                json!({"type": "plugin_unlinked", "plugin_id": id, "removed": s.plugins.len() < before}),
            )
        }
        "plugin.enable" | "plugin.disable" => {
            let i = find(s)?;
            s.plugins[i].enabled = method == "plugin.enable";
            let kind = if s.plugins[i].enabled {
                "plugin_enabled"
            } else {
                "plugin_disabled"
            };
            Ok(json!({"type": kind, "plugin": s.plugins[i].info()}))
        }
        "plugin.action.list" => {
            if wanted.is_some() {
                find(s)?;
            }
            Ok(json!({"type": "plugin_action_list", "actions": []}))
        }
        "plugin.action.invoke" => {
            if wanted.is_some() {
                find(s)?;
            }
            let action = str_param(p, "action_id").unwrap_or_default();
            Err(Failure::new(
                "plugin_action_not_found",
                format!("plugin action {action} not found"),
            ))
        }
        "plugin.log.list" => {
            if wanted.is_some() {
                find(s)?;
            }
            Ok(json!({"type": "plugin_log_list", "logs": []}))
        }
        "plugin.pane.open" => {
            find(s)?;
            let entry = str_param(p, "entrypoint").unwrap_or_default();
            Err(Failure::new(
                "not_found",
                format!("plugin pane {entry} not found"),
            ))
        }
        // plugin.pane.focus / plugin.pane.close: the fake opens no plugin panes
        _ => Err(pane_not_found(str_param(p, "pane_id").unwrap_or_default())),
    }
}

/// A top-level `key = "value"` of a TOML manifest (before its first table).
fn manifest_string(text: &str, key: &str) -> Option<String> {
    text.lines()
        .map(str::trim)
        .take_while(|line| !line.starts_with('['))
        .filter_map(|line| line.split_once('='))
        .find(|(k, _)| k.trim() == key)
        .and_then(|(_, v)| {
            let v = v.trim();
            v.strip_prefix('"')?.split('"').next().map(str::to_owned)
        })
}

fn panes(s: &mut Session, method: &str, p: &Map<String, Value>) -> Answer {
    match method {
        "pane.list" => {
            let list: Vec<Value> = match str_param(p, "workspace_id") {
                Some(id) => {
                    let w = s.workspace_at(id).ok_or_else(|| workspace_not_found(id))?;
                    s.all_panes()
                        .into_iter()
                        .filter(|at| at.0 == w)
                        .map(|at| s.pane_info(at))
                        .collect()
                }
                None => s
                    .all_panes()
                    .into_iter()
                    .map(|at| s.pane_info(at))
                    .collect(),
            };
            return Ok(json!({"type": "pane_list", "panes": list}));
        }
        "pane.current" => {
            let at = match str_param(p, "caller_pane_id") {
                Some(id) => s.pane_at(id).ok_or_else(|| pane_not_found(id))?,
                None => s.focused().ok_or_else(|| pane_not_found("(focused)"))?,
            };
            return Ok(json!({"type": "pane_current", "pane": s.pane_info(at)}));
        }
        "pane.split" => {
            env_param(p)?;
            let at = s.resolve(str_param(p, "target_pane_id"))?;
            let cwd = str_param(p, "cwd")
                .map(str::to_owned)
                .or_else(|| s.pane(at).cwd.clone());
            let new = s.split(at, cwd, bool_param(p, "focus"));
            return Ok(json!({"type": "pane_info", "pane": s.pane_info(new)}));
        }
        "pane.swap" => {
            let at = s.resolve(str_param(p, "source_pane_id").or(str_param(p, "pane_id")))?;
            let target = str_param(p, "target_pane_id");
            if let Some(t) = target {
                s.pane_at(t).ok_or_else(|| pane_not_found(t))?;
            }
            return Ok(json!({
                "type": "pane_swap",
                "swap": {
                    "changed": false,
                    "reason": "no_neighbor",
                    "source_pane_id": s.pane(at).id,
                    "target_pane_id": target,
                    "focused_pane_id": s.focused_in_tab(at),
                    "layout": s.layout((at.0, at.1)),
                },
            }));
        }
        "layout.export" | "layout.set_split_ratio" => {
            let (w, t) = match (str_param(p, "tab_id"), str_param(p, "pane_id")) {
                (Some(id), _) => s.tab_at(id).ok_or_else(|| tab_not_found(id))?,
                (None, pane) => {
                    let at = s.resolve(pane)?;
                    (at.0, at.1)
                }
            };
            let kind = if method == "layout.export" {
                "layout_export"
            } else {
                "layout_split_ratio_set"
            };
            return Ok(json!({"type": kind, "layout": s.description((w, t))}));
        }
        "layout.apply" => {
            let w = match str_param(p, "workspace_id") {
                Some(id) => s.workspace_at(id).ok_or_else(|| workspace_not_found(id))?,
                None => s
                    .workspace_at(&s.active.clone())
                    .ok_or_else(|| workspace_not_found("(active)"))?,
            };
            if let Some(id) = str_param(p, "tab_id") {
                s.tab_at(id).ok_or_else(|| tab_not_found(id))?;
            }
            let leaves = count_leaves(&p["root"]);
            let t = s.new_tab(w, str_param(p, "tab_label"), None, bool_param(p, "focus"));
            for _ in 1..leaves {
                s.split((w, t, 0), None, false);
            }
            return Ok(json!({"type": "layout_apply", "layout": s.description((w, t))}));
        }
        _ => {}
    }

    let at = if matches!(
        method,
        "pane.zoom"
            | "pane.layout"
            | "pane.process_info"
            | "pane.neighbor"
            | "pane.edges"
            | "pane.focus_direction"
            | "pane.resize"
    ) {
        s.resolve(str_param(p, "pane_id"))?
    } else {
        let id = str_param(p, "pane_id").unwrap_or_default();
        s.pane_at(id).ok_or_else(|| pane_not_found(id))?
    };
    let tab = (at.0, at.1);
    let pane_id = s.pane(at).id.clone();
    match method {
        "pane.get" => Ok(json!({"type": "pane_info", "pane": s.pane_info(at)})),
        "pane.focus" => {
            s.focus_pane(at);
            Ok(json!({"type": "pane_info", "pane": s.pane_info(at)}))
        }
        "pane.read" => {
            let read = s.read(
                at,
                str_param(p, "source").unwrap_or("recent"),
                str_param(p, "format").unwrap_or("text"),
                u64_param(p, "lines"),
            );
            Ok(json!({"type": "pane_read", "read": read}))
        }
        "pane.rename" => {
            s.pane_mut(at).label = str_param(p, "label").map(str::to_owned);
            ok()
        }
        "pane.close" => {
            s.close_pane(at);
            ok()
        }
        "pane.report_agent" | "pane.report_agent_session" => {
            let agent = str_param(p, "agent").unwrap_or_default().trim().to_owned();
            if agent.is_empty() {
                return Err(Failure::new(
                    "invalid_agent",
                    "agent label must not be empty",
                ));
            }
            let source = str_param(p, "source").unwrap_or_default().to_owned();
            let session = match (
                str_param(p, "agent_session_id"),
                str_param(p, "agent_session_path"),
            ) {
                (Some(v), _) => {
                    Some(json!({"source": source, "agent": agent, "kind": "id", "value": v}))
                }
                (None, Some(v)) => {
                    Some(json!({"source": source, "agent": agent, "kind": "path", "value": v}))
                }
                (None, None) => None,
            };
            let pane = s.pane_mut(at);
            if method == "pane.report_agent" {
                pane.status = str_param(p, "state").unwrap_or("unknown").to_owned();
                pane.state_change_seq += 1;
            }
            pane.agent = Some(agent);
            if session.is_some() {
                pane.session = session;
            }
            pane.revision += 1;
            ok()
        }
        "pane.release_agent" => {
            let pane = s.pane_mut(at);
            if pane.agent.as_deref() == str_param(p, "agent") {
                pane.agent = None;
                pane.session = None;
                pane.status = "unknown".into();
                pane.revision += 1;
            }
            ok()
        }
        "pane.report_metadata" => {
            let pane = s.pane_mut(at);
            if bool_param(p, "clear_title") {
                pane.title = None;
            }
            if let Some(title) = str_param(p, "title") {
                pane.title = Some(title.to_owned());
            }
            ok()
        }
        "pane.graphics.set" => {
            s.graphics_sequence += 1;
            Ok(json!({
                "type": "pane_graphics_frame_ack",
                "sequence": s.graphics_sequence,
                "revision": s.graphics_sequence,
            }))
        }
        "pane.graphics.info" => Ok(json!({
            "type": "pane_graphics_info",
            "cell_width_px": 9,
            "cell_height_px": 18,
            "pane_visible": s.is_focused_tab(tab),
            "file_frame_formats": [],
            "file_frame_damage": false,
            "file_frame_direct_max_bytes": null,
            "file_frame_directory": null,
            "file_frame_max_bytes": null,
            "file_frame_transport": null,
            "max_layers_per_pane": 0,
            "pixel_mouse": false,
        })),
        "pane.zoom" => {
            let single = s.workspaces[at.0].tabs[at.1].panes.len() == 1;
            let was = s.workspaces[at.0].tabs[at.1].zoomed;
            let now = match str_param(p, "mode").unwrap_or("toggle") {
                "on" => true,
                "off" => false,
                _ => !was,
            };
            let now = now && !single;
            s.workspaces[at.0].tabs[at.1].zoomed = now;
            let reason = if single {
                json!("single_pane")
            } else if was == now {
                json!(if now {
                    "already_zoomed"
                } else {
                    "already_unzoomed"
                })
            } else {
                Value::Null
            };
            Ok(json!({
                "type": "pane_zoom",
                "zoom": {
                    "changed": was != now,
                    "zoom_changed": was != now,
                    "focus_changed": false,
                    "pane_id": pane_id,
                    "focused_pane_id": s.focused_in_tab(at),
                    "zoomed": now,
                    "reason": reason,
                    "layout": s.layout(tab),
                },
            }))
        }
        "pane.layout" => Ok(json!({"type": "pane_layout", "layout": s.layout(tab)})),
        "pane.process_info" => Ok(json!({
            "type": "pane_process_info",
            "process_info": {
                "pane_id": pane_id,
                "shell_pid": null,
                "tty": null,
                "foreground_process_group_id": null,
                "foreground_processes": [],
            },
        })),
        "pane.neighbor" => Ok(json!({
            "type": "pane_neighbor",
            "neighbor": {
                "pane_id": pane_id,
                "direction": str_param(p, "direction"),
                "neighbor_pane_id": s.neighbor(at, str_param(p, "direction").unwrap_or_default()),
                "layout": s.layout(tab),
            },
        })),
        "pane.edges" => {
            let count = s.workspaces[at.0].tabs[at.1].panes.len();
            Ok(json!({
                "type": "pane_edges",
                "edges": {
                    "pane_id": pane_id,
                    "left": at.2 == 0,
                    "right": at.2 + 1 == count,
                    "up": true,
                    "down": true,
                    "layout": s.layout(tab),
                },
            }))
        }
        "pane.focus_direction" => {
            let neighbor = s.neighbor(at, str_param(p, "direction").unwrap_or_default());
            let reason = if neighbor.is_none() {
                json!("no_neighbor")
            } else {
                Value::Null
            };
            if let Some(n) = neighbor.as_deref().and_then(|n| s.pane_at(n)) {
                s.focus_pane(n);
            }
            Ok(json!({
                "type": "pane_focus_direction",
                "focus": {
                    "changed": neighbor.is_some(),
                    "source_pane_id": pane_id,
                    "focused_pane_id": neighbor.clone().unwrap_or_else(|| pane_id.clone()),
                    "reason": reason,
                    "layout": s.layout(tab),
                },
            }))
        }
        "pane.resize" => Ok(json!({
            "type": "pane_resize",
            "resize": {
                "changed": false,
                "pane_id": pane_id,
                "focused_pane_id": s.focused_in_tab(at),
                "reason": "unchanged",
                "layout": s.layout(tab),
            },
        })),
        "pane.move" => {
            let info = s.pane_info(at);
            Ok(json!({
                "type": "pane_move",
                "move_result": {
                    "changed": false,
                    "reason": "same_tab",
                    "previous_pane_id": pane_id,
                    "previous_workspace_id": s.workspaces[at.0].id,
                    "previous_tab_id": s.workspaces[at.0].tabs[at.1].id,
                    "pane": info,
                    "target_layout": s.layout(tab),
                    "source_layout": null,
                    "focused_pane_id": s.focused_in_tab(at),
                    "created_tab": null,
                    "created_workspace": null,
                    "closed_tab_id": null,
                    "closed_workspace_id": null,
                },
            }))
        }
        // pane.send_input, pane.send_text, pane.send_keys, pane.input.set, pane.graphics.clear,
        // pane.clear_agent_authority: herdr acts on the pane and answers ok
        _ => ok(),
    }
}

fn count_leaves(node: &Value) -> usize {
    if node.get("type").and_then(Value::as_str) == Some("split") {
        count_leaves(&node["first"]) + count_leaves(&node["second"])
    } else {
        1
    }
}

// ---------------------------------------------------------------------------------------------
// The session model

/// (workspace, tab, pane) indexes.
type At = (usize, usize, usize);

struct Session {
    workspaces: Vec<Workspace>,
    /// The active workspace's id.
    active: String,
    next_workspace: u64,
    next_terminal: u64,
    plugins: Vec<Plugin>,
    agent_view: Option<Value>,
    graphics_sequence: u64,
}

struct Workspace {
    id: String,
    number: u64,
    label: String,
    tabs: Vec<Tab>,
    active_tab: String,
    next_tab: u64,
    next_pane: u64,
    tokens: Map<String, Value>,
}

struct Tab {
    id: String,
    number: u64,
    label: String,
    panes: Vec<Pane>,
    focused: String,
    zoomed: bool,
}

struct Pane {
    id: String,
    terminal_id: String,
    label: Option<String>,
    cwd: Option<String>,
    title: Option<String>,
    text: String,
    revision: u64,
    agent: Option<String>,
    name: Option<String>,
    status: String,
    state_change_seq: u64,
    session: Option<Value>,
}

struct Plugin {
    id: String,
    name: String,
    version: String,
    min_herdr_version: String,
    description: Option<String>,
    root: String,
    manifest: String,
    enabled: bool,
}

impl Plugin {
    fn info(&self) -> Value {
        json!({
            "plugin_id": self.id,
            "name": self.name,
            "version": self.version,
            "min_herdr_version": self.min_herdr_version,
            "description": self.description,
            "manifest_path": self.manifest,
            "plugin_root": self.root,
            "enabled": self.enabled,
            "source": {"kind": "local"},
            "platforms": null,
            "actions": [],
            "build": [],
            "events": [],
            "link_handlers": [],
            "panes": [],
            "startup": [],
            "warnings": [],
        })
    }
}

impl Default for Session {
    /// `w1` with tab `w1:t1` holding `w1:p1` and the focused `w1:p2`.
    fn default() -> Session {
        let mut s = Session {
            workspaces: Vec::new(),
            active: String::new(),
            next_workspace: 1,
            next_terminal: 1,
            plugins: Vec::new(),
            agent_view: None,
            graphics_sequence: 0,
        };
        let w = s.new_workspace(Some("main"), Some(START_CWD.into()), true);
        s.split((w, 0, 0), Some(START_CWD.into()), true);
        s
    }
}

/// The status a tab or workspace shows for its panes: the most urgent one.
fn rollup<'a>(statuses: impl Iterator<Item = &'a str>) -> &'static str {
    const ORDER: [&str; 5] = ["unknown", "idle", "done", "working", "blocked"];
    statuses
        .filter_map(|s| ORDER.iter().position(|o| *o == s))
        .max()
        .map_or("unknown", |i| ORDER[i])
}

impl Session {
    fn new_pane(&mut self, w: usize, cwd: Option<String>) -> Pane {
        let ws = &mut self.workspaces[w];
        let id = format!("{}:p{}", ws.id, ws.next_pane);
        ws.next_pane += 1;
        let terminal_id = format!("term-{}", self.next_terminal);
        self.next_terminal += 1;
        Pane {
            id,
            terminal_id,
            label: None,
            cwd,
            title: None,
            text: SCREEN_TEXT.to_owned(),
            revision: 1,
            agent: None,
            name: None,
            status: "unknown".into(),
            state_change_seq: 0,
            session: None,
        }
    }

    fn new_workspace(&mut self, label: Option<&str>, cwd: Option<String>, focus: bool) -> usize {
        let number = self.next_workspace;
        self.next_workspace += 1;
        let id = format!("w{number}");
        let label = label.map(str::to_owned).unwrap_or_else(|| {
            cwd.as_deref()
                .and_then(|c| Path::new(c).file_name())
                .and_then(|n| n.to_str())
                .map(str::to_owned)
                .unwrap_or_else(|| format!("workspace {number}"))
        });
        self.workspaces.push(Workspace {
            id: id.clone(),
            number,
            label,
            tabs: Vec::new(),
            active_tab: String::new(),
            next_tab: 1,
            next_pane: 1,
            tokens: Map::new(),
        });
        let w = self.workspaces.len() - 1;
        self.new_tab(w, None, cwd, false);
        if focus || self.active.is_empty() {
            self.active = id;
        }
        w
    }

    fn new_tab(
        &mut self,
        w: usize,
        label: Option<&str>,
        cwd: Option<String>,
        focus: bool,
    ) -> usize {
        let cwd = cwd.or_else(|| self.focused_cwd(w));
        let pane = self.new_pane(w, cwd);
        let ws = &mut self.workspaces[w];
        let number = ws.next_tab;
        ws.next_tab += 1;
        let id = format!("{}:t{number}", ws.id);
        ws.tabs.push(Tab {
            id: id.clone(),
            number,
            label: label
                .map(str::to_owned)
                .unwrap_or_else(|| number.to_string()),
            focused: pane.id.clone(),
            panes: vec![pane],
            zoomed: false,
        });
        if focus || ws.active_tab.is_empty() {
            ws.active_tab = id;
            if focus {
                self.active = self.workspaces[w].id.clone();
            }
        }
        self.workspaces[w].tabs.len() - 1
    }

    fn split(&mut self, at: At, cwd: Option<String>, focus: bool) -> At {
        let pane = self.new_pane(at.0, cwd);
        let tab = &mut self.workspaces[at.0].tabs[at.1];
        if focus {
            tab.focused = pane.id.clone();
        }
        tab.panes.insert(at.2 + 1, pane);
        (at.0, at.1, at.2 + 1)
    }

    fn focused_cwd(&self, w: usize) -> Option<String> {
        let ws = &self.workspaces[w];
        let tab = ws.tabs.iter().find(|t| t.id == ws.active_tab)?;
        tab.panes.iter().find(|p| p.id == tab.focused)?.cwd.clone()
    }

    fn close_workspace(&mut self, w: usize) {
        let removed = self.workspaces.remove(w);
        if removed.id == self.active {
            self.active = self
                .workspaces
                .first()
                .map(|ws| ws.id.clone())
                .unwrap_or_default();
        }
    }

    fn close_tab(&mut self, w: usize, t: usize) {
        let ws = &mut self.workspaces[w];
        let removed = ws.tabs.remove(t);
        if ws.tabs.is_empty() {
            self.close_workspace(w);
        } else if removed.id == ws.active_tab {
            ws.active_tab = ws.tabs[t.min(ws.tabs.len() - 1)].id.clone();
        }
    }

    fn close_pane(&mut self, at: At) {
        let tab = &mut self.workspaces[at.0].tabs[at.1];
        let removed = tab.panes.remove(at.2);
        if tab.panes.is_empty() {
            self.close_tab(at.0, at.1);
            return;
        }
        if tab.panes.len() == 1 {
            tab.zoomed = false;
        }
        if removed.id == tab.focused {
            tab.focused = tab.panes[at.2.min(tab.panes.len() - 1)].id.clone();
        }
    }

    fn focus_tab(&mut self, w: usize, t: usize) {
        self.workspaces[w].active_tab = self.workspaces[w].tabs[t].id.clone();
        self.active = self.workspaces[w].id.clone();
    }

    fn focus_pane(&mut self, at: At) {
        self.focus_tab(at.0, at.1);
        let tab = &mut self.workspaces[at.0].tabs[at.1];
        tab.focused = tab.panes[at.2].id.clone();
    }

    fn workspace_at(&self, id: &str) -> Option<usize> {
        self.workspaces.iter().position(|ws| ws.id == id)
    }

    fn tab_at(&self, id: &str) -> Option<(usize, usize)> {
        self.all_tabs()
            .into_iter()
            .find(|&(w, t)| self.workspaces[w].tabs[t].id == id)
    }

    fn pane_at(&self, id: &str) -> Option<At> {
        self.all_panes()
            .into_iter()
            .find(|&at| self.pane(at).id == id)
    }

    /// A pane with an agent, named by its pane id or its agent name.
    fn agent_at(&self, target: &str) -> Option<At> {
        self.all_panes().into_iter().find(|&at| {
            let pane = self.pane(at);
            pane.agent.is_some() && (pane.id == target || pane.name.as_deref() == Some(target))
        })
    }

    /// An optional `pane_id`: the named pane, else the focused one.
    fn resolve(&self, pane_id: Option<&str>) -> Result<At, Failure> {
        match pane_id {
            Some(id) => self.pane_at(id).ok_or_else(|| pane_not_found(id)),
            None => self.focused().ok_or_else(|| pane_not_found("(focused)")),
        }
    }

    fn all_tabs(&self) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for (w, ws) in self.workspaces.iter().enumerate() {
            out.extend((0..ws.tabs.len()).map(|t| (w, t)));
        }
        out
    }

    fn all_panes(&self) -> Vec<At> {
        let mut out = Vec::new();
        for (w, t) in self.all_tabs() {
            out.extend((0..self.workspaces[w].tabs[t].panes.len()).map(|p| (w, t, p)));
        }
        out
    }

    fn pane(&self, at: At) -> &Pane {
        &self.workspaces[at.0].tabs[at.1].panes[at.2]
    }

    fn pane_mut(&mut self, at: At) -> &mut Pane {
        &mut self.workspaces[at.0].tabs[at.1].panes[at.2]
    }

    fn focused(&self) -> Option<At> {
        let w = self.workspace_at(&self.active)?;
        let ws = &self.workspaces[w];
        let t = ws.tabs.iter().position(|t| t.id == ws.active_tab)?;
        let tab = &ws.tabs[t];
        let p = tab.panes.iter().position(|p| p.id == tab.focused)?;
        Some((w, t, p))
    }

    fn focused_in_tab(&self, at: At) -> String {
        self.workspaces[at.0].tabs[at.1].focused.clone()
    }

    fn is_focused_tab(&self, tab: (usize, usize)) -> bool {
        let ws = &self.workspaces[tab.0];
        ws.id == self.active && ws.tabs[tab.1].id == ws.active_tab
    }

    /// Panes sit side by side, left to right, in a tab.
    fn neighbor(&self, at: At, direction: &str) -> Option<String> {
        let panes = &self.workspaces[at.0].tabs[at.1].panes;
        let i = match direction {
            "left" => at.2.checked_sub(1)?,
            "right" => at.2 + 1,
            _ => return None,
        };
        panes.get(i).map(|p| p.id.clone())
    }

    fn read(&self, at: At, source: &str, format: &str, lines: Option<u64>) -> Value {
        let pane = self.pane(at);
        let all: Vec<&str> = pane.text.split('\n').collect();
        let keep = lines.map_or(all.len(), |n| (n as usize).min(all.len()));
        let text = all[all.len() - keep..].join("\n");
        json!({
            "pane_id": pane.id,
            "workspace_id": self.workspaces[at.0].id,
            "tab_id": self.workspaces[at.0].tabs[at.1].id,
            "source": source,
            "format": format,
            "text": text,
            "revision": pane.revision,
            "truncated": keep < all.len(),
        })
    }

    fn pane_info(&self, at: At) -> Value {
        let pane = self.pane(at);
        let tab = &self.workspaces[at.0].tabs[at.1];
        json!({
            "pane_id": pane.id,
            "terminal_id": pane.terminal_id,
            "workspace_id": self.workspaces[at.0].id,
            "tab_id": tab.id,
            "focused": self.is_focused_tab((at.0, at.1)) && tab.focused == pane.id,
            "cwd": pane.cwd,
            "foreground_cwd": pane.cwd,
            "label": pane.label,
            "title": pane.title,
            "terminal_title": null,
            "terminal_title_stripped": null,
            "agent": pane.agent,
            "display_agent": pane.agent,
            "agent_status": pane.status,
            "agent_session": pane.session,
            "revision": pane.revision,
            "scroll": {"offset_from_bottom": 0, "max_offset_from_bottom": 0, "viewport_rows": 24},
            "state_labels": {},
            "tokens": {},
        })
    }

    fn agent_info(&self, at: At) -> Value {
        let pane = self.pane(at);
        let mut info = self.pane_info(at);
        let extra = json!({
            "name": pane.name,
            "interactive_ready": true,
            "launch_pending": false,
            "screen_detection_skipped": false,
            "state_change_seq": pane.state_change_seq,
        });
        if let (Some(info), Some(extra)) = (info.as_object_mut(), extra.as_object()) {
            info.remove("label");
            info.remove("scroll");
            info.extend(extra.clone());
        }
        info
    }

    fn tab_info(&self, (w, t): (usize, usize)) -> Value {
        let tab = &self.workspaces[w].tabs[t];
        json!({
            "tab_id": tab.id,
            "workspace_id": self.workspaces[w].id,
            "number": tab.number,
            "label": tab.label,
            "focused": self.is_focused_tab((w, t)),
            "pane_count": tab.panes.len(),
            "agent_status": rollup(tab.panes.iter().map(|p| p.status.as_str())),
        })
    }

    fn workspace_info(&self, w: usize) -> Value {
        let ws = &self.workspaces[w];
        let panes = ws.tabs.iter().flat_map(|t| t.panes.iter());
        json!({
            "workspace_id": ws.id,
            "number": ws.number,
            "label": ws.label,
            "focused": ws.id == self.active,
            "pane_count": ws.tabs.iter().map(|t| t.panes.len()).sum::<usize>(),
            "tab_count": ws.tabs.len(),
            "active_tab_id": ws.active_tab,
            "agent_status": rollup(panes.map(|p| p.status.as_str())),
            "tokens": ws.tokens,
            "worktree": null,
        })
    }

    /// A 200x50 tab split into equal columns, one per pane.
    fn layout(&self, (w, t): (usize, usize)) -> Value {
        let tab = &self.workspaces[w].tabs[t];
        let count = tab.panes.len().max(1);
        let width = 200 / count;
        let panes: Vec<Value> = tab
            .panes
            .iter()
            .enumerate()
            .map(|(i, p)| {
                json!({
                    "pane_id": p.id,
                    "focused": p.id == tab.focused,
                    "rect": {"x": i * width, "y": 0, "width": width, "height": 50},
                })
            })
            .collect();
        let splits: Vec<Value> = (1..count)
            .map(|i| {
                json!({
                    "id": format!("split-{i}"),
                    "direction": "right",
                    "ratio": 1.0 / (count - i + 1) as f64,
                    "rect": {"x": (i - 1) * width, "y": 0, "width": 200 - (i - 1) * width, "height": 50},
                })
            })
            .collect();
        json!({
            "workspace_id": self.workspaces[w].id,
            "tab_id": tab.id,
            "zoomed": tab.zoomed,
            "area": {"x": 0, "y": 0, "width": 200, "height": 50},
            "focused_pane_id": tab.focused,
            "panes": panes,
            "splits": splits,
        })
    }

    /// The tab as a layout tree: each pane split off to the right of the ones before it.
    fn description(&self, (w, t): (usize, usize)) -> Value {
        let tab = &self.workspaces[w].tabs[t];
        let leaf = |p: &Pane| json!({"type": "pane", "pane_id": p.id, "cwd": p.cwd, "label": p.label, "command": null, "env": {}});
        let mut nodes = tab.panes.iter().rev().map(leaf);
        let mut root = nodes.next().unwrap_or_else(|| json!({"type": "pane"}));
        for (i, node) in nodes.enumerate() {
            root = json!({
                "type": "split",
                "direction": "right",
                "ratio": 1.0 / (i + 2) as f64,
                "first": node,
                "second": root,
            });
        }
        json!({
            "workspace_id": self.workspaces[w].id,
            "tab_id": tab.id,
            "zoomed": tab.zoomed,
            "focused_pane_id": tab.focused,
            "root": root,
        })
    }

    fn snapshot(&self) -> Value {
        let focused = self.focused();
        json!({
            "version": VERSION,
            "protocol": PROTOCOL,
            "workspaces": (0..self.workspaces.len()).map(|w| self.workspace_info(w)).collect::<Vec<_>>(),
            "tabs": self.all_tabs().into_iter().map(|at| self.tab_info(at)).collect::<Vec<_>>(),
            "panes": self.all_panes().into_iter().map(|at| self.pane_info(at)).collect::<Vec<_>>(),
            "layouts": self.all_tabs().into_iter().map(|at| self.layout(at)).collect::<Vec<_>>(),
            "agents": self
                .all_panes()
                .into_iter()
                .filter(|at| self.pane(*at).agent.is_some())
                .map(|at| self.agent_info(at))
                .collect::<Vec<_>>(),
            "focused_workspace_id": focused.map(|at| self.workspaces[at.0].id.clone()),
            "focused_tab_id": focused.map(|at| self.workspaces[at.0].tabs[at.1].id.clone()),
            "focused_pane_id": focused.map(|at| self.pane(at).id.clone()),
        })
    }
}
