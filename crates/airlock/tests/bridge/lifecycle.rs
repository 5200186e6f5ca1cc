//! Daemon start-up and shutdown: refusals on bad state, port fallback, stale and live sockets, a
//! socket path too long for sun_path, graceful SIGTERM.

use std::fs;
use std::process::Stdio;

use crate::harness::{World, get_tcp};

fn refused_start(w: &World) -> String {
    let out = w
        .daemon_command(0)
        .stdout(Stdio::null())
        .output()
        .expect("run the daemon");
    assert!(!out.status.success(), "the daemon must refuse to start");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn an_empty_or_corrupt_token_is_refused_with_a_clear_message() {
    let w = World::installed();
    fs::write(w.state.join("token"), "").unwrap();
    let err = refused_start(&w);
    assert!(
        err.contains("token") && err.contains("is empty") && err.contains("airlock bridge install"),
        "{err}"
    );
    fs::write(w.state.join("token"), "not-a-token\n").unwrap();
    let err = refused_start(&w);
    assert!(err.contains("11 bytes long"), "{err}");
    fs::remove_file(w.state.join("token")).unwrap();
    let err = refused_start(&w);
    assert!(
        err.contains("does not exist") && err.contains("airlock bridge install"),
        "{err}"
    );
    assert!(
        !w.socket().exists() && !w.state.join("port").exists(),
        "nothing was bound"
    );
}

#[test]
fn a_missing_state_dir_says_install_first() {
    let w = World::new();
    let err = refused_start(&w);
    assert!(
        err.contains("not installed") && err.contains("airlock bridge install"),
        "{err}"
    );
}

#[test]
fn a_bad_host_command_entry_is_refused() {
    let w = World::installed();
    fs::create_dir_all(w.config_file().parent().unwrap()).unwrap();
    fs::write(
        w.config_file(),
        "[bridge.commands.xdg-open]\nverbs = [\"x\"]\n",
    )
    .unwrap();
    let err = refused_start(&w);
    assert!(
        err.contains("[bridge.commands.xdg-open]") && err.contains("shim names"),
        "{err}"
    );
}

#[test]
fn a_busy_preferred_port_falls_back_to_an_ephemeral_one() {
    let busy = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let busy_port = busy.local_addr().unwrap().port();
    let mut w = World::installed();
    let cmd = w.daemon_command(busy_port);
    w.start_with(cmd);
    assert_ne!(w.port(), busy_port);
    assert_eq!(get_tcp(w.port(), "/healthz").map(|r| r.0), Some(200));
}

#[test]
fn the_preferred_port_is_used_when_free() {
    let free = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    let mut w = World::installed();
    let cmd = w.daemon_command(port);
    w.start_with(cmd);
    // Another process may grab a just-freed port; only a mismatch without a busy port would be wrong.
    if w.port() != port {
        assert!(
            std::net::TcpListener::bind(("127.0.0.1", port)).is_err(),
            "fell back from a free port"
        );
    }
}

#[test]
fn a_stale_socket_is_replaced_and_a_live_one_refused() {
    let mut w = World::installed();
    {
        let _stale = std::os::unix::net::UnixListener::bind(w.socket()).unwrap();
    }
    assert!(w.socket().exists(), "a stale socket file is left behind");
    w.start();
    assert_eq!(w.post("/open", r#"{"url":"https://example.com/"}"#).0, 204);
    // A second daemon on the same state dir finds the socket alive and refuses.
    let err = refused_start(&w);
    assert!(err.contains("already serving"), "{err}");
    assert_eq!(
        w.post("/open", r#"{"url":"https://example.com/"}"#).0,
        204,
        "the first one still serves"
    );
}

#[test]
fn a_home_too_long_for_the_socket_path_means_tcp_only() {
    let mut w = World::installed();
    // HOME so deep that HOME/.local/state/airlock/bridge/run/bridge.sock exceeds sun_path.
    let long_home = w
        .base()
        .join(format!("{}/{}", "h".repeat(60), "o".repeat(40)));
    let state = long_home.join(".local/state/airlock/bridge");
    fs::create_dir_all(state.join("run")).unwrap();
    fs::copy(w.state.join("token"), state.join("token")).unwrap();
    w.home = long_home;
    w.state = state;
    w.write_config("");
    // No --state-dir: the daemon derives it from the long HOME, as the unit would.
    let cmd = w.daemon_command_from_home(0);
    w.start_with(cmd);
    assert!(!w.socket().exists());
    let log = w.audit_log();
    assert!(
        log.contains("too long for a socket address; serving TCP only"),
        "{log}"
    );
    // The shim falls back to TCP because connecting to the socket fails.
    let out = w.shim("xdg-open", &["https://example.com/tcp"], b"", &[]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert_eq!(w.calls(), [["xdg-open", "https://example.com/tcp"]]);
}

#[test]
fn a_client_that_never_finishes_its_head_is_cut_off() {
    use std::io::{Read as _, Write as _};
    let mut w = World::installed();
    w.start();
    let mut stream = std::os::unix::net::UnixStream::connect(w.socket()).unwrap();
    stream
        .write_all(b"POST /open HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(15)))
        .unwrap();
    let started = std::time::Instant::now();
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    let waited = started.elapsed();
    assert!(
        waited >= std::time::Duration::from_secs(4) && waited < std::time::Duration::from_secs(12),
        "closed after {waited:?}"
    );
}

#[test]
fn sigterm_stops_gracefully_and_cleans_up() {
    let mut w = World::installed();
    w.start();
    let (stderr, status) = w.stop();
    assert!(status.success(), "{status:?}: {stderr}");
    assert!(stderr.contains("stopped"), "{stderr}");
    assert!(!w.socket().exists(), "the socket is removed");
    assert!(!w.state.join("pid").exists(), "the pid file is removed");
    assert!(w.state.join("token").exists(), "the token stays");
}

#[test]
fn state_files_have_the_contract_modes() {
    use std::os::unix::fs::PermissionsExt as _;
    let mut w = World::installed();
    w.start();
    let mode = |p: &std::path::Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&w.state), 0o700);
    assert_eq!(mode(&w.state.join("run")), 0o700);
    assert_eq!(mode(&w.socket()), 0o600);
    assert_eq!(mode(&w.state.join("token")), 0o600);
    assert_eq!(mode(&w.state.join("log")), 0o600);
    assert_eq!(mode(&w.state.join("port")), 0o644);
    assert_eq!(mode(&w.state.join("pid")), 0o644);
    let pid: u32 = fs::read_to_string(w.state.join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(pid, w.daemon.as_ref().unwrap().id());
}

#[test]
fn a_socket_that_cannot_be_bound_means_tcp_only() {
    let mut w = World::installed();
    fs::remove_dir(w.state.join("run")).unwrap();
    fs::write(w.state.join("run"), "not a directory").unwrap();
    w.start();
    let log = w.audit_log();
    assert!(log.contains("serving TCP only"), "{log}");
    let out = w.shim("xdg-open", &["https://example.com/fallback"], b"", &[]);
    assert!(out.status.success());
    assert_eq!(w.calls(), [["xdg-open", "https://example.com/fallback"]]);
}

/// ~1,100 idle connections (more than a default fd limit of 1024) neither starve the daemon nor
/// make it spin: the ones over the cap wait in the backlog, idle ones are closed after the head
/// timeout, and a real request is answered meanwhile.
#[test]
fn a_thousand_idle_connections_do_not_starve_the_daemon() {
    use std::os::unix::process::CommandExt as _;
    let mut w = World::installed();
    // Started as systemd starts user services: a soft limit of 1024 descriptors.
    let mut cmd = w.daemon_command(0);
    // SAFETY: setrlimit is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            let mut limit = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
            limit.rlim_cur = limit.rlim_cur.min(1024);
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
            Ok(())
        });
    }
    w.start_with(cmd);
    // This test process needs the descriptors too.
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid out-pointer, then the values just read.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        if limit.rlim_max < 1400 {
            println!(
                "SKIP a_thousand_idle_connections: RLIMIT_NOFILE hard limit {}",
                limit.rlim_max
            );
            return;
        }
        limit.rlim_cur = limit.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
    }
    let idle: Vec<_> = (0..1100)
        .filter_map(|_| std::os::unix::net::UnixStream::connect(w.socket()).ok())
        .collect();
    assert!(idle.len() >= 1000, "only {} connections opened", idle.len());
    let started = std::time::Instant::now();
    let (status, body) = w.post("/open", r#"{"url":"https://example.com/busy"}"#);
    assert_eq!(status, 204, "{body}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(3),
        "answered after {:?}",
        started.elapsed()
    );
    drop(idle);
}
