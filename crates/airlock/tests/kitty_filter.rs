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
