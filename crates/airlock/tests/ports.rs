//! Port forwards end to end: the real binary, real sandboxes, real listeners. `--publish` and
//! `[[network.ports]]` (inbound and outbound), `airlock forward` into a running session, `airlock
//! sessions`, the bad inputs, and the attacks: a port in use, other local users, the session's end
//! (also by SIGKILL), an unprivileged caller. The OAuth callbacks through the bridge are in
//! `tests/bridge/callbacks.rs`; the supervisor's side alone in `airlock-sandbox`'s `ports::tests`.

mod common;

use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{AIRLOCK, TestHome, sandbox_starts};

const DEADLINE: Duration = Duration::from_secs(30);

/// Waits for `cond` with a deadline; panics naming `what` when it never holds.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
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

/// `GET path` on 127.0.0.1:port: the body, None when nothing answers.
fn get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.0 200").then(|| body.to_owned())
}

fn port_is_free(port: u16) -> bool {
    TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok()
}

/// Whether python3 and the sandbox work here; says why not.
fn available() -> bool {
    if !Path::new("/usr/bin/python3").exists() {
        eprintln!("skipped: /usr/bin/python3 is missing (apt-get install python3)");
        return false;
    }
    sandbox_starts()
}

/// A shell line that serves `dir` (relative to the project) over HTTP on 127.0.0.1:PORT inside.
fn http_server(port: u16) -> String {
    format!("python3 -m http.server {port} --bind 127.0.0.1 --directory site >/dev/null 2>&1 &")
}

/// An `airlock run` left running until [`Running::stop`]: the workload runs `script`, then waits
/// for the stop file.
struct Running {
    child: Child,
    stop: PathBuf,
    log: PathBuf,
}

impl Running {
    fn start(h: &TestHome, options: &[&str], script: &str) -> Running {
        Running::start_as(h, Path::new(AIRLOCK), None, options, script)
    }

    /// The same with `airlock` as the binary, run as `user` when given.
    fn start_as(
        h: &TestHome,
        airlock: &Path,
        user: Option<(u32, u32)>,
        options: &[&str],
        script: &str,
    ) -> Running {
        let stop = h.project.join(".stop");
        let _ = fs::remove_file(&stop);
        let log = h.root.join(format!("airlock-{}.log", free_port()));
        let full = format!(
            "{script}\ntouch .started\nwhile [ ! -e {} ]; do sleep 0.05; done",
            stop.display()
        );
        let mut cmd = Command::new(airlock);
        cmd.arg("run")
            .args(options)
            .args(["--", "sh", "-c", &full])
            .current_dir(&h.project)
            .env_clear()
            .env("HOME", &h.home)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).unwrap());
        if let Some(user) = user {
            as_user(&mut cmd, user);
        }
        let child = cmd.spawn().expect("spawn airlock");
        Running { child, stop, log }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn stderr(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Lets the workload end; its exit status and stderr.
    fn stop(mut self) -> (std::process::ExitStatus, String) {
        fs::write(&self.stop, "").unwrap();
        let status = self.child.wait().unwrap();
        (status, self.stderr())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = fs::write(&self.stop, "");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A project with `site/index.html` holding `text`.
fn site(text: &str) -> TestHome {
    let h = TestHome::new("work/app");
    common::write(&h.project.join("site/index.html"), text);
    h
}

/// The listening sockets for `port` in `/proc/net/tcp`: their local addresses (hex).
fn listeners_of(port: u16) -> Vec<String> {
    let want = format!(":{port:04X}");
    fs::read_to_string("/proc/net/tcp")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            let local = *fields.get(1)?;
            (local.ends_with(&want) && fields.get(3) == Some(&"0A")).then(|| local.to_owned())
        })
        .collect()
}

/// Children of `parent` named `airlock-netns` (the forwards' helper).
fn helpers_of(parent: u32) -> Vec<u32> {
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            stat.split_once('(')
                .and_then(|(_, r)| r.rsplit_once(')'))
                .is_some_and(|(name, rest)| {
                    name == airlock_sandbox::ports::HELPER_NAME
                        && rest.split(' ').nth(2) == Some(parent.to_string().as_str())
                })
        })
        .collect()
}

