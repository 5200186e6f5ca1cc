//! A fake kitty *remote-control server*: the `listen_on unix:/path` socket of kitty 0.35, for
//! tests of the code that talks to it (the kitty socket filter, airlock launching tools in kitty).
//!
//! # What kitty does
//!
//! kitty listens on a Unix socket. A client writes frames, each the bytes `ESC P @kitty-cmd`, a
//! JSON request and `ESC \`; a request is
//! `{"cmd":"<name>","version":[0,35,2],"no_response":false,"kitty_window_id":<int>,"payload":{..}}`
//! (`kitty_window_id`, the window the client runs in, is optional). kitty runs each command and,
//! unless the request set `"no_response": true`, answers with a frame of the same framing holding
//! `{"ok":true}`, `{"ok":true,"data":<value>}` or `{"ok":false,"error":"<message>"}` (plus a `tb`
//! traceback on some errors). `kitten @` opens one connection per command and closes it after the
//! answer; other clients write several frames on one connection and read the answers in order.
//! `launch` starts a program in a new window and answers its window id as a decimal string; `ls`
//! answers the whole session (OS windows, tabs, windows with their command lines, working
//! directories and environments) as JSON *text*; the window commands (`close-window`,
//! `focus-window`, `set-window-title`, `send-text`, `get-text`) pick windows with a `match`
//! expression such as `id:101`.
//!
//! # What the fake does
//!
//! [`FakeKitty::start`] binds the socket (0600) and serves it on background threads until dropped.
//! It reads frames of at most [`MAX_FRAME`] bytes (prefix and suffix included; a longer one closes
//! the connection, as do bytes outside a frame), serves any number of them on one connection in
//! order, and answers as described above. It keeps a small session model and runs nothing:
//!
//! - at start: OS window [`OS_WINDOW_ID`] holding tab [`TAB_ID`] with windows [`CALLER_WINDOW_ID`]
//!   (1, focused: where a user would run airlock) and [`OTHER_WINDOW_ID`] (2, another user window),
//!   both with a host-looking environment ([`SECRET_ENV`]) and screen text ([`screen_text`]);
//! - `launch` adds a window to tab [`TAB_ID`] whatever its `type` (the fake opens no tabs or OS
//!   windows), with ids [`FIRST_LAUNCHED_ID`] (100), 101, ... (never reused), and records it
//!   ([`FakeKitty::launches`]); its `match` must name an existing tab (`id:1`) or window
//!   (`window_id:N`), else `No matching tabs for expression: ..`. The new window gets the focus
//!   unless `keep_focus` is set or the type is `background`;
//! - `ls` answers `{"ok":true,"data":"<pretty JSON text>"}` with every window (its payload's
//!   filters are ignored); the window named by `kitty_window_id` is marked `is_self`;
//! - the window commands take `match` as `id:<N>` only. No `match` means the request's
//!   `kitty_window_id` window, or else the focused one. A window that does not exist (or any other
//!   expression) is answered `No matching windows for expression: <match>`. `close-window` removes
//!   the window (the focus moves to the last window left), `focus-window` focuses it,
//!   `set-window-title` sets its title from `title`, `send-text` records `data` as sent
//!   ([`FakeKitty::sent_text`]; `text:` and `base64:` data alike, undecoded), `get-text` answers
//!   its screen text ([`FakeKitty::set_text`]);
//! - any other `cmd`: `Unknown remote control command: <cmd>`; a frame that is not JSON:
//!   `invalid JSON`; JSON that is not an object with a string `cmd` (or whose `payload` is not an
//!   object): `invalid request: ..`.
//!
//! Not modelled: passwords and encryption, streamed and async requests (an `async` key is
//! ignored; `wait_for_child_to_exit` is answered like a plain launch), `match` expressions other
//! than the ones above, `ls` filtering, kitty's traceback (`tb`) and version checks.
//!
//! Everything is recorded: [`FakeKitty::received`] (bytes read, per connection),
//! [`FakeKitty::frames`] (each frame's JSON bytes), [`FakeKitty::requests`] (those parsed),
//! [`FakeKitty::responses`] (the answers sent, parsed). Hooks: [`FakeKitty::stall`] (hold a
//! command's connection without an answer) and [`FakeKitty::fail`] (answer it with an error).
//!
//! Include it with `#[path = "common/fake_kitty/mod.rs"] #[allow(dead_code)] mod fake_kitty;`.
//!
//! # Where things are
//!
//! This file holds the public API: [`FakeKitty`], [`Launch`] and the constants. Behind it: `server`
//! (the socket, the framing, what is recorded, the hooks), `commands` (the session model and what
//! each command does) and `client` (the helpers tests use to talk to it: [`call`], [`roundtrip`],
//! [`read_answer`], [`request_frame`], [`parse_frames`], re-exported here).

