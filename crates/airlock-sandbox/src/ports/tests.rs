//! The supervisor's side of the forwards against a stand-in sandbox: a process in a user and
//! network namespace of its own (`unshare --user --map-root-user --net`), as the native backend
//! makes them, running a small Python server or client there. The end-to-end tests with the real
//! binary are in `crates/airlock/tests/ports.rs`.

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

#[test]
fn inbound_forwards_reach_the_sandbox_and_end_with_the_service() {
    let inside = free_port();
    let Some(sandbox) = FakeSandbox::start(&["echo", &inside.to_string()]) else {
        return;
    };
    let host = free_port();
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("state/run");
    let ports = PortsSpec {
        forwards: vec![inbound(host, inside)],
        control_dir: Some(run.clone()),
    };
    let me = session(NetworkMode::Proxy, Some(&run));
    let service = PortService::start_for(&me, &ports, sandbox.pid()).expect("start");
    assert!(service.warnings().is_empty(), "{:?}", service.warnings());
    assert_eq!(echo_through(host), "ping", "through the forward");
    // Control: the server lives in the sandbox's network namespace alone.
    assert_eq!(echo_through(inside), "", "not on the host's loopback");
    let socket = run.join(socket_name(me.pid));
    let listed = ask(&socket, &Request::Ports, ASK).expect("ports");
    let infos: Vec<ForwardInfo> = serde_json::from_str(&listed).unwrap();
    assert_eq!(
        infos,
        [ForwardInfo {
            host,
            sandbox: inside,
            direction: PortDirection::In,
            kind: ForwardKind::Publish,
            expires_in_secs: None,
        }]
    );
    assert_eq!(
        sessions::list(&run),
        std::slice::from_ref(&me),
        "the record is listed"
    );
    let net = std::fs::read_link(format!("/proc/{}/ns/net", sandbox.pid())).unwrap();
    assert_eq!(helpers(&net).len(), 1, "one helper makes the sockets");
    // A connection held open across the end is shut too.
    let mut held = TcpStream::connect((Ipv4Addr::LOCALHOST, host)).unwrap();
    held.write_all(b"x").unwrap();
    drop(service);
    assert!(!listening(host), "the host listener is closed");
    TcpListener::bind((Ipv4Addr::LOCALHOST, host)).expect("the port is free again");
    held.set_read_timeout(Some(ASK)).unwrap();
    let mut buf = [0u8; 8];
    let n = held.read(&mut buf).unwrap_or(0);
    assert!(
        n <= 1 && held.read(&mut buf).unwrap_or(0) == 0,
        "the held connection ended"
    );
    assert!(!socket.exists() && !run.join(format!("{}.json", me.pid)).exists());
    assert!(
        helpers(&net).is_empty(),
        "no helper left behind: {:?}",
        helpers(&net)
    );
}

#[test]
fn outbound_forwards_reach_the_named_host_service_only() {
    let Some(mut sandbox) = FakeSandbox::start(&["client"]) else {
        return;
    };
    let service_port = free_port();
    let host_service = TcpListener::bind((Ipv4Addr::LOCALHOST, service_port)).unwrap();
    std::thread::spawn(move || {
        for mut c in host_service.incoming().flatten() {
            let _ = c.write_all(b"from the host\n");
        }
    });
    let ports = PortsSpec {
        forwards: vec![PortForward {
            host: service_port,
            sandbox: 5432,
            direction: PortDirection::Out,
            origin: "test".into(),
        }],
        control_dir: None,
    };
    let service = PortService::start_for(&session(NetworkMode::None, None), &ports, sandbox.pid())
        .expect("start");
    assert_eq!(sandbox.connect(5432), "got from the host");
    // Control: the host's port itself is not reachable from the sandbox's namespace.
    assert_eq!(
        sandbox.connect(service_port),
        "error ConnectionRefusedError"
    );
    drop(service);
    assert_eq!(
        sandbox.connect(5432),
        "error ConnectionRefusedError",
        "the door closes with the session"
    );
}

#[test]
fn a_host_port_in_use_fails_the_start_and_is_never_shared() {
    let Some(sandbox) = FakeSandbox::start(&["echo", "8000"]) else {
        return;
    };
    for bind in [Ipv4Addr::LOCALHOST, Ipv4Addr::UNSPECIFIED] {
        let holder = TcpListener::bind((bind, 0)).unwrap();
        let port = holder.local_addr().unwrap().port();
        let ports = PortsSpec {
            forwards: vec![inbound(port, 8000)],
            control_dir: None,
        };
        let err = PortService::start_for(&session(NetworkMode::Proxy, None), &ports, sandbox.pid())
            .err()
            .expect("refused");
        assert!(
            err.starts_with(&format!(
                "--publish {port}:8000: the host's 127.0.0.1:{port} is in use"
            )),
            "{err}"
        );
        // The holder still gets its connections.
        let _c = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
        holder.set_nonblocking(true).unwrap();
        wait_for("the holder's connection", || holder.accept().is_ok());
    }
}

