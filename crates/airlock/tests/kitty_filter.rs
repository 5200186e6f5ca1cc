//! The kitty socket filter end to end: the real binary, a real sandbox, a fake kitty
//! remote-control server (tests/common/fake_kitty/) on the host, and revdiff as the tool that
//! declares `launch_overlay`. A client inside does what revdiff's launcher does (writes its files
//! in `$TMPDIR`, asks kitty for an overlay running `sh -c "cd … && revdiff …; touch …"`, waits
//! for the sentinel, prints the output); the test plays kitty's part of running what kitty was
//! asked to run, on the host.

mod common;
#[path = "common/fake_kitty/mod.rs"]
#[allow(dead_code, unused_imports)]
mod fake_kitty;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{TestHome, report, sandbox_starts, stdout, write};
use fake_kitty::FakeKitty;

/// Where host programs may live for airlock to run them: not under /tmp (a shared temp dir,
/// whose programs airlock refuses to pin). scripts/test creates it.
const HOST_TOOLS: &str = "/var/cache/airlock-test-tools";

/// What revdiff's launcher does, in Python. argv: the mode (`launch`, `attack-symlink`,
/// `inject`), the revdiff path.
const CLIENT: &str = r#"
import json, os, socket, sys, tempfile, time
mode, revdiff = sys.argv[1], sys.argv[2]
tmp = os.environ["TMPDIR"]
sock = os.environ["KITTY_LISTEN_ON"]
out_fd, out = tempfile.mkstemp(prefix="revdiff-output-", dir=tmp)
os.close(out_fd)
done = os.path.join(tmp, "revdiff-done-" + os.path.basename(out)[-8:])
if mode == "attack-symlink":
    os.unlink(out)
    os.symlink(sys.argv[3], out)
cmd = "cd '%s' && '%s' '--output=%s' 'HEAD~1'; touch '%s'" % (os.getcwd(), revdiff, out, done)
if mode == "inject":
    cmd += "; touch /tmp/pwned"
payload = {"args": ["sh", "-c", cmd], "type": "overlay", "cwd": "current",
           "match": "window_id:" + os.environ.get("KITTY_WINDOW_ID", ""), "window_title": "rd: app"}
req = {"cmd": "launch", "version": [0, 35, 2], "payload": payload}
s = socket.socket(socket.AF_UNIX)
s.connect(sock[len("unix:"):])
s.sendall(b"\x1bP@kitty-cmd" + json.dumps(req).encode() + b"\x1b\\")
answer = b""
while not answer.endswith(b"\x1b\\"):
    chunk = s.recv(65536)
    if not chunk:
        break
    answer += chunk
print("answer=" + answer[len(b"\x1bP@kitty-cmd"):-2].decode())
print("listen_on=" + sock)
if b'"ok":true' not in answer.replace(b" ", b""):
    sys.exit(0)
for _ in range(200):
    if os.path.exists(done):
        break
    time.sleep(0.05)
print("done=%s" % os.path.exists(done))
print("output=" + open(out).read().strip())
"#;

struct World {
    h: TestHome,
    kitty: FakeKitty,
    socket: PathBuf,
    path: String,
    tools: tempfile::TempDir,
}

