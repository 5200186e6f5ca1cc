//! The fake herdr server (tests/common/fake_herdr/) against a plain `UnixStream` client: framing,
//! answers, ids, ownership errors and the stall hook behave as herdr 0.8.2's control socket does.

#[path = "common/fake_herdr/mod.rs"]
#[allow(dead_code)]
mod fake_herdr;

use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fake_herdr::FakeHerdr;
use serde_json::{Value, json};

struct Fixture {
    _dir: tempfile::TempDir,
    fake: FakeHerdr,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let fake = FakeHerdr::start(&dir.path().join("herdr.sock"));
        Fixture { _dir: dir, fake }
    }

    fn sock(&self) -> &Path {
        self.fake.path()
    }
}

/// Writes `bytes` on a fresh connection and reads until the server closes. Linux reports
/// ECONNRESET instead of EOF when the server closed with unread bytes, which ends the read too.
fn exchange(sock: &Path, bytes: &[u8]) -> Vec<u8> {
    let mut stream = UnixStream::connect(sock).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(bytes).expect("write");
    read_to_close(&mut stream)
}

fn read_to_close(stream: &mut UnixStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return out,
            Err(e) => panic!("read: {e}"),
        }
    }
}

/// The response lines in what the server wrote.
fn lines(out: &[u8]) -> Vec<Value> {
    assert!(
        out.is_empty() || out.ends_with(b"\n"),
        "response not newline-terminated: {:?}",
        String::from_utf8_lossy(out)
    );
    out.split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).expect("response is JSON"))
        .collect()
}

/// One request, its single response.
fn request(sock: &Path, id: &str, method: &str, params: Value) -> Value {
    let mut line = json!({"id": id, "method": method, "params": params}).to_string();
    line.push('\n');
    let mut answers = lines(&exchange(sock, line.as_bytes()));
    assert_eq!(answers.len(), 1, "{method}: one response line: {answers:?}");
    answers.remove(0)
}

fn result_type(response: &Value) -> &str {
    response["result"]["type"].as_str().unwrap_or("")
}

fn error_code(response: &Value) -> &str {
    response["error"]["code"].as_str().unwrap_or("")
}

#[test]
fn ping_answers_pong_for_protocol_20() {
    let fx = Fixture::new();
    let pong = request(fx.sock(), "p-1", "ping", json!({}));
    assert_eq!(pong["id"], "p-1");
    assert_eq!(pong["result"]["type"], "pong");
    assert_eq!(pong["result"]["version"], "0.8.2");
    assert_eq!(pong["result"]["protocol"], 20);
    assert!(pong["result"]["capabilities"]["live_handoff"].is_boolean());
    assert!(pong["result"]["capabilities"]["detached_server_daemon"].is_boolean());
    assert!(pong.get("error").is_none());
    assert_eq!(fx.fake.connections(), 1);
    assert_eq!(fx.fake.methods(), ["ping"]);
}

#[test]
fn socket_is_private_and_removed_on_drop() {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("herdr.sock");
    let fake = FakeHerdr::start(&path);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(
        FakeHerdr::try_start(&path).is_err(),
        "a second server on a live socket"
    );
    drop(fake);
    assert!(!path.exists(), "socket file left behind");
    assert!(UnixStream::connect(&path).is_err());
    // A stale socket file (nobody listening) is replaced.
    let stale = std::os::unix::net::UnixListener::bind(&path).unwrap();
    drop(stale);
    let again = FakeHerdr::start(&path);
    assert_eq!(result_type(&request(&path, "1", "ping", json!({}))), "pong");
    drop(again);
}