/// The unprivileged account (root only): `AIRLOCK_TEST_USER`, else `airlock-test`, else nobody.
fn other_user() -> Option<(u32, u32)> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
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

/// Makes `cmd` run as uid:gid.
fn as_user(cmd: &mut Command, (uid, gid): (u32, u32)) {
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
}

fn chown_tree(path: &Path, (uid, gid): (u32, u32)) {
    let _ = std::os::unix::fs::lchown(path, Some(uid), Some(gid));
    if path.is_dir() && !path.is_symlink() {
        for entry in fs::read_dir(path).unwrap().flatten() {
            chown_tree(&entry.path(), (uid, gid));
        }
    }
}

#[test]
fn publish_opens_a_sandbox_server_on_the_hosts_loopback_only_until_the_session_ends() {
    if !available() {
        return;
    }
    let h = site("from the sandbox\n");
    let port = free_port();
    let publish = format!("{port}:8000");
    let run = Running::start(&h, &["--publish", &publish], &http_server(8000));
    wait_for("the published server", || get(port, "/").is_some());
    assert_eq!(get(port, "/").as_deref(), Some("from the sandbox\n"));
    // 127.0.0.1 only: one listener, on 0100007F, none on 0.0.0.0.
    assert_eq!(listeners_of(port), [format!("0100007F:{port:04X}")]);
    // Control: the sandbox's own port is not on the host's loopback.
    assert!(get(8000, "/").is_none_or(|b| b != "from the sandbox\n"));
    // Any local user can connect, as to any dev server (documented).
    if let Some(user) = other_user() {
        let mut curl = Command::new("curl");
        curl.args(["-s", "-m", "5", &format!("http://127.0.0.1:{port}/")]);
        as_user(&mut curl, user);
        let out = curl.output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "from the sandbox\n");
    }
    let helpers = helpers_of(run.pid());
    assert_eq!(helpers.len(), 1, "one helper makes sockets in the sandbox");
    let (status, stderr) = run.stop();
    assert!(status.success(), "{stderr}");
    // Nothing is left: the port is free, the helper gone.
    assert!(port_is_free(port));
    for helper in helpers {
        assert!(
            !Path::new(&format!("/proc/{helper}")).exists(),
            "helper {helper} left behind"
        );
    }
}

#[test]
fn two_sessions_with_their_own_ports_both_work_and_one_port_twice_is_refused_before_the_run() {
    if !available() {
        return;
    }
    let (a, b) = (site("a\n"), site("b\n"));
    let (pa, pb) = (free_port(), free_port());
    let run_a = Running::start(
        &a,
        &["--publish", &format!("{pa}:8000")],
        &http_server(8000),
    );
    let run_b = Running::start(
        &b,
        &["--publish", &format!("{pb}:8000")],
        &http_server(8000),
    );
    wait_for("both servers", || {
        get(pa, "/").is_some() && get(pb, "/").is_some()
    });
    assert_eq!(
        (get(pa, "/").unwrap(), get(pb, "/").unwrap()),
        ("a\n".into(), "b\n".into())
    );
    let c = site("c\n");
    let out = c
        .airlock(&[
            "run",
            "--publish",
            &format!("{pa}:8000"),
            "--",
            "touch",
            "ran",
        ])
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", common::report(&out));
    let err = common::stderr(&out);
    assert!(
        err.contains(&format!(
            "--publish {pa}:8000: the host's 127.0.0.1:{pa} is in use"
        )),
        "{err}"
    );
    assert!(!c.project.join("ran").exists(), "nothing ran");
    assert_eq!(
        get(pa, "/").as_deref(),
        Some("a\n"),
        "session a keeps its port"
    );
    drop((run_a, run_b));
}