#[test]
fn control_requests_open_forwards_and_callbacks_within_their_caps() {
    let inside = free_port();
    let Some(sandbox) = FakeSandbox::start(&["echo", &inside.to_string()]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let me = session(NetworkMode::Proxy, Some(&run));
    let ports = PortsSpec {
        forwards: Vec::new(),
        control_dir: Some(run.clone()),
    };
    let service = PortService::start_for(&me, &ports, sandbox.pid()).expect("start");
    let socket = run.join(socket_name(me.pid));
    let host = free_port();
    let ok = ask(
        &socket,
        &Request::Forward {
            host,
            sandbox: inside,
        },
        ASK,
    )
    .expect("forward");
    assert!(ok.contains(&format!("127.0.0.1:{host}")), "{ok}");
    assert_eq!(echo_through(host), "ping");
    let again = ask(
        &socket,
        &Request::Forward {
            host,
            sandbox: inside,
        },
        ASK,
    );
    assert!(
        matches!(&again, Err(AskError::Refused(r)) if r.contains("is in use")),
        "{again:?}"
    );
    let low = ask(&socket, &Request::Callback { port: 80 }, ASK);
    assert!(
        matches!(&low, Err(AskError::Refused(r)) if r.contains("below 1024")),
        "{low:?}"
    );
    // A sandbox asking for a thousand callback forwards gets four.
    let mut opened = 0;
    for _ in 0..1000 {
        if ask(&socket, &Request::Callback { port: free_port() }, ASK).is_ok() {
            opened += 1;
        }
    }
    assert_eq!(opened, MAX_CALLBACKS);
    let last = ask(&socket, &Request::Callback { port: free_port() }, ASK);
    assert!(
        matches!(&last, Err(AskError::Refused(r)) if r.contains("4 callback forwards")),
        "{last:?}"
    );
    let infos: Vec<ForwardInfo> =
        serde_json::from_str(&ask(&socket, &Request::Ports, ASK).unwrap()).unwrap();
    let callbacks: Vec<_> = infos
        .iter()
        .filter(|i| i.kind == ForwardKind::Callback)
        .collect();
    assert_eq!(callbacks.len(), MAX_CALLBACKS);
    assert!(
        callbacks
            .iter()
            .all(|c| c.expires_in_secs.is_some_and(|s| s > 590))
    );
    let junk = ask_raw(&socket, b"sh -c id\n");
    assert!(junk.starts_with("error unknown request"), "{junk}");
    let long = ask_raw(&socket, &[b'a'; 200]);
    assert!(long.starts_with("error the request is longer"), "{long}");
    drop(service);
}

/// Sends `bytes` as they are; the answer line.
fn ask_raw(socket: &Path, bytes: &[u8]) -> String {
    let mut s = std::os::unix::net::UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(ASK)).unwrap();
    let _ = s.write_all(bytes);
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer
}

#[test]
fn a_callback_forward_ends_after_its_first_answered_request_or_its_deadline() {
    let inside = free_port();
    let Some(sandbox) = FakeSandbox::start(&["echo", &inside.to_string()]) else {
        return;
    };
    let service = PortService::start_for(
        &session(NetworkMode::Proxy, None),
        &PortsSpec::default(),
        sandbox.pid(),
    )
    .expect("start");
    let shared = &service.shared;
    shared.open_callback(inside).expect("callback");
    // A connection that carried nothing back (a browser's preconnect) does not end it.
    drop(TcpStream::connect((Ipv4Addr::LOCALHOST, inside)).unwrap());
    std::thread::sleep(Duration::from_millis(200));
    assert!(listening(inside));
    assert_eq!(echo_through(inside), "ping");
    wait_for("the callback forward to end", || {
        shared.infos().is_empty() && TcpListener::bind((Ipv4Addr::LOCALHOST, inside)).is_ok()
    });
    // The deadline, shortened here: nothing connects, and it ends anyway.
    let ends = Ends {
        deadline: Some(Instant::now() + Duration::from_millis(300)),
        after_first_answer: true,
    };
    shared
        .open_inbound(inside, inside, ForwardKind::Callback, ends)
        .expect("open");
    assert_eq!(shared.infos().len(), 1);
    wait_for("the deadline", || {
        shared.infos().is_empty() && !listening(inside)
    });
}

#[test]
fn host_network_sessions_forward_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let me = session(NetworkMode::Host, Some(&run));
    let ports = PortsSpec {
        forwards: Vec::new(),
        control_dir: Some(run.clone()),
    };
    let service = PortService::start_for(&me, &ports, 1).expect("start");
    let socket = run.join(socket_name(me.pid));
    for request in [
        Request::Forward {
            host: free_port(),
            sandbox: 3000,
        },
        Request::Callback { port: free_port() },
    ] {
        let r = ask(&socket, &request, ASK);
        assert!(
            matches!(&r, Err(AskError::Refused(m)) if m.contains("uses the host's network")),
            "{r:?}"
        );
    }
    assert_eq!(ask(&socket, &Request::Ports, ASK).unwrap(), "[]");
    drop(service);
}