#[test]
fn tab_create_gives_fresh_ids_each_time() {
    let fx = Fixture::new();
    let first = request(
        fx.sock(),
        "c-1",
        "tab.create",
        json!({"cwd": "/tmp", "label": "airlock", "env": {"A": "1"}}),
    );
    assert_eq!(first["id"], "c-1");
    assert_eq!(result_type(&first), "tab_created");
    let tab = &first["result"]["tab"];
    let pane = &first["result"]["root_pane"];
    assert_eq!(tab["tab_id"], "w1:t2");
    assert_eq!(tab["workspace_id"], "w1");
    assert_eq!(tab["label"], "airlock");
    assert_eq!(tab["pane_count"], 1);
    assert!(
        tab["number"].is_u64() && tab["focused"].is_boolean() && tab["agent_status"].is_string()
    );
    assert_eq!(pane["pane_id"], "w1:p3");
    assert_eq!(pane["tab_id"], "w1:t2");
    assert_eq!(pane["workspace_id"], "w1");
    assert_eq!(pane["cwd"], "/tmp");
    assert!(pane["terminal_id"].is_string() && pane["revision"].is_u64());

    let second = request(fx.sock(), "c-2", "tab.create", json!({}));
    assert_eq!(second["result"]["tab"]["tab_id"], "w1:t3");
    assert_eq!(second["result"]["root_pane"]["pane_id"], "w1:p4");
    assert_ne!(
        first["result"]["tab"]["tab_id"],
        second["result"]["tab"]["tab_id"]
    );
    assert_eq!(fx.fake.tabs(), ["w1:t1", "w1:t2", "w1:t3"]);
    assert_eq!(fx.fake.panes(), ["w1:p1", "w1:p2", "w1:p3", "w1:p4"]);
}

#[test]
fn send_input_reaches_owned_panes_and_names_unknown_ones() {
    let fx = Fixture::new();
    let created = request(fx.sock(), "1", "tab.create", json!({}));
    let pane = created["result"]["root_pane"]["pane_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let sent = request(
        fx.sock(),
        "2",
        "pane.send_input",
        json!({"pane_id": pane, "text": "/usr/bin/true", "keys": ["Enter"]}),
    );
    assert_eq!(sent, json!({"id": "2", "result": {"type": "ok"}}));

    let unknown = request(
        fx.sock(),
        "3",
        "pane.send_input",
        json!({"pane_id": "w1:p99", "text": "x", "keys": ["Enter"]}),
    );
    assert_eq!(unknown["id"], "3", "a semantic error keeps the id");
    assert_eq!(error_code(&unknown), "pane_not_found");
    assert_eq!(unknown["error"]["message"], "pane w1:p99 not found");

    let recorded = fx.fake.requests_for("pane.send_input");
    assert_eq!(recorded.len(), 2);
    assert_eq!(recorded[0]["params"]["text"], "/usr/bin/true");
}

#[test]
fn tab_close_only_for_open_tabs() {
    let fx = Fixture::new();
    let created = request(fx.sock(), "1", "tab.create", json!({}));
    let tab = created["result"]["tab"]["tab_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        result_type(&request(
            fx.sock(),
            "2",
            "tab.close",
            json!({"tab_id": tab})
        )),
        "ok"
    );
    let again = request(fx.sock(), "3", "tab.close", json!({"tab_id": tab}));
    assert_eq!(
        (again["id"].as_str(), error_code(&again)),
        (Some("3"), "tab_not_found")
    );
    let never = request(fx.sock(), "4", "tab.close", json!({"tab_id": "w1:t42"}));
    assert_eq!(error_code(&never), "tab_not_found");
    // The closed tab's pane went with it.
    let pane = request(
        fx.sock(),
        "5",
        "pane.send_input",
        json!({"pane_id": "w1:p3", "text": "x"}),
    );
    assert_eq!(error_code(&pane), "pane_not_found");
    assert_eq!(fx.fake.tabs(), ["w1:t1"]);
}

