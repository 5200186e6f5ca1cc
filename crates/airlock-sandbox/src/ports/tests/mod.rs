//! The supervisor's side of the forwards against a stand-in sandbox: a process in a user and
//! network namespace of its own (`unshare --user --map-root-user --net`), as the native backend
//! makes them, running a small Python server or client there. `forwards` drives the launch's
//! forwards, `control` the control socket (requests, callbacks, its directory, session records).
//! The end-to-end tests with the real binary are in `crates/airlock/tests/ports*.rs`.

mod control;
mod forwards;
mod remove;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use airlock_config::NetworkMode;
use airlock_config::ports::PortDirection;

use super::protocol::{AskError, Request, ask};
use super::sessions::{self, SessionRecord};
use super::*;
use crate::spec::{PortForward, PortsSpec};

const DEADLINE: Duration = Duration::from_secs(20);
const ASK: Duration = Duration::from_secs(5);

/// Waits for `cond` with a deadline; panics naming `what` when it never holds.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The Python side of the stand-in sandbox: `echo PORT` serves an echo on 127.0.0.1:PORT;
/// `client` connects, for each port read on stdin, to 127.0.0.1:PORT and prints what came back.
const INSIDE: &str = r#"
import socket, sys, threading
if sys.argv[1] == "echo":
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", int(sys.argv[2])))
    s.listen(64)
    print("ready", flush=True)
    def echo(c):
        while True:
            d = c.recv(65536)
            if not d:
                break
            c.sendall(d)
        c.close()
    while True:
        c, _ = s.accept()
        threading.Thread(target=echo, args=(c,), daemon=True).start()
else:
    print("ready", flush=True)
    for line in sys.stdin:
        try:
            c = socket.create_connection(("127.0.0.1", int(line)), timeout=5)
            c.sendall(b"hi\n")
            print("got " + c.recv(100).decode().strip(), flush=True)
        except Exception as e:
            print("error " + type(e).__name__, flush=True)
"#;

/// A process in new user and network namespaces (its loopback up) running [`INSIDE`].
struct FakeSandbox {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl FakeSandbox {
    /// None, saying why, where unprivileged namespaces or python3 are not available.
    fn start(args: &[&str]) -> Option<FakeSandbox> {
        if !Path::new("/usr/bin/python3").exists() {
            eprintln!("skipped: /usr/bin/python3 is missing");
            return None;
        }
        let script = format!(
            "ip link set lo up 2>/dev/null || /usr/sbin/ip link set lo up; exec /usr/bin/python3 -c '{}' {}",
            INSIDE.replace('\'', "'\\''"),
            args.join(" ")
        );
        let mut child = Command::new("unshare")
            .args(["--user", "--map-root-user", "--net", "sh", "-c", &script])
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .ok()?;
        let mut stdout = BufReader::new(child.stdout.take()?);
        let mut line = String::new();
        if stdout.read_line(&mut line).ok()? == 0 || line.trim() != "ready" {
            eprintln!("skipped: `unshare --user --net` does not work here ({line:?})");
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        Some(FakeSandbox {
            stdin: child.stdin.take(),
            stdout,
            child,
        })
    }

    fn pid(&self) -> libc::pid_t {
        self.child.id() as libc::pid_t
    }

    /// The client mode's answer for `port`.
    fn connect(&mut self, port: u16) -> String {
        let stdin = self.stdin.as_mut().expect("client mode");
        writeln!(stdin, "{port}").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line.trim().to_owned()
    }
}

impl Drop for FakeSandbox {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nothing listens on right now.
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn session(network: NetworkMode, dir: Option<&Path>) -> SessionRecord {
    SessionRecord::of_this_process("app-1234abcd", Path::new("/p/app"), network, dir)
}

fn inbound(host: u16, sandbox: u16) -> PortForward {
    PortForward {
        host,
        sandbox,
        direction: PortDirection::In,
        origin: format!("--publish {host}:{sandbox}"),
    }
}

/// `ping` through 127.0.0.1:port; what came back (empty when refused or closed).
fn echo_through(port: u16) -> String {
    let Ok(mut s) = TcpStream::connect((Ipv4Addr::LOCALHOST, port)) else {
        return String::new();
    };
    s.set_read_timeout(Some(ASK)).unwrap();
    if s.write_all(b"ping").is_err() {
        return String::new();
    }
    let _ = s.shutdown(Shutdown::Write);
    let mut got = String::new();
    let _ = s.read_to_string(&mut got);
    got
}

fn listening(port: u16) -> bool {
    TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok()
}

/// This process's children named [`HELPER_NAME`] in the network namespace `net` (a
/// `/proc/<pid>/ns/net` link's text: tests run in parallel, each with its own helper).
fn helpers(net: &Path) -> Vec<u32> {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let comm = stat.split_once('(').and_then(|(_, r)| r.rsplit_once(')'));
            comm.is_some_and(|(name, rest)| {
                name == HELPER_NAME && rest.split(' ').nth(2) == Some(me.as_str())
            }) && std::fs::read_link(format!("/proc/{pid}/ns/net")).is_ok_and(|l| l == net)
        })
        .collect()
}

/// A started service answering on its control socket, as a launch has it once the workload runs.
fn serving(mut service: PortService) -> PortService {
    service.serve();
    service
}