#[test]
fn a_port_a_host_service_listens_on_is_refused_not_shared() {
    if !available() {
        return;
    }
    for addr in [Ipv4Addr::LOCALHOST, Ipv4Addr::UNSPECIFIED] {
        let service = TcpListener::bind((addr, 0)).unwrap();
        let port = service.local_addr().unwrap().port();
        let h = site("x");
        let out = h
            .airlock(&["run", "--publish", &port.to_string(), "--", "touch", "ran"])
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(125), "{}", common::report(&out));
        assert!(
            common::stderr(&out).contains("is in use"),
            "{}",
            common::report(&out)
        );
        assert!(!h.project.join("ran").exists());
        // The host service still gets its clients.
        let _c = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
        service.set_nonblocking(true).unwrap();
        wait_for("the service's client", || service.accept().is_ok());
    }
}

/// A host service on 127.0.0.1 answering every request with `body`.
fn host_service(body: &'static str) -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            let _ = write!(
                s,
                "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

#[test]
fn outbound_reaches_a_named_host_service_only_when_a_rule_names_it() {
    if !available() {
        return;
    }
    let port = host_service("host service");
    let h = TestHome::new("work/app");
    let probe = format!(
        "curl -s -m 5 http://127.0.0.1:5432/; echo \" [$?]\"; curl -s -m 5 http://127.0.0.1:{port}/; echo \" [$?]\""
    );
    // Control first: without a rule neither the sandbox port nor the host's is reachable.
    let out = h.run(&["run", "--", "sh", "-c", &probe]);
    assert_eq!(
        common::stdout(&out),
        " [7]\n [7]\n",
        "{}",
        common::report(&out)
    );
    let config = h.config(&format!(
        "[[network.ports]]\nhost = {port}\nsandbox = 5432\ndirection = \"out\"\n"
    ));
    let out = h.run(&["run", "--", "sh", "-c", &probe]);
    assert_eq!(
        common::stdout(&out),
        "host service [0]\n [7]\n",
        "{}",
        common::report(&out)
    );
    let err = common::stderr(&out);
    let warning = format!(
        "warning: {}: [[network.ports]] #1 (host = {port}, sandbox = 5432, direction = \"out\") lets \
         the sandbox reach the host's 127.0.0.1:{port}",
        config.display()
    );
    assert_eq!(err.matches(&warning).count(), 1, "warned once: {err}");
    // The same in --network none.
    let out = h.run(&["run", "--network", "none", "--", "sh", "-c", &probe]);
    assert_eq!(
        common::stdout(&out),
        "host service [0]\n [7]\n",
        "{}",
        common::report(&out)
    );
}

#[test]
fn bad_ports_are_refused_with_the_file_the_key_and_the_form() {
    if !available() {
        return;
    }
    let h = TestHome::new("work/app");
    let entry = |body: &str| format!("[[network.ports]]\n{body}\n");
    let cases = [
        (
            entry("host = 0\nsandbox = 1\ndirection = \"in\""),
            "#1: host = 0 is not valid; expected a port number from 1 to 65535",
        ),
        (
            entry("host = 65536\nsandbox = 1\ndirection = \"in\""),
            "host = 65536 is not valid",
        ),
        (
            entry("host = 3000\ndirection = \"in\""),
            "#1 has no `sandbox`",
        ),
        (
            entry("host = 3000\nsandbox = 3000"),
            "#1 has no `direction`",
        ),
        (
            entry("host = 3000\nsandbox = 3000\ndirection = \"both\""),
            "direction = \"both\" is not valid; expected \"in\" or \"out\"",
        ),
        (
            entry("host = 3000\nsandbox = 3000\ndirection = \"in\"")
                + &entry("host = 3000\nsandbox = 4000\ndirection = \"in\""),
            "#2 (host = 3000, sandbox = 4000, direction = \"in\") clashes with",
        ),
        (
            entry("host = 3000\nsandbox = 3000\ndirection = \"in\"")
                + &entry("host = 3000\nsandbox = 3000\ndirection = \"in\""),
            "the same forward twice",
        ),
        (
            entry("host = 9000\nsandbox = 3128\ndirection = \"in\""),
            "is the egress proxy's",
        ),
    ];
    for (text, says) in cases {
        let file = h.config(&text);
        let out = h.run(&["run", "--", "touch", "ran"]);
        assert_eq!(
            out.status.code(),
            Some(125),
            "{text}: {}",
            common::report(&out)
        );
        let err = common::stderr(&out);
        assert!(err.contains(says), "{says:?}: {err}");
        assert!(
            err.contains(&file.display().to_string()),
            "names the file: {err}"
        );
        assert!(err.contains("[[network.ports]]"), "names the table: {err}");
        assert!(!h.project.join("ran").exists(), "nothing ran for {text}");
    }
    h.config("");
    for (flag, says) in [
        ("0", "is not a port from 1 to 65535"),
        ("70000", "is not a port from 1 to 65535"),
        ("abc", "is not a port number"),
        ("80:", "is not a port number"),
    ] {
        let out = h.run(&["run", "--publish", flag, "--", "touch", "ran"]);
        assert_eq!(out.status.code(), Some(2), "{}", common::report(&out));
        let err = common::stderr(&out);
        assert!(
            err.contains(says) && err.contains("HOST[:SANDBOX]"),
            "{flag}: {err}"
        );
    }
    let out = h.run(&[
        "run",
        "--network",
        "host",
        "--publish",
        "3000",
        "--",
        "touch",
        "ran",
    ]);
    assert_eq!(out.status.code(), Some(125), "{}", common::report(&out));
    assert!(common::stderr(&out).contains("not needed with --network host"));
    assert!(!h.project.join("ran").exists());
}

#[test]
fn forward_into_a_running_session_and_sessions_lists_it() {
    if !available() {
        return;
    }
    let h = site("forwarded\n");
    let run = Running::start(&h, &[], &http_server(8000));
    wait_for("the session", || h.project.join(".started").exists());
    let port = free_port();
    let mapping = format!("{port}:8000");
    let out = h.run(&["forward", &mapping]);
    assert!(out.status.success(), "{}", common::report(&out));
    assert!(
        common::stdout(&out).contains(&format!(
            "the host's 127.0.0.1:{port} now reaches 127.0.0.1:8000"
        )),
        "{}",
        common::report(&out)
    );
    wait_for("the forwarded server", || get(port, "/").is_some());
    assert_eq!(get(port, "/").as_deref(), Some("forwarded\n"));
    // The same host port again: refused by the session, nothing else changes.
    let again = h.run(&["forward", &mapping]);
    assert_eq!(again.status.code(), Some(125));
    assert!(
        common::stderr(&again).contains("is in use"),
        "{}",
        common::report(&again)
    );
    let sessions = h.run(&["sessions", "--json"]);
    let listed: serde_json::Value = serde_json::from_str(&common::stdout(&sessions)).unwrap();
    let name = airlock_sandbox::state::sandbox_name(&h.project);
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    let s = &listed[0];
    assert_eq!(s["sandbox"], name.as_str());
    assert_eq!(s["project"], h.project.display().to_string());
    assert_eq!(s["pid"], run.pid());
    assert_eq!(s["network"], "proxy");
    assert_eq!(
        s["ports"],
        serde_json::json!([{"host": port, "sandbox": 8000, "direction": "in", "kind": "forward", "expires_in_secs": null}])
    );
    let table = common::stdout(&h.run(&["sessions"]));
    assert!(table.contains(&format!("{port}→8000 (forward)")), "{table}");
    // The other ways to name a session, and the wrong ones.
    let by_pid = h.run(&[
        "forward",
        "--session",
        &run.pid().to_string(),
        &free_port().to_string(),
    ]);
    assert!(by_pid.status.success(), "{}", common::report(&by_pid));
    let by_name = h.run(&[
        "forward",
        "--sandbox",
        &name,
        &format!("{}:8000", free_port()),
    ]);
    assert!(by_name.status.success(), "{}", common::report(&by_name));
    let nope = h.run(&["forward", "--sandbox", "nope-12345678", "9999"]);
    assert!(common::stderr(&nope).contains("sandbox nope-12345678 has no running session"));
    let (status, stderr) = run.stop();
    assert!(status.success(), "{stderr}");
    assert!(port_is_free(port), "the forward ended with the session");
    assert_eq!(common::stdout(&h.run(&["sessions", "--json"])).trim(), "[]");
    assert_eq!(
        common::stdout(&h.run(&["sessions"])).trim(),
        "no running sessions"
    );
}

#[test]
fn a_killed_supervisor_leaves_no_listener_helper_or_live_record() {
    if !available() {
        return;
    }
    let h = site("x\n");
    let port = free_port();
    let run = Running::start(
        &h,
        &["--publish", &format!("{port}:8000")],
        &http_server(8000),
    );
    wait_for("the published server", || get(port, "/").is_some());
    let helpers = helpers_of(run.pid());
    assert_eq!(helpers.len(), 1);
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(run.pid() as libc::pid_t, libc::SIGKILL) };
    let mut run = run;
    let _ = run.child.wait();
    wait_for("the port to be free", || port_is_free(port));
    wait_for("the helper to end", || {
        !Path::new(&format!("/proc/{}", helpers[0])).exists()
    });
    assert_eq!(common::stdout(&h.run(&["sessions", "--json"])).trim(), "[]");
    let run_dir = h.home.join(".local/state/airlock/run");
    assert!(
        !run_dir.join(format!("{}.json", run.pid())).exists(),
        "the stale record is gone"
    );
}