#[test]
fn undeserializable_lines_get_invalid_request_with_an_empty_id() {
    let fx = Fixture::new();
    let cases: &[&[u8]] = &[
        b"this is not json\n",
        b"{\"id\":\"1\",\"method\":\"ping\"}\n",                        // no params
        b"{\"method\":\"ping\",\"params\":{}}\n",                       // no id
        b"{\"id\":\"1\",\"params\":{}}\n",                              // no method
        b"{\"id\":7,\"method\":\"ping\",\"params\":{}}\n",              // id not a string
        b"{\"id\":\"1\",\"method\":\"pane.nuke\",\"params\":{}}\n",     // unknown method
        b"{\"id\":\"1\",\"method\":\"ping\",\"params\":null}\n",        // params not a map
        b"{\"id\":\"1\",\"method\":\"tab.close\",\"params\":{}}\n",     // required field missing
        b"{\"id\":\"1\",\"method\":\"tab.close\",\"params\":{\"tab_id\":3}}\n", // wrong type
        b"{\"id\":\"1\",\"method\":\"pane.read\",\"params\":{\"pane_id\":\"w1:p2\",\"source\":\"all\"}}\n", // bad enum
        b"[1,2]\n",
    ];
    for case in cases {
        let answers = lines(&exchange(fx.sock(), case));
        assert_eq!(answers.len(), 1, "{:?}", String::from_utf8_lossy(case));
        let answer = &answers[0];
        assert_eq!(answer["id"], "", "{answer}");
        assert_eq!(error_code(answer), "invalid_request", "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("invalid request: "),
            "{answer}"
        );
    }
    // Unknown fields are ignored, as herdr's serde does.
    let extra = exchange(
        fx.sock(),
        b"{\"id\":\"9\",\"method\":\"ping\",\"params\":{\"x\":1},\"extra\":true}\n",
    );
    assert_eq!(lines(&extra)[0]["result"]["type"], "pong");
    assert_eq!(fx.fake.connections(), cases.len() + 1);
}

#[test]
fn one_request_per_connection() {
    let fx = Fixture::new();
    let out = exchange(
        fx.sock(),
        b"{\"id\":\"a\",\"method\":\"ping\",\"params\":{}}\n{\"id\":\"b\",\"method\":\"tab.create\",\"params\":{}}\n",
    );
    let answers = lines(&out);
    assert_eq!(
        answers.len(),
        1,
        "only the first line is answered: {answers:?}"
    );
    assert_eq!(answers[0]["id"], "a");
    assert_eq!(fx.fake.methods(), ["ping"]);
    assert_eq!(
        fx.fake.raw(),
        [b"{\"id\":\"a\",\"method\":\"ping\",\"params\":{}}".to_vec()]
    );
    // The second line was never read, so nothing of it reached the server.
    assert!(
        !fx.fake
            .received()
            .concat()
            .windows(10)
            .any(|w| w == b"tab.create")
    );
    assert_eq!(fx.fake.tabs(), ["w1:t1"]);

    // Writing a second request after the answer gets nothing back either.
    let mut stream = UnixStream::connect(fx.sock()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(b"{\"id\":\"c\",\"method\":\"ping\",\"params\":{}}\n")
        .unwrap();
    let mut first = [0u8; 1];
    stream.read_exact(&mut first).unwrap();
    let _ = stream.write_all(b"{\"id\":\"d\",\"method\":\"ping\",\"params\":{}}\n");
    let mut rest = read_to_close(&mut stream);
    rest.insert(0, first[0]);
    assert_eq!(lines(&rest).len(), 1);
    assert_eq!(fx.fake.methods(), ["ping", "ping"]);
}

#[test]
fn no_answer_without_a_complete_line() {
    let fx = Fixture::new();
    // Closed before the newline.
    let mut stream = UnixStream::connect(fx.sock()).unwrap();
    stream
        .write_all(b"{\"id\":\"1\",\"method\":\"ping\",\"params\":{}}")
        .unwrap();
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert!(read_to_close(&mut stream).is_empty());
    // An empty (blank) line.
    assert!(exchange(fx.sock(), b"  \r\n").is_empty());
    // Not UTF-8.
    assert!(exchange(fx.sock(), b"\xff\xfe\n").is_empty());
    assert!(fx.fake.requests().is_empty());
    assert_eq!(fx.fake.raw().len(), 2, "the blank and the non-UTF-8 line");
    assert_eq!(
        fx.fake.received()[0],
        b"{\"id\":\"1\",\"method\":\"ping\",\"params\":{}}".to_vec()
    );
}

#[test]
fn an_over_long_line_is_dropped_unanswered() {
    let fx = Fixture::new();
    let mut line = vec![b' '; fake_herdr::MAX_LINE + 1];
    line.push(b'\n');
    let mut stream = UnixStream::connect(fx.sock()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    // The server stops reading at the limit: the write may fail once it closes.
    let _ = stream.write_all(&line);
    assert!(read_to_close(&mut stream).is_empty());
    assert!(fx.fake.raw().is_empty());
    assert_eq!(fx.fake.received()[0].len(), fake_herdr::MAX_LINE + 1);
}

#[test]
fn stall_holds_the_connection_without_an_answer() {
    let fx = Fixture::new();
    fx.fake.stall("tab.create");
    let mut stalled = UnixStream::connect(fx.sock()).unwrap();
    stalled
        .write_all(b"{\"id\":\"s\",\"method\":\"tab.create\",\"params\":{}}\n")
        .unwrap();
    assert!(fx.fake.wait_for_requests(1, Duration::from_secs(5)));
    stalled
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 64];
    let err = stalled.read(&mut buf).expect_err("no answer while stalled");
    assert!(matches!(
        err.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut
    ));
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert_eq!(fx.fake.held(), 1);
    assert_eq!(fx.fake.methods(), ["tab.create"]);
    assert_eq!(fx.fake.tabs(), ["w1:t1"], "a stalled request does nothing");

    // Other methods, and other connections, are still answered.
    assert_eq!(
        result_type(&request(fx.sock(), "p", "ping", json!({}))),
        "pong"
    );

    // Released: the held connection closes with no answer.
    fx.fake.release_stalled();
    stalled
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert!(read_to_close(&mut stalled).is_empty());
    assert_eq!(fx.fake.held(), 0);

    fx.fake.unstall("tab.create");
    let created = request(fx.sock(), "t", "tab.create", json!({}));
    assert_eq!(created["result"]["tab"]["tab_id"], "w1:t2");
}

#[test]
fn dropping_the_fake_closes_stalled_connections() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeHerdr::start(&dir.path().join("herdr.sock"));
    fake.stall("tab.create");
    let mut stalled = UnixStream::connect(fake.path()).unwrap();
    stalled
        .write_all(b"{\"id\":\"s\",\"method\":\"tab.create\",\"params\":{}}\n")
        .unwrap();
    assert!(fake.wait_for_requests(1, Duration::from_secs(5)));
    drop(fake);
    stalled
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert!(read_to_close(&mut stalled).is_empty());
}