impl World {
    fn new() -> Option<World> {
        if !sandbox_starts() {
            eprintln!("skipped: the sandbox cannot start here");
            return None;
        }
        let Ok(tools) = tempfile::tempdir_in(HOST_TOOLS) else {
            eprintln!("skipped: {HOST_TOOLS} is not writable (scripts/test creates it as root)");
            return None;
        };
        let h = TestHome::new("home/code/app");
        let socket = h.root.join("kitty-host/kitty.sock");
        fs::create_dir_all(socket.parent().unwrap()).unwrap();
        let kitty = FakeKitty::start(&socket);
        let bin = h.root.join("bin");
        write(&bin.join("kitty"), "#!/bin/sh\nexit 0\n");
        fs::set_permissions(bin.join("kitty"), fs::Permissions::from_mode(0o755)).unwrap();
        // The fake revdiff records how it was started and writes an annotation to --output.
        let record = h.root.join("revdiff-ran");
        let revdiff = tools.path().join("bin/revdiff");
        write(
            &revdiff,
            &format!(
                "#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in --output=*) out=\"${{a#--output=}}\";; esac; done\n\
                 {{ echo \"pwd=$(pwd)\"; echo \"path=$PATH\"; echo \"git_dir=$GIT_DIR\"; echo \"args=$*\"; }} > '{}'\n\
                 echo 'src/main.rs:3: rename this' > \"$out\"\n",
                record.display()
            ),
        );
        fs::set_permissions(&revdiff, fs::Permissions::from_mode(0o755)).unwrap();
        write(&h.project.join("client.py"), CLIENT);
        let path = format!(
            "{}:{}:/usr/bin:/bin",
            bin.display(),
            revdiff.parent().unwrap().display()
        );
        Some(World {
            h,
            kitty,
            socket,
            path,
            tools,
        })
    }

    fn revdiff(&self) -> PathBuf {
        fs::canonicalize(self.tools.path().join("bin/revdiff")).unwrap()
    }

    /// `airlock run -- python3 client.py <args>` in kitty window 1, with the test running what
    /// the fake kitty is asked to launch, as kitty would.
    fn launch(&self, args: &[&str]) -> Output {
        let revdiff = self.revdiff().display().to_string();
        let mut argv = vec![
            "run",
            "--network",
            "none",
            "--",
            "python3",
            "client.py",
            args[0],
            &revdiff,
        ];
        argv.extend_from_slice(&args[1..]);
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| play_kitty(&self.kitty, &stop));
            let out = self
                .h
                .airlock(&argv)
                .env("PATH", &self.path)
                .env("KITTY_LISTEN_ON", format!("unix:{}", self.socket.display()))
                .env("KITTY_WINDOW_ID", "1")
                .env("KITTY_PID", "4242")
                .output()
                .expect("airlock");
            stop.store(true, Ordering::SeqCst);
            out
        })
    }
}

/// Plays kitty: runs each launch the fake recorded, once, on the host, until `stop`.
fn play_kitty(fake: &FakeKitty, stop: &AtomicBool) {
    let mut ran = 0;
    while !stop.load(Ordering::SeqCst) {
        let launches = fake.launches();
        for launch in &launches[ran..] {
            let status = Command::new(&launch.args[0])
                .args(&launch.args[1..])
                .status()
                .expect("run the launch");
            assert!(status.success(), "{:?}", launch.args);
        }
        ran = launches.len();
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn line<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(key))
        .unwrap_or_else(|| panic!("no {key} in {out}"))
}