mod client;
mod commands;
mod server;

use std::fs;
use std::io::{self, ErrorKind};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

pub use client::{call, frame, parse_frames, read_answer, request, request_frame, roundtrip};
use server::{Shared, State};

/// The bytes that open every frame.
pub const FRAME_PREFIX: &[u8] = b"\x1bP@kitty-cmd";
/// The bytes that close every frame (ESC, backslash).
pub const FRAME_SUFFIX: &[u8] = b"\x1b\\";
/// The longest frame the fake reads (1 MiB, prefix and suffix included); a longer one closes the
/// connection without an answer.
pub const MAX_FRAME: usize = 1 << 20;
/// The `version` the client helpers put in requests.
pub const CLIENT_VERSION: [u64; 3] = [0, 35, 2];
/// The OS window that exists from the start.
pub const OS_WINDOW_ID: u64 = 1;
/// The tab that exists from the start; launched windows join it.
pub const TAB_ID: u64 = 1;
/// The focused window that exists from the start: the one a test runs airlock in.
pub const CALLER_WINDOW_ID: u64 = 1;
/// The other user window that exists from the start.
pub const OTHER_WINDOW_ID: u64 = 2;
/// The id of the first window `launch` creates; later ones count up from it.
pub const FIRST_LAUNCHED_ID: u64 = 100;
/// The `pid` of the caller's window (the other one has the next).
pub const CALLER_PID: u64 = 4242;
/// The working directory (and `HOME`) of the windows that exist from the start, and of launched
/// windows without a `cwd`.
pub const USER_CWD: &str = "/home/user";
/// A variable in the environment of the windows that exist from the start, as `ls` shows it:
/// a filter must not let it reach a sandbox.
pub const SECRET_ENV: (&str, &str) = ("SECRET", "FAKE_KITTY_SECRET_VALUE");

/// The screen text `get-text` returns for window `id` until a test sets another.
pub fn screen_text(id: u64) -> String {
    format!("fake-kitty window {id} screen: FAKE_KITTY_SCREEN_{id}\n$ ")
}

/// One `launch` the fake executed.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    /// The window it created.
    pub id: u64,
    /// The payload's `type` (`"window"` when absent).
    pub kind: String,
    /// The payload's `args`: the command line (empty when absent).
    pub args: Vec<String>,
    /// The payload's `window_title`.
    pub title: Option<String>,
    /// The payload's `cwd`.
    pub cwd: Option<String>,
    /// The payload's `match` (the tab to open in).
    pub match_expr: Option<String>,
    /// The whole payload.
    pub payload: Value,
}

