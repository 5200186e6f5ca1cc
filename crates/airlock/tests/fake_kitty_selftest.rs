//! The fake kitty remote-control server (`tests/common/fake_kitty/`) against a plain `UnixStream`
//! client: framing, answers, window ids, the session model and the hooks behave as described in
//! its module doc.

#[path = "common/fake_kitty/mod.rs"]
#[allow(dead_code)]
mod fake_kitty;

use std::io::{ErrorKind, Read, Write};
use std::net::Shutdown;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fake_kitty::{
    CALLER_PID, CALLER_WINDOW_ID, FakeKitty, MAX_FRAME, OTHER_WINDOW_ID, SECRET_ENV, call, frame,
    parse_frames, read_answer, request, request_frame, roundtrip, screen_text,
};
use serde_json::{Value, json};

/// The fake is declared first so it is dropped before the directory holding its socket (it stops
/// its acceptor only while the socket file is still there).
struct Fixture {
    fake: FakeKitty,
    _dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let fake = FakeKitty::start(&dir.path().join("kitty.sock"));
        Fixture { fake, _dir: dir }
    }

    fn sock(&self) -> &Path {
        self.fake.path()
    }
}

fn connect(sock: &Path) -> UnixStream {
    let stream = UnixStream::connect(sock).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
}

/// Writes `bytes`, shuts the writing side, and returns the answers the server wrote before
/// closing.
fn exchange(sock: &Path, bytes: &[u8]) -> Vec<Value> {
    parse_frames(&roundtrip(sock, bytes).expect("roundtrip"))
}

fn error_of(answer: &Value) -> &str {
    assert_eq!(answer["ok"], false, "not an error: {answer}");
    answer["error"].as_str().unwrap_or("")
}

/// The listing inside an `ls` answer.
fn listing(answer: &Value) -> Value {
    assert_eq!(answer["ok"], true, "ls failed: {answer}");
    let text = answer["data"].as_str().expect("ls data is JSON text");
    serde_json::from_str(text).expect("ls data parses")
}

fn listed_windows(answer: &Value) -> Vec<Value> {
    let listing = listing(answer);
    listing[0]["tabs"][0]["windows"].as_array().unwrap().clone()
}

/// True when the server closed `stream` (EOF or reset) within `timeout`.
fn closes_within(stream: &mut UnixStream, timeout: Duration) -> bool {
    stream.set_read_timeout(Some(timeout)).unwrap();
    let mut buf = [0u8; 64];
    match stream.read(&mut buf) {
        Ok(0) => true,
        Ok(n) => panic!("unexpected bytes: {:?}", String::from_utf8_lossy(&buf[..n])),
        Err(e) if e.kind() == ErrorKind::ConnectionReset => true,
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => false,
        Err(e) => panic!("read: {e}"),
    }
}

#[test]
fn socket_is_private_and_removed_on_drop() {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("kitty.sock");
    let fake = FakeKitty::start(&path);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(FakeKitty::try_start(&path).is_err(), "a second server");
    drop(fake);
    assert!(!path.exists(), "socket file left behind");
    assert!(UnixStream::connect(&path).is_err());
    // A stale socket file (nobody listening) is replaced.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    let again = FakeKitty::start(&path);
    assert_eq!(call(&path, "ls", json!({}))["ok"], true);
    drop(again);
}

