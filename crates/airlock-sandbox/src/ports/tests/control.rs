//! The control socket: its requests and caps, callback forwards, host network sessions, its
//! directory, who it answers, and the session records.

use super::*;

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
    let service = PortService::start_for(&me, &ports, sandbox.pid())
        .map(serving)
        .expect("start");
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
    let egress = ask(
        &socket,
        &Request::Forward {
            host: free_port(),
            sandbox: crate::native::EGRESS_PORT,
        },
        ASK,
    );
    assert!(
        matches!(&egress, Err(AskError::Refused(r)) if r.contains("egress proxy's")),
        "{egress:?}"
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
fn a_callback_forward_ends_soon_after_its_first_answered_request_or_at_its_deadline() {
    let inside = free_port();
    let Some(sandbox) = FakeSandbox::start(&["echo", &inside.to_string()]) else {
        return;
    };
    let service = PortService::start_for(
        &session(NetworkMode::Proxy, None),
        &PortsSpec::default(),
        sandbox.pid(),
    )
    .map(serving)
    .expect("start");
    let shared = &service.shared;
    shared.open_callback(inside).expect("callback");
    // A connection that carried nothing back (a browser's preconnect) does not end it.
    drop(TcpStream::connect((Ipv4Addr::LOCALHOST, inside)).unwrap());
    std::thread::sleep(Duration::from_millis(200));
    assert!(listening(inside));
    assert_eq!(echo_through(inside), "ping");
    // A follow-up on a new connection (codex's redirect to /success) within the grace.
    assert_eq!(echo_through(inside), "ping", "a follow-up request");
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
    let (run, me, ports) = host_session_in(dir.path());
    let service = PortService::start_for(&me, &ports, 1)
        .map(serving)
        .expect("start");
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
    let service = PortService::start_for(&me, &ports, 1)
        .map(serving)
        .expect("start");
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
    let service = PortService::start_for(&me, &ports, 1)
        .map(serving)
        .expect("start");
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
    let service = PortService::start_for(&me, &ports, 1)
        .map(serving)
        .expect("start");
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

#[test]
fn the_control_socket_and_record_come_once_the_workload_may_run() {
    let dir = tempfile::tempdir().unwrap();
    let (run, me, ports) = host_session_in(dir.path());
    // As a launch leaves it until `R`: the forwards made, nothing to find yet.
    let mut service = PortService::start_for(&me, &ports, 1).expect("start");
    let sock = run.join(socket_name(me.pid));
    let record = run.join(format!("{}.json", me.pid));
    assert!(!sock.exists() && !record.exists(), "made before serve");
    service.serve();
    assert!(record.is_file(), "no record once serving");
    assert_eq!(ask(&sock, &Request::Ports, ASK).unwrap(), "[]");
    drop(service);
    assert!(!sock.exists() && !record.exists());
}

/// A host-network session whose control socket goes in `<dir>/run`.
fn host_session_in(dir: &Path) -> (PathBuf, SessionRecord, PortsSpec) {
    let run = dir.join("run");
    let me = session(NetworkMode::Host, Some(&run));
    let ports = PortsSpec {
        forwards: Vec::new(),
        control_dir: Some(run.clone()),
    };
    (run, me, ports)
}