#[test]
fn the_control_socket_is_out_of_the_sandboxs_reach() {
    if !available() {
        return;
    }
    let h = TestHome::new("work/app");
    let run_dir = h.home.join(".local/state/airlock/run");
    let probe = format!(
        "ls -d {dir} 2>&1; ls {dir}/*.sock 2>&1; mkdir -p {dir} 2>&1 && touch {dir}/planted.sock && echo planted",
        dir = run_dir.display()
    );
    let run = Running::start(&h, &[], &format!("({probe}) > probe.txt"));
    wait_for("the probe", || h.project.join(".started").exists());
    let probe = fs::read_to_string(h.project.join("probe.txt")).unwrap();
    assert!(probe.contains("No such file or directory"), "{probe}");
    // Whatever the sandbox made lives in its synthetic home, not in the host's run dir.
    let host_entries: Vec<_> = fs::read_dir(&run_dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        host_entries.len(),
        2,
        "the socket and the record: {host_entries:?}"
    );
    assert!(!run_dir.join("planted.sock").exists());
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&fs::metadata(&run_dir).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o700);
    drop(run);
}

#[test]
fn an_unprivileged_caller_publishes_and_forwards_too() {
    if !available() {
        return;
    }
    let Some(user) = other_user() else {
        eprintln!("skipped: needs root to run airlock as an unprivileged user (AIRLOCK_TEST_USER)");
        return;
    };
    let h = site("unprivileged\n");
    // The binary where the user can run it, the whole tree theirs.
    let bin = h.root.join("bin");
    fs::create_dir(&bin).unwrap();
    fs::copy(AIRLOCK, bin.join("airlock")).unwrap();
    chown_tree(&h.root, user);
    let airlock = bin.join("airlock");
    let port = free_port();
    let publish = format!("{port}:8000");
    let run = Running::start_as(
        &h,
        &airlock,
        Some(user),
        &["--publish", &publish],
        &http_server(8000),
    );
    wait_for("the published server", || get(port, "/").is_some());
    assert_eq!(get(port, "/").as_deref(), Some("unprivileged\n"));
    let forwarded = free_port();
    let mut forward = Command::new(&airlock);
    forward
        .args(["forward", &format!("{forwarded}:8000")])
        .current_dir(&h.project)
        .env_clear()
        .env("HOME", &h.home)
        .env("PATH", "/usr/bin:/bin");
    as_user(&mut forward, user);
    let out = forward.output().unwrap();
    assert!(out.status.success(), "{}", common::report(&out));
    wait_for("the forward", || get(forwarded, "/").is_some());
    // Root is not the session's user: its requests are refused even though it can reach the
    // socket (0700 stops every other user).
    let root_asks = h.run(&[
        "forward",
        "--session",
        &run.pid().to_string(),
        &free_port().to_string(),
    ]);
    assert!(
        common::stderr(&root_asks).contains("refused: uid 0 is not this session's user"),
        "{}",
        common::report(&root_asks)
    );
    let (status, stderr) = run.stop();
    assert!(status.success(), "{stderr}");
    assert!(port_is_free(port) && port_is_free(forwarded));
}