#[test]
fn launch_answers_new_window_ids_from_100_and_runs_nothing() {
    let fx = Fixture::new();
    let first = call(
        fx.sock(),
        "launch",
        json!({"args": ["/usr/bin/true", "--flag"], "type": "tab", "window_title": "airlock",
               "cwd": "/tmp", "match": "window_id:1", "keep_focus": true}),
    );
    assert_eq!(first, json!({"ok": true, "data": "100"}));
    let second = call(fx.sock(), "launch", json!({"args": ["htop"]}));
    assert_eq!(second, json!({"ok": true, "data": "101"}));
    assert_eq!(fx.fake.windows(), [1, 2, 100, 101]);
    assert_eq!(fx.fake.focused(), Some(101), "a launch takes the focus");

    let launches = fx.fake.launches();
    assert_eq!(launches.len(), 2);
    assert_eq!(launches[0].id, 100);
    assert_eq!(launches[0].kind, "tab");
    assert_eq!(launches[0].args, ["/usr/bin/true", "--flag"]);
    assert_eq!(launches[0].title.as_deref(), Some("airlock"));
    assert_eq!(launches[0].cwd.as_deref(), Some("/tmp"));
    assert_eq!(launches[0].match_expr.as_deref(), Some("window_id:1"));
    assert_eq!(launches[0].payload["keep_focus"], true);
    assert_eq!(launches[1].kind, "window", "type defaults to window");
    assert_eq!(launches[1].title, None);

    let window = fx.fake.window(100).unwrap();
    assert_eq!(window["title"], "airlock");
    assert_eq!(window["cwd"], "/tmp");
    assert_eq!(window["cmdline"], json!(["/usr/bin/true", "--flag"]));
    assert_eq!(fx.fake.window(101).unwrap()["title"], "htop");
}

#[test]
fn launch_match_must_name_an_existing_tab() {
    let fx = Fixture::new();
    for expr in ["window_id:1", "window_id:2", "id:1", ""] {
        let answer = call(fx.sock(), "launch", json!({"args": ["x"], "match": expr}));
        assert_eq!(answer["ok"], true, "{expr}: {answer}");
    }
    for expr in ["window_id:99", "id:2", "title:x"] {
        let answer = call(fx.sock(), "launch", json!({"args": ["x"], "match": expr}));
        assert_eq!(
            error_of(&answer),
            format!("No matching tabs for expression: {expr}")
        );
    }
    let bad_args = call(fx.sock(), "launch", json!({"args": "not a list"}));
    assert_eq!(
        error_of(&bad_args),
        "launch: args must be a list of strings"
    );
    assert_eq!(fx.fake.windows(), [1, 2, 100, 101, 102, 103]);
}