#[test]
fn pane_read_and_notification_follow_the_schema() {
    let fx = Fixture::new();
    let read = request(
        fx.sock(),
        "r",
        "pane.read",
        json!({"pane_id": fake_herdr::PANE_ID, "source": "recent", "lines": 50}),
    );
    assert_eq!(result_type(&read), "pane_read");
    let body = &read["result"]["read"];
    assert_eq!(body["pane_id"], "w1:p2");
    assert_eq!(body["tab_id"], "w1:t1");
    assert_eq!(body["workspace_id"], "w1");
    assert_eq!(body["source"], "recent");
    assert_eq!(body["format"], "text");
    assert_eq!(body["text"], fake_herdr::SCREEN_TEXT);
    assert!(body["revision"].is_u64() && body["truncated"].is_boolean());

    assert!(fx.fake.set_pane_text("w1:p2", "one\ntwo\nthree"));
    let last = request(
        fx.sock(),
        "r2",
        "pane.read",
        json!({"pane_id": "w1:p2", "source": "visible", "lines": 1}),
    );
    assert_eq!(last["result"]["read"]["text"], "three");
    assert_eq!(last["result"]["read"]["truncated"], true);

    let shown = request(
        fx.sock(),
        "n",
        "notification.show",
        json!({"title": "airlock", "body": "done", "sound": "done"}),
    );
    assert_eq!(
        shown,
        json!({"id": "n", "result": {"type": "notification_show", "shown": true, "reason": "shown"}})
    );
    let empty = request(
        fx.sock(),
        "e",
        "notification.show",
        json!({"title": " \n "}),
    );
    assert_eq!(
        (empty["id"].as_str(), error_code(&empty)),
        (Some("e"), "invalid_params")
    );
    assert_eq!(fx.fake.notifications().len(), 1);
    assert_eq!(fx.fake.notifications()[0]["title"], "airlock");
}

