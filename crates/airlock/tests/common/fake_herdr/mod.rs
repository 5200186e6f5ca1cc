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
//! (herdr's published JSON schema of its socket API), checks their parameters as herdr's deserializer
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
//! Include it with `#[path = "common/fake_herdr/mod.rs"] #[allow(dead_code)] mod fake_herdr;`
//! (each test uses its own part of it), or as a module of `common`, whose `#![allow(dead_code)]`
//! covers it.
//!
//! # Where things are
//!
//! This file holds the public API: [`FakeHerdr`], the constants and the client helpers. Behind it:
//! `server` (the socket, the framing, what is recorded, the hooks), `schema` (the method table and
//! the checks of a request's parameters), `methods` (which method does what, and the waits),
//! `workspaces`, `agents` and `panes` (the methods of those groups), `state` (the session model:
//! workspaces, tabs, panes, plugins) and `answers` (the errors and the result shapes).

mod agents;
mod answers;
pub mod client;
mod methods;
mod panes;
mod schema;
mod server;
mod state;
mod workspaces;

use std::fs;
use std::io::{self, ErrorKind, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use schema::{SPECS, Ty, fields};
use server::{Shared, State};

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

/// The running fake. Dropping it stops the server, closes held connections and removes the socket
/// file (only if it is still the one the fake bound).
pub struct FakeHerdr {
    path: PathBuf,
    identity: (u64, u64),
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
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
        let shared = Arc::new(Shared::default());
        let acceptor = server::spawn_acceptor(listener, &shared)?;
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
            .map(|r| method_of(r).unwrap_or("").to_owned())
            .collect()
    }

    /// The requests whose `method` is `method`.
    pub fn requests_for(&self, method: &str) -> Vec<Value> {
        self.state()
            .requests
            .iter()
            .filter(|r| method_of(r) == Some(method))
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
        let s = &state.session;
        let tabs = s.all_tabs().into_iter();
        tabs.map(|at| s.tab(at).id.clone()).collect()
    }

    /// The ids of the open panes, in order.
    pub fn panes(&self) -> Vec<String> {
        let state = self.state();
        let s = &state.session;
        let panes = s.all_panes().into_iter();
        panes.map(|at| s.pane(at).id.clone()).collect()
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
        self.shared.stop();
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

/// A recorded request's `method`, when it is a string.
fn method_of(request: &Value) -> Option<&str> {
    request.get("method").and_then(Value::as_str)
}

/// Every method of the protocol-20 schema (91), in the schema's order.
pub fn schema_methods() -> Vec<&'static str> {
    SPECS.iter().map(|(name, _)| *name).collect()
}

/// Parameters that deserialize for `method`: its required fields with placeholder values (ids are
/// the ones that exist from the start). `None` for a method the schema does not list.
pub fn sample_params(method: &str) -> Option<Value> {
    let (_, spec) = schema::lookup(method)?;
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