#[test]
fn ls_lists_the_user_windows_and_the_launched_ones() {
    let fx = Fixture::new();
    let answer = call(fx.sock(), "ls", json!({}));
    assert_eq!(answer.as_object().unwrap().len(), 2, "ok and data only");
    let listing = listing(&answer);
    assert_eq!(listing.as_array().unwrap().len(), 1, "one OS window");
    assert_eq!(listing[0]["id"], 1);
    assert_eq!(listing[0]["is_focused"], true);
    let tab = &listing[0]["tabs"][0];
    assert_eq!(
        (tab["id"].clone(), tab["layout"].clone()),
        (json!(1), json!("tall"))
    );
    let windows = listed_windows(&answer);
    let ids: Vec<_> = windows.iter().map(|w| w["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, [CALLER_WINDOW_ID, OTHER_WINDOW_ID]);
    let caller = &windows[0];
    assert_eq!(caller["is_focused"], true);
    assert_eq!(caller["title"], "shell");
    assert_eq!(caller["pid"], CALLER_PID);
    assert_eq!(caller["cmdline"], json!(["/bin/zsh"]));
    assert_eq!(caller["env"][SECRET_ENV.0], SECRET_ENV.1);
    assert_eq!(caller["foreground_processes"], json!([]));
    assert_eq!(windows[1]["is_focused"], false);

    call(
        fx.sock(),
        "launch",
        json!({"args": ["a"], "keep_focus": true}),
    );
    let mut frame_json = request("ls", json!({}));
    frame_json["kitty_window_id"] = json!(2);
    let answers = exchange(fx.sock(), &frame(frame_json.to_string().as_bytes()));
    let windows = listed_windows(&answers[0]);
    let ids: Vec<_> = windows.iter().map(|w| w["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, [1, 2, 100]);
    assert_eq!(windows[0]["is_focused"], true, "keep_focus kept it");
    assert_eq!(windows[1]["is_self"], true, "kitty_window_id marks is_self");
    assert_eq!(windows[0]["is_self"], false);
}

#[test]
fn window_commands_act_on_existing_windows_only() {
    let fx = Fixture::new();
    call(fx.sock(), "launch", json!({"args": ["a"]}));
    let ok = json!({"ok": true});
    let on = |cmd: &str, target: &str, extra: Value| {
        let mut payload = json!({"match": target});
        payload
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        call(fx.sock(), cmd, payload)
    };

    assert_eq!(on("focus-window", "id:1", json!({})), ok);
    assert_eq!(fx.fake.focused(), Some(1));
    assert_eq!(
        on("set-window-title", "id:100", json!({"title": "new"})),
        ok
    );
    assert_eq!(fx.fake.window(100).unwrap()["title"], "new");
    assert_eq!(on("send-text", "id:100", json!({"data": "text:hello"})), ok);
    assert_eq!(fx.fake.sent_text(), [(100, "text:hello".to_owned())]);
    assert_eq!(
        on("get-text", "id:2", json!({})),
        json!({"ok": true, "data": screen_text(2)})
    );
    assert!(fx.fake.set_text(100, "tool output"));
    assert_eq!(on("get-text", "id:100", json!({}))["data"], "tool output");
    assert_eq!(on("close-window", "id:100", json!({})), ok);
    assert_eq!(fx.fake.windows(), [1, 2]);

    for cmd in [
        "close-window",
        "focus-window",
        "set-window-title",
        "send-text",
        "get-text",
    ] {
        for target in ["id:100", "id:999", "title:shell"] {
            let answer = on(cmd, target, json!({"title": "t", "data": "text:x"}));
            assert_eq!(
                answer,
                json!({"ok": false, "error": format!("No matching windows for expression: {target}")}),
                "{cmd} {target}"
            );
        }
    }
    assert_eq!(fx.fake.windows(), [1, 2]);
    assert_eq!(fx.fake.sent_text().len(), 1);
    assert!(!fx.fake.set_text(100, "gone"));

    // Without a match: the client's own window.
    let mut own = request("get-text", json!({}));
    own["kitty_window_id"] = json!(2);
    let answers = exchange(fx.sock(), &frame(own.to_string().as_bytes()));
    assert_eq!(answers[0]["data"], screen_text(2));
}

#[test]
fn several_frames_on_one_connection_are_answered_in_order() {
    let fx = Fixture::new();
    let mut bytes = request_frame("launch", json!({"args": ["one"]}));
    bytes.extend(request_frame("launch", json!({"args": ["two"]})));
    bytes.extend(request_frame("nope", json!({})));
    bytes.extend(request_frame("close-window", json!({"match": "id:100"})));
    let answers = exchange(fx.sock(), &bytes);
    assert_eq!(
        answers,
        [
            json!({"ok": true, "data": "100"}),
            json!({"ok": true, "data": "101"}),
            json!({"ok": false, "error": "Unknown remote control command: nope"}),
            json!({"ok": true}),
        ]
    );
    assert_eq!(fx.fake.connections(), 1);
    assert_eq!(fx.fake.received(), [bytes]);
    assert_eq!(
        fx.fake.commands(),
        ["launch", "launch", "nope", "close-window"]
    );
    assert_eq!(fx.fake.responses(), answers);

    // Request, answer, request, answer on one connection; a frame may arrive in pieces.
    let mut stream = connect(fx.sock());
    let piece = request_frame("get-text", json!({"match": "id:1"}));
    let (head, tail) = piece.split_at(5);
    stream.write_all(head).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    stream.write_all(tail).unwrap();
    let answer = read_answer(&mut stream).unwrap().unwrap();
    assert_eq!(answer["data"], screen_text(1));
    stream
        .write_all(&request_frame("focus-window", json!({"match": "id:101"})))
        .unwrap();
    assert_eq!(read_answer(&mut stream).unwrap(), Some(json!({"ok": true})));
    assert_eq!(fx.fake.connections(), 2);
}

#[test]
fn no_response_runs_the_command_and_answers_nothing() {
    let fx = Fixture::new();
    let mut quiet = request("send-text", json!({"match": "id:2", "data": "text:ls\r"}));
    quiet["no_response"] = json!(true);
    let mut bytes = frame(quiet.to_string().as_bytes());
    bytes.extend(request_frame("ls", json!({})));
    let answers = exchange(fx.sock(), &bytes);
    assert_eq!(answers.len(), 1, "only ls is answered: {answers:?}");
    assert_eq!(answers[0]["ok"], true);
    assert_eq!(fx.fake.sent_text(), [(2, "text:ls\r".to_owned())]);
    assert_eq!(fx.fake.commands(), ["send-text", "ls"]);

    let mut quiet_launch = request("launch", json!({"args": ["x"]}));
    quiet_launch["no_response"] = json!(true);
    let out = roundtrip(fx.sock(), &frame(quiet_launch.to_string().as_bytes())).unwrap();
    assert!(out.is_empty());
    assert_eq!(fx.fake.windows(), [1, 2, 100]);
}

#[test]
fn unknown_commands_and_garbage_are_answered_with_errors() {
    let fx = Fixture::new();
    let unknown = call(fx.sock(), "load-config", json!({}));
    assert_eq!(
        unknown,
        json!({"ok": false, "error": "Unknown remote control command: load-config"})
    );

    let mut bytes = frame(b"{not json");
    bytes.extend(frame(b"[1, 2]"));
    bytes.extend(frame(br#"{"payload": {}}"#));
    bytes.extend(frame(br#"{"cmd": "ls", "payload": 3}"#));
    bytes.extend(request_frame("ls", json!({})));
    let answers = exchange(fx.sock(), &bytes);
    assert_eq!(answers.len(), 5);
    assert_eq!(answers[0], json!({"ok": false, "error": "invalid JSON"}));
    assert!(error_of(&answers[1]).starts_with("invalid request"));
    assert!(error_of(&answers[2]).starts_with("invalid request"));
    assert!(error_of(&answers[3]).starts_with("invalid request"));
    assert_eq!(
        answers[4]["ok"], true,
        "the connection goes on after garbage"
    );
    assert_eq!(fx.fake.frames().len(), 6);
    assert_eq!(fx.fake.frames()[1], b"{not json");
    assert_eq!(fx.fake.requests().len(), 5, "the bad JSON is not a request");
    assert_eq!(fx.fake.commands(), ["load-config", "", "", "ls", "ls"]);
}

#[test]
fn bytes_outside_frames_and_oversized_frames_close_the_connection() {
    let fx = Fixture::new();
    let mut bytes = request_frame("ls", json!({}));
    bytes.extend(b"junk");
    bytes.extend(request_frame("ls", json!({})));
    let answers = exchange(fx.sock(), &bytes);
    assert_eq!(answers.len(), 1, "served up to the junk: {answers:?}");

    // A frame at the cap is served.
    let padding = MAX_FRAME - b"\x1bP@kitty-cmd\x1b\\".len();
    let mut at_cap = request("ls", json!({})).to_string().into_bytes();
    at_cap.resize(padding, b' ');
    assert_eq!(frame(&at_cap).len(), MAX_FRAME);
    assert_eq!(exchange(fx.sock(), &frame(&at_cap)).len(), 1);

    // One byte over the cap, complete or never finished: closed without an answer. (The server
    // may close before the client's write ends, so the write's result is not checked.)
    at_cap.push(b' ');
    let mut unfinished = frame(&vec![b' '; MAX_FRAME]);
    unfinished.truncate(MAX_FRAME + 1);
    for bytes in [frame(&at_cap), unfinished] {
        let mut stream = connect(fx.sock());
        let _ = stream.write_all(&bytes);
        assert!(closes_within(&mut stream, Duration::from_secs(5)));
    }
    assert_eq!(fx.fake.commands(), ["ls", "ls"]);
    assert_eq!(fx.fake.responses().len(), 2);
}

#[test]
fn stall_holds_the_connection_without_an_answer() {
    let fx = Fixture::new();
    fx.fake.stall("launch");
    let mut stream = connect(fx.sock());
    let mut bytes = request_frame("ls", json!({}));
    bytes.extend(request_frame("launch", json!({"args": ["x"]})));
    bytes.extend(request_frame("ls", json!({})));
    stream.write_all(&bytes).unwrap();
    assert_eq!(read_answer(&mut stream).unwrap().unwrap()["ok"], true);
    assert!(fx.fake.wait_for_requests(2, Duration::from_secs(5)));
    assert!(
        !closes_within(&mut stream, Duration::from_millis(300)),
        "held open"
    );
    assert_eq!(fx.fake.held(), 1);
    assert_eq!(
        fx.fake.commands(),
        ["ls", "launch"],
        "nothing after the stall is read"
    );
    assert_eq!(
        fx.fake.windows(),
        [1, 2],
        "a stalled launch changes nothing"
    );

    // Other commands are still served; once unstalled, launch is too.
    assert_eq!(call(fx.sock(), "ls", json!({}))["ok"], true);
    fx.fake.unstall("launch");
    assert_eq!(call(fx.sock(), "launch", json!({}))["data"], "100");

    fx.fake.release_stalled();
    assert!(closes_within(&mut stream, Duration::from_secs(5)));
    assert_eq!(fx.fake.held(), 0);
}

#[test]
fn dropping_the_fake_closes_stalled_connections() {
    let fx = Fixture::new();
    fx.fake.stall("ls");
    let mut stream = connect(fx.sock());
    stream.write_all(&request_frame("ls", json!({}))).unwrap();
    assert!(fx.fake.wait_for_requests(1, Duration::from_secs(5)));
    let started = Instant::now();
    drop(fx);
    assert!(closes_within(&mut stream, Duration::from_secs(5)));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn fail_hook_answers_the_error_and_changes_nothing() {
    let fx = Fixture::new();
    fx.fake.fail("launch", "launch is broken today");
    let answer = call(fx.sock(), "launch", json!({"args": ["x"]}));
    assert_eq!(
        answer,
        json!({"ok": false, "error": "launch is broken today"})
    );
    assert_eq!(fx.fake.windows(), [1, 2]);
    assert!(fx.fake.launches().is_empty());
    assert_eq!(
        call(fx.sock(), "get-text", json!({"match": "id:1"}))["ok"],
        true
    );
    fx.fake.unfail("launch");
    assert_eq!(call(fx.sock(), "launch", json!({}))["data"], "100");
}

#[test]
fn one_connection_per_command_and_recording() {
    let fx = Fixture::new();
    for _ in 0..3 {
        call(fx.sock(), "ls", json!({}));
    }
    assert_eq!(fx.fake.connections(), 3);
    assert!(fx.fake.wait_for_requests(3, Duration::from_secs(1)));
    assert!(!fx.fake.wait_for_requests(4, Duration::from_millis(100)));
    let requests = fx.fake.requests_for("ls");
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0]["version"], json!([0, 35, 2]));
    assert_eq!(requests[0]["no_response"], false);
    let received = fx.fake.received();
    assert_eq!(received[0], request_frame("ls", json!({})));

    // A client that closes its writing side after a partial frame gets nothing.
    let mut stream = connect(fx.sock());
    stream.write_all(b"\x1bP@kitty-cmd{\"cmd\"").unwrap();
    stream.shutdown(Shutdown::Write).unwrap();
    assert!(closes_within(&mut stream, Duration::from_secs(5)));
    assert_eq!(fx.fake.requests().len(), 3);
}