#[test]
fn agent_reports_show_in_pane_info() {
    let fx = Fixture::new();
    let reported = request(
        fx.sock(),
        "1",
        "pane.report_agent",
        json!({"pane_id": "w1:p2", "source": "airlock", "agent": "claude", "state": "working"}),
    );
    assert_eq!(result_type(&reported), "ok");
    let session = request(
        fx.sock(),
        "2",
        "pane.report_agent_session",
        json!({"pane_id": "w1:p2", "source": "airlock", "agent": "claude", "agent_session_id": "abc-1"}),
    );
    assert_eq!(result_type(&session), "ok");
    let pane = fx.fake.pane("w1:p2").unwrap();
    assert_eq!(pane["agent"], "claude");
    assert_eq!(pane["agent_status"], "working");
    assert_eq!(pane["agent_session"]["value"], "abc-1");
    let agents = request(fx.sock(), "3", "agent.list", json!({}));
    assert_eq!(agents["result"]["agents"][0]["pane_id"], "w1:p2");

    let released = request(
        fx.sock(),
        "4",
        "pane.release_agent",
        json!({"pane_id": "w1:p2", "source": "airlock", "agent": "claude"}),
    );
    assert_eq!(result_type(&released), "ok");
    assert_eq!(fx.fake.pane("w1:p2").unwrap()["agent"], Value::Null);
    let gone = request(
        fx.sock(),
        "5",
        "pane.report_agent",
        json!({"pane_id": "w1:p9", "source": "airlock", "agent": "claude", "state": "idle"}),
    );
    assert_eq!(error_code(&gone), "pane_not_found");
}

#[test]
fn fail_hook_and_client_helpers() {
    let fx = Fixture::new();
    fx.fake.fail("tab.create", "ui_busy", "busy");
    let failed = fake_herdr::call(fx.sock(), "tab.create", json!({}));
    assert_eq!(
        failed,
        json!({"id": "fake-client", "error": {"code": "ui_busy", "message": "busy"}})
    );
    fx.fake.unfail("tab.create");
    let created = fake_herdr::call(fx.sock(), "tab.create", json!({}));
    assert_eq!(created["result"]["tab"]["tab_id"], "w1:t2");
    assert_eq!(fx.fake.responses().len(), 2);
}

#[test]
fn wait_for_output_holds_until_the_text_appears() {
    let fx = Fixture::new();
    let sock = fx.sock().to_path_buf();
    let waiter = std::thread::spawn(move || {
        request(
            &sock,
            "w",
            "pane.wait_for_output",
            json!({"pane_id": "w1:p2", "source": "recent", "match": {"type": "substring", "value": "READY"}, "timeout_ms": 10_000}),
        )
    });
    assert!(fx.fake.wait_for_requests(1, Duration::from_secs(5)));
    std::thread::sleep(Duration::from_millis(100));
    assert!(fx.fake.set_pane_text("w1:p2", "booting\nREADY now\n"));
    let matched = waiter.join().unwrap();
    assert_eq!(result_type(&matched), "output_matched");
    assert_eq!(matched["result"]["matched_line"], "READY now");

    let timed_out = request(
        fx.sock(),
        "t",
        "events.wait",
        json!({"match_event": {"event": "tab_created"}, "timeout_ms": 50}),
    );
    assert_eq!(
        (timed_out["id"].as_str(), error_code(&timed_out)),
        (Some("t"), "timeout")
    );
}

#[test]
fn every_schema_method_is_accepted() {
    let methods = fake_herdr::schema_methods();
    assert_eq!(methods.len(), 91);
    for method in methods {
        let fx = Fixture::new();
        let mut params = fake_herdr::sample_params(method).unwrap();
        if matches!(
            method,
            "events.wait" | "pane.wait_for_output" | "agent.wait"
        ) {
            params["timeout_ms"] = json!(50);
        }
        let mut line = json!({"id": "m", "method": method, "params": params}).to_string();
        line.push('\n');
        let mut stream = UnixStream::connect(fx.sock()).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream.write_all(line.as_bytes()).unwrap();
        // events.subscribe keeps the connection after its ack: read just the first line.
        let mut first = Vec::new();
        let mut byte = [0u8; 1];
        while stream.read(&mut byte).expect("an answer") == 1 && byte[0] != b'\n' {
            first.push(byte[0]);
        }
        let answer: Value = serde_json::from_slice(&first)
            .unwrap_or_else(|e| panic!("{method}: {e}: {:?}", String::from_utf8_lossy(&first)));
        assert_eq!(answer["id"], "m", "{method}: {answer}");
        assert_ne!(error_code(&answer), "invalid_request", "{method}: {answer}");
        let kind = result_type(&answer);
        assert!(
            !kind.is_empty() || answer["error"]["code"].is_string(),
            "{method}: {answer}"
        );
    }
}