#[test]
fn revdiffs_overlay_runs_as_airlocks_pinned_script_and_its_output_comes_back() {
    let Some(w) = World::new() else { return };
    let out = w.launch(&["launch"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", report(&out));
    assert!(
        line(&text, "answer=").contains("\"ok\":true"),
        "{}",
        report(&out)
    );
    assert_eq!(line(&text, "done="), "True", "{}", report(&out));
    assert_eq!(line(&text, "output="), "src/main.rs:3: rename this");
    // Inside, KITTY_LISTEN_ON is the filter's socket, never the host's.
    let listen_on = line(&text, "listen_on=");
    assert!(listen_on.contains("/.run/") && listen_on.ends_with("/kitty.sock"));
    // What kitty was asked to run: airlock's script, not the sandbox's payload.
    let launches = w.kitty.launches();
    assert_eq!(launches.len(), 1);
    assert_eq!(launches[0].args[0], "/bin/sh");
    assert!(
        launches[0].args[1].contains("/airlock/herdr-scripts/"),
        "{:?}",
        launches[0].args
    );
    assert_eq!(launches[0].kind, "overlay");
    // revdiff ran in the project, with only the host's git on PATH and no repository the
    // sandbox could have planted.
    let ran = fs::read_to_string(w.h.root.join("revdiff-ran")).unwrap();
    assert!(
        ran.contains(&format!("pwd={}", w.h.project.display())),
        "{ran}"
    );
    assert!(
        ran.contains("/herdr-scripts/") && ran.contains("path="),
        "{ran}"
    );
    assert!(ran.contains("no-git-repository"), "{ran}");
    assert!(ran.contains("HEAD~1"), "{ran}");
    // The scripts directory is gone with the session.
    let scripts = w.h.home.join(".cache/airlock/herdr-scripts");
    let left: Vec<_> = fs::read_dir(&scripts).map_or(Vec::new(), |d| d.flatten().collect());
    assert!(left.is_empty(), "{left:?}");
    let log = fs::read_to_string(kitty_log(&w.h)).unwrap();
    assert!(
        log.contains("launch allow forwarded, window owned"),
        "{log}"
    );
}

#[test]
fn a_payload_with_a_second_command_never_reaches_kitty() {
    let Some(w) = World::new() else { return };
    let out = w.launch(&["inject"]);
    let text = stdout(&out);
    let answer = line(&text, "answer=");
    assert!(
        answer.contains("\"ok\":false") && answer.contains("airlock"),
        "{}",
        report(&out)
    );
    assert!(w.kitty.launches().is_empty(), "kitty was asked to launch");
    assert!(!Path::new("/tmp/pwned").exists());
    let log = fs::read_to_string(kitty_log(&w.h)).unwrap();
    assert!(log.contains("launch deny"), "{log}");
    assert!(!log.contains("pwned"), "no request value is logged: {log}");
}

#[test]
fn an_output_name_the_sandbox_made_a_symlink_is_replaced_not_written_through() {
    let Some(w) = World::new() else { return };
    let victim = w.h.home.join(".bashrc");
    write(&victim, "# the developer's bashrc\n");
    let out = w.launch(&["attack-symlink", &victim.display().to_string()]);
    let text = stdout(&out);
    assert_eq!(line(&text, "done="), "True", "{}", report(&out));
    assert_eq!(
        fs::read_to_string(&victim).unwrap(),
        "# the developer's bashrc\n",
        "written through the sandbox's link"
    );
    // Control: the annotations still reach the sandbox, in a file airlock made.
    assert_eq!(line(&text, "output="), "src/main.rs:3: rename this");
}

#[test]
fn without_kitty_on_path_or_a_capability_there_is_no_filter() {
    let Some(w) = World::new() else { return };
    // revdiff disabled: nothing declares a kitty capability, auto mode stays off.
    w.h.config("[tools.revdiff]\nenabled = false\n");
    let out =
        w.h.airlock(&[
            "run",
            "--network",
            "none",
            "--",
            "sh",
            "-c",
            "echo \"k=$KITTY_LISTEN_ON t=$TMPDIR\"",
        ])
        .env("PATH", &w.path)
        .env("KITTY_LISTEN_ON", format!("unix:{}", w.socket.display()))
        .output()
        .expect("airlock");
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(stdout(&out).trim(), "k= t=", "{}", report(&out));
    // extra_capabilities may not name launch_*.
    w.h.config("[tools.kitty]\nextra_capabilities = [\"launch_window\"]\n");
    let out =
        w.h.airlock(&["run", "--network", "none", "--", "true"])
            .env("PATH", &w.path)
            .output()
            .expect("airlock");
    assert!(!out.status.success());
    assert!(
        common::stderr(&out).contains("launch capabilities run programs on the host"),
        "{}",
        report(&out)
    );
}

fn kitty_log(h: &TestHome) -> PathBuf {
    let sandboxes = h.sandboxes();
    let entry = fs::read_dir(&sandboxes)
        .unwrap()
        .flatten()
        .next()
        .expect("a sandbox");
    entry.path().join("logs/internal/kitty.log")
}

/// Each bad input on a connection of its own, then a good request: what kitty received, and the
/// answers. argv: none.
const BAD_CLIENT: &str = r#"
import os, socket, sys, time
sock = os.environ["KITTY_LISTEN_ON"][len("unix:"):]
P, S = b"\x1bP@kitty-cmd", b"\x1b\\"
def send(name, data):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    got = b""
    try:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
    except OSError:
        got += b"(closed while sending) "
    s.settimeout(20)
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    except OSError as e:
        got += b"client:" + str(e).encode()
    print(name + "=" + got.decode(errors="replace").replace("\n", " "))
send("huge", P + b'{"cmd":"ls","payload":{"x":"' + b"a" * (2 << 20) + b'"}}' + S)
send("utf8", P + b'{"cmd":"ls","version":[0,35,2],"payload":{"x":"\xff\xfe"}}' + S)
send("deep", P + b"[" * 10000 + b"]" * 10000 + S)
send("stray", b"GET / HTTP/1.1\r\n\r\n")
half = socket.socket(socket.AF_UNIX)
half.connect(sock)
half.sendall(P + b'{"cmd":"ls"')
send("denied", P + b'{"cmd":"ls","version":[0,35,2],"payload":{}}' + S)
send("unknown", P + b'{"cmd":"load-config","version":[0,35,2],"payload":{}}' + S)
print("half_open=still")
"#;

#[test]
fn bad_frames_are_refused_without_reaching_kitty_and_the_filter_keeps_serving() {
    let Some(w) = World::new() else { return };
    write(&w.h.project.join("bad.py"), BAD_CLIENT);
    let out =
        w.h.airlock(&["run", "--network", "none", "--", "python3", "bad.py"])
            .env("PATH", &w.path)
            .env("KITTY_LISTEN_ON", format!("unix:{}", w.socket.display()))
            .env("KITTY_WINDOW_ID", "1")
            .output()
            .expect("airlock");
    let text = stdout(&out);
    assert!(out.status.success(), "{}", report(&out));
    for name in ["huge", "utf8", "deep", "stray", "denied", "unknown"] {
        let answer = line(&text, &format!("{name}="));
        assert!(
            answer.contains("\"ok\":false") && answer.contains("airlock"),
            "{name}: {answer}\n{}",
            report(&out)
        );
    }
    assert!(line(&text, "denied=").contains("list_owned capability not enabled"));
    assert!(text.contains("half_open=still"));
    // The launch's liveness check connects; no frame of the sandbox's reached kitty.
    assert!(
        w.kitty.frames().is_empty(),
        "reached kitty: {:?}",
        w.kitty.received()
    );
    let log = fs::read_to_string(kitty_log(&w.h)).unwrap();
    assert!(
        log.lines().filter(|l| l.contains(" deny ")).count() >= 6,
        "{log}"
    );
}

#[test]
fn tools_check_kitty_says_whether_the_filter_is_active_or_what_is_missing() {
    let Some(w) = World::new() else { return };
    let check = |listen_on: Option<&str>| {
        let mut cmd =
            w.h.airlock(&["tools", "check", "--fast", "--json", "kitty"]);
        cmd.env("PATH", &w.path);
        if let Some(v) = listen_on {
            cmd.env("KITTY_LISTEN_ON", v);
        }
        let out = cmd.output().expect("airlock");
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        report["tools"][0]["notes"].to_string()
    };
    let on = check(Some(&format!("unix:{}", w.socket.display())));
    assert!(on.contains("capabilities: launch_overlay"), "{on}");
    assert!(on.contains("filter: active for a launch from here"), "{on}");
    let off = check(None);
    assert!(off.contains("KITTY_LISTEN_ON is not set"), "{off}");
    let tcp = check(Some("tcp:localhost:1234"));
    assert!(tcp.contains("is not a unix: socket"), "{tcp}");
}

#[test]
fn the_shared_temp_dir_is_tmpdir_at_the_same_path_and_reclaimed_per_project() {
    let Some(w) = World::new() else { return };
    let run = || {
        w.h.airlock(&[
            "run",
            "--network",
            "none",
            "--",
            "sh",
            "-c",
            "echo \"$TMPDIR\"; echo kept > \"$TMPDIR/scratch\"",
        ])
        .env("PATH", &w.path)
        .output()
        .expect("airlock")
    };
    let first = run();
    assert!(first.status.success(), "{}", report(&first));
    let dir = PathBuf::from(stdout(&first).trim());
    let root = w.h.home.join(".cache/airlock/tmp");
    assert_eq!(dir.parent(), Some(root.as_path()), "{}", dir.display());
    // The same path on the host, and what the sandbox wrote is there.
    assert_eq!(fs::read_to_string(dir.join("scratch")).unwrap(), "kept\n");
    let name = dir.file_name().unwrap().to_str().unwrap();
    let sandbox = name.rsplit_once('.').unwrap().0;
    let dead = root.join(format!("{sandbox}.4194304"));
    let live = root.join(format!("{sandbox}.1"));
    let other = root.join("other-project-0a1b2c3d.4194304");
    for d in [&dead, &live, &other] {
        fs::create_dir_all(d).unwrap();
    }
    let second = run();
    assert!(second.status.success(), "{}", report(&second));
    assert!(!dir.exists(), "the first session's dir is reclaimed");
    assert!(!dead.exists(), "a dead session's dir is reclaimed");
    assert!(live.exists(), "a live session's dir is kept");
    assert!(other.exists(), "another project's dir is never touched");
}

/// A launch, then owned-window commands on one connection. argv: the revdiff path.
const OWNED_CLIENT: &str = r#"
import json, os, socket, sys
revdiff = sys.argv[1]
tmp = os.environ["TMPDIR"]
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["KITTY_LISTEN_ON"][len("unix:"):])
P, S = b"\x1bP@kitty-cmd", b"\x1b\\"
buf = b""
def call(name, cmd, payload):
    global buf
    s.sendall(P + json.dumps({"cmd": cmd, "version": [0, 35, 2], "payload": payload}).encode() + S)
    while S not in buf:
        chunk = s.recv(65536)
        if not chunk:
            print(name + "=closed")
            return None
        buf += chunk
    frame, buf = buf.split(S, 1)
    print(name + "=" + frame[len(P):].decode())
    return json.loads(frame[len(P):])
launched = call("launch", "launch", {"args": [revdiff, "--output=" + tmp + "/o"], "type": "overlay"})
own = launched["data"]
call("ls", "ls", {})
call("close-own", "close-window", {"match": "id:" + own})
call("close-user", "close-window", {"match": "id:2"})
"#;

#[test]
fn owned_window_commands_reach_kitty_only_for_the_sandboxs_own_windows() {
    let Some(w) = World::new() else { return };
    w.h.config("[tools.kitty]\nextra_capabilities = [\"close_owned\", \"list_owned\"]\n");
    write(&w.h.project.join("owned.py"), OWNED_CLIENT);
    let revdiff = w.revdiff().display().to_string();
    let out =
        w.h.airlock(&[
            "run",
            "--network",
            "none",
            "--",
            "python3",
            "owned.py",
            &revdiff,
        ])
        .env("PATH", &w.path)
        .env("KITTY_LISTEN_ON", format!("unix:{}", w.socket.display()))
        .env("KITTY_WINDOW_ID", "1")
        .output()
        .expect("airlock");
    let text = stdout(&out);
    assert!(out.status.success(), "{}", report(&out));
    let launched: serde_json::Value = serde_json::from_str(line(&text, "launch=")).unwrap();
    assert_eq!(launched["data"], "100", "{text}");
    let ls = line(&text, "ls=");
    assert!(
        ls.contains("100") && !ls.contains("FAKE_KITTY_SECRET_VALUE"),
        "{ls}"
    );
    assert!(
        !ls.contains("\\\"id\\\": 2") && !ls.contains("\\\"id\\\":2"),
        "the user's window is listed: {ls}"
    );
    assert!(line(&text, "close-own=").contains("\"ok\":true"), "{text}");
    assert!(
        line(&text, "close-user=").contains("\"ok\":false"),
        "{text}"
    );
    // kitty saw the launch, the ls and one close-window: of window 100.
    let commands = w.kitty.commands();
    assert_eq!(commands, ["launch", "ls", "close-window"], "{commands:?}");
    let close = &w.kitty.requests_for("close-window")[0];
    assert_eq!(close["payload"]["match"], "id:100");
    assert_eq!(w.kitty.windows(), [1, 2]);
}