#[test]
fn the_run_dir_is_never_a_link_and_stale_entries_are_replaced_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let elsewhere = root.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    // A run dir that is a symlink: no socket, nothing made where it points.
    let linked = root.join("linked");
    std::os::unix::fs::symlink(&elsewhere, &linked).unwrap();
    let me = session(NetworkMode::Host, Some(&linked));
    let ports = PortsSpec {
        forwards: Vec::new(),
        control_dir: Some(linked.clone()),
    };
    let service = PortService::start_for(&me, &ports, 1).expect("start");
    assert!(
        service.warnings()[0].contains("is not a directory airlock can use"),
        "{:?}",
        service.warnings()
    );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    drop(service);
    // A loose mode is tightened; a planted link at the socket's and the record's name is
    // replaced, and what it pointed at is untouched.
    let run = root.join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o777)).unwrap();
    let victim = root.join("victim");
    std::fs::write(&victim, "keep me").unwrap();
    let me = session(NetworkMode::Host, Some(&run));
    let sock = run.join(socket_name(me.pid));
    let record = run.join(format!("{}.json", me.pid));
    std::os::unix::fs::symlink(&victim, &sock).unwrap();
    std::os::unix::fs::symlink(&victim, &record).unwrap();
    let ports = PortsSpec {
        forwards: Vec::new(),
        control_dir: Some(run.clone()),
    };
    let service = PortService::start_for(&me, &ports, 1).expect("start");
    assert!(service.warnings().is_empty(), "{:?}", service.warnings());
    let mode = std::fs::metadata(&run).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    use std::os::unix::fs::FileTypeExt as _;
    assert!(
        std::fs::symlink_metadata(&sock)
            .unwrap()
            .file_type()
            .is_socket()
    );
    assert!(std::fs::symlink_metadata(&record).unwrap().is_file());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    assert_eq!(ask(&sock, &Request::Ports, ASK).unwrap(), "[]");
    drop(service);
}

#[test]
fn the_control_socket_answers_only_its_own_uid() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root, to connect as another user");
        return;
    }
    let Some((uid, gid)) = other_user() else {
        eprintln!("skipped: no airlock-test or nobody user");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = dir.path().join("run");
    let me = session(NetworkMode::Host, Some(&run));
    let ports = PortsSpec {
        forwards: Vec::new(),
        control_dir: Some(run.clone()),
    };
    let service = PortService::start_for(&me, &ports, 1).expect("start");
    let sock = run.join(socket_name(me.pid));
    // Opened up by hand, as a mistake would: the uid check still refuses.
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777)).unwrap();
    let client = format!(
        "import socket; s = socket.socket(socket.AF_UNIX); s.connect({:?}); \
         s.sendall(b'forward 3000:3000\\n'); print(s.recv(500).decode(), end='')",
        sock.display().to_string()
    );
    let mut cmd = Command::new("/usr/bin/python3");
    cmd.args(["-c", &client]);
    use std::os::unix::process::CommandExt as _;
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(gid) != 0
                || libc::setuid(uid) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let answer = String::from_utf8_lossy(&out.stdout);
    assert!(
        answer.starts_with(&format!(
            "error refused: uid {uid} is not this session's user"
        )),
        "{answer} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        ask(&sock, &Request::Ports, ASK).unwrap(),
        "[]",
        "its own user is answered"
    );
    drop(service);
}

fn other_user() -> Option<(u32, u32)> {
    let wanted = std::env::var("AIRLOCK_TEST_USER").unwrap_or_else(|_| "airlock-test".into());
    for name in [wanted.as_str(), "nobody"] {
        let cname = std::ffi::CString::new(name).unwrap();
        // SAFETY: the record is copied out at once.
        let pw = unsafe { libc::getpwnam(cname.as_ptr()) };
        if !pw.is_null() {
            // SAFETY: a non-null record from getpwnam.
            return Some(unsafe { ((*pw).pw_uid, (*pw).pw_gid) });
        }
    }
    None
}

#[test]
fn session_records_list_live_sessions_and_drop_stale_ones() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().to_path_buf();
    let me = session(NetworkMode::None, Some(&run));
    let write = |name: &str, r: &SessionRecord| {
        std::fs::write(run.join(name), serde_json::to_vec(r).unwrap()).unwrap()
    };
    write(&format!("{}.json", me.pid), &me);
    let stale = SessionRecord {
        pid: 1,
        started: 12345678,
        ..me.clone()
    };
    write("1.json", &stale);
    std::fs::write(run.join("1.sock"), "").unwrap();
    // A record under another pid's name, a link and junk are skipped.
    write("77.json", &me);
    let target: PathBuf = run.join(format!("{}.json", me.pid));
    std::os::unix::fs::symlink(&target, run.join("2.json")).unwrap();
    std::fs::write(run.join("3.json"), "{not json").unwrap();
    assert_eq!(sessions::list(&run), [me]);
    assert!(
        !run.join("1.json").exists() && !run.join("1.sock").exists(),
        "stale removed"
    );
    assert!(run.join("3.json").exists(), "junk is left alone");
}