/// The running fake. Dropping it stops the server, closes held connections and removes the socket
/// file (only if it is still the one the fake bound).
pub struct FakeKitty {
    path: PathBuf,
    identity: (u64, u64),
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl FakeKitty {
    /// Binds `socket` (mode 0600) and serves it until the returned value is dropped. A stale socket
    /// file is replaced; a live one is a panic. Panics when the socket cannot be bound.
    pub fn start(socket: &Path) -> FakeKitty {
        FakeKitty::try_start(socket)
            .unwrap_or_else(|err| panic!("fake kitty: bind {}: {err}", socket.display()))
    }

    /// [`FakeKitty::start`], returning the error instead of panicking.
    pub fn try_start(socket: &Path) -> io::Result<FakeKitty> {
        if let Ok(meta) = fs::symlink_metadata(socket) {
            if !meta.file_type().is_socket() {
                let what = format!("{} exists and is not a socket", socket.display());
                return Err(io::Error::new(ErrorKind::AlreadyExists, what));
            }
            if UnixStream::connect(socket).is_ok() {
                let what = format!("something already listens on {}", socket.display());
                return Err(io::Error::new(ErrorKind::AddrInUse, what));
            }
            fs::remove_file(socket)?;
        }
        let listener = UnixListener::bind(socket)?;
        fs::set_permissions(socket, fs::Permissions::from_mode(0o600))?;
        let meta = fs::symlink_metadata(socket)?;
        let shared = Arc::new(Shared::default());
        let acceptor = server::spawn_acceptor(listener, &shared)?;
        Ok(FakeKitty {
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
        self.state().received.len()
    }

    /// The bytes read on each connection, in the order the connections were accepted (so far, for
    /// connections still open).
    pub fn received(&self) -> Vec<Vec<u8>> {
        self.state().received.clone()
    }

    /// The JSON bytes of every complete frame (between prefix and suffix), in order, whether or
    /// not they parsed.
    pub fn frames(&self) -> Vec<Vec<u8>> {
        self.state().frames.clone()
    }

    /// The frames of [`FakeKitty::frames`] that were JSON, parsed, in order (valid requests or not).
    pub fn requests(&self) -> Vec<Value> {
        self.state().requests.clone()
    }

    /// The `cmd` of each of [`FakeKitty::requests`] (`""` where it had none).
    pub fn commands(&self) -> Vec<String> {
        let state = self.state();
        let cmds = state.requests.iter().map(|r| cmd_of(r).unwrap_or(""));
        cmds.map(str::to_owned).collect()
    }

    /// The requests whose `cmd` is `cmd`.
    pub fn requests_for(&self, cmd: &str) -> Vec<Value> {
        let state = self.state();
        let matching = state.requests.iter().filter(|r| cmd_of(r) == Some(cmd));
        matching.cloned().collect()
    }

    /// Every answer the fake wrote, parsed, in order.
    pub fn responses(&self) -> Vec<Value> {
        self.state().responses.clone()
    }

    /// Every `launch` executed, in order.
    pub fn launches(&self) -> Vec<Launch> {
        self.state().session.launches.clone()
    }

    /// The ids of the open windows, in order.
    pub fn windows(&self) -> Vec<u64> {
        self.state().session.window_ids()
    }

    /// Window `id` as `ls` describes it, if it is open.
    pub fn window(&self, id: u64) -> Option<Value> {
        self.state().session.describe(id, None)
    }

    /// The focused window, if any is open.
    pub fn focused(&self) -> Option<u64> {
        self.state().session.focused
    }

    /// What `send-text` delivered: (window id, `data` as sent), in order.
    pub fn sent_text(&self) -> Vec<(u64, String)> {
        self.state().session.sent.clone()
    }

    /// Sets the screen text `get-text` answers for window `id`; false if it is not open.
    pub fn set_text(&self, id: u64, text: &str) -> bool {
        self.state().session.set_text(id, text)
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
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        true
    }

    /// From now on, a `cmd` request is recorded and its connection held open with no answer (and
    /// no later frame of it read) until [`FakeKitty::release_stalled`] or the fake is dropped.
    /// Nothing of it happens in the session.
    pub fn stall(&self, cmd: &str) {
        self.state().stalled.insert(cmd.to_owned());
    }

    /// Answers `cmd` normally again (connections already held stay held).
    pub fn unstall(&self, cmd: &str) {
        self.state().stalled.remove(cmd);
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

    /// From now on, a `cmd` request is answered `{"ok":false,"error":<error>}` and changes nothing.
    pub fn fail(&self, cmd: &str, error: &str) {
        let mut state = self.state();
        state.failures.insert(cmd.to_owned(), error.to_owned());
    }

    /// Undoes [`FakeKitty::fail`].
    pub fn unfail(&self, cmd: &str) {
        self.state().failures.remove(cmd);
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.shared.lock()
    }
}

impl Drop for FakeKitty {
    fn drop(&mut self) {
        self.shared.stop();
        self.release_stalled();
        let ours =
            fs::symlink_metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.identity);
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

/// A recorded request's `cmd`, when it is a string.
fn cmd_of(request: &Value) -> Option<&str> {
    request.get("cmd").and_then(Value::as_str)
}

/// Where `needle` starts in `haystack`, looking from `from` on.
fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    let tail = haystack.get(from..)?;
    let at = tail.windows(needle.len()).position(|w| w == needle)?;
    Some(from + at)
}
