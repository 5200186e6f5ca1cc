//! The portal proxy against real programs: a private `dbus-daemon`, a fake portal (and a fake
//! secrets service) in Python, xdg-dbus-proxy started by `PortalProxy`, and clients (`gdbus`,
//! `dbus-send`) talking through the proxy's socket. Skipped, with the reason printed, when one of
//! the programs is missing.

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use airlock_sockets::portal::{self, PortalProxy};

#[path = "support/dbus.rs"]
mod dbus;

use dbus::{Bus, PROXY, address, dbus_send, gdbus_call, text, tools, wait_for};

fn notify(socket: &Path, id: &str, title: &str) -> Output {
    gdbus_call(
        &address(socket),
        portal::PORTAL_NAME,
        portal::PORTAL_PATH,
        "org.freedesktop.portal.Notification.AddNotification",
        &[
            id,
            &format!("{{'title': <'{title}'>, 'body': <'from the sandbox'>}}"),
        ],
    )
}

fn assert_denied(out: &Output, error: &str) {
    assert!(!out.status.success(), "expected a refusal: {}", text(out));
    assert!(text(out).contains(error), "expected {error}: {}", text(out));
}

#[test]
fn notifications_reach_the_portal_and_nothing_else_does() {
    let Some(tools) = tools() else { return };
    let bus = Bus::start(&tools);
    let proxy = bus.proxy("session");
    let socket = proxy.socket();
    let via = address(socket);

    // The portal's notification interface: both methods arrive, from the proxy's pid.
    let out = notify(socket, "id1", "hello");
    assert!(out.status.success(), "{}", text(&out));
    let out = gdbus_call(
        &via,
        portal::PORTAL_NAME,
        portal::PORTAL_PATH,
        "org.freedesktop.portal.Notification.RemoveNotification",
        &["id1"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let log = bus.calls_log();
    assert!(
        log.contains(&format!(
            "AddNotification {} id1 title=hello pid={}\n",
            portal::PORTAL_PATH,
            proxy.pid()
        )),
        "{log}"
    );
    assert!(log.contains("RemoveNotification id1\n"), "{log}");

    // Another interface on the portal's name, by its well-known and by its unique name.
    let openuri = "org.freedesktop.portal.OpenURI.OpenURI";
    let open_args = ["", "https://example.com/", "{}"];
    let out = gdbus_call(
        &via,
        portal::PORTAL_NAME,
        portal::PORTAL_PATH,
        openuri,
        &open_args,
    );
    assert_denied(&out, "AccessDenied");
    let portal_owner = bus.owner(portal::PORTAL_NAME);
    let out = gdbus_call(
        &via,
        &portal_owner,
        portal::PORTAL_PATH,
        openuri,
        &open_args,
    );
    assert_denied(&out, "AccessDenied");
    // The notification interface at another object path.
    let out = gdbus_call(
        &via,
        portal::PORTAL_NAME,
        "/other",
        "org.freedesktop.portal.Notification.AddNotification",
        &["id2", "{'title': <'elsewhere'>}"],
    );
    assert_denied(&out, "AccessDenied");
    // The portal's properties and introspection (they would list the other portals).
    for method in [
        "org.freedesktop.DBus.Properties.GetAll",
        "org.freedesktop.DBus.Introspectable.Introspect",
    ] {
        let args: &[&str] = if method.ends_with("GetAll") {
            &["string:org.freedesktop.portal.OpenURI"]
        } else {
            &[]
        };
        let out = dbus_send(&via, portal::PORTAL_NAME, portal::PORTAL_PATH, method, args);
        assert_denied(&out, "AccessDenied");
    }

    // Another service: invisible by name, refused by its unique name too.
    let ping = "org.freedesktop.Secret.Service.Ping";
    let secrets_path = "/org/freedesktop/secrets";
    let out = dbus_send(&via, "org.freedesktop.secrets", secrets_path, ping, &[]);
    assert_denied(&out, "ServiceUnknown");
    let secrets_owner = bus.owner("org.freedesktop.secrets");
    let out = dbus_send(&via, &secrets_owner, secrets_path, ping, &[]);
    assert!(!out.status.success(), "{}", text(&out));
    let out = dbus_send(
        &via,
        "org.freedesktop.DBus",
        "/org/freedesktop/DBus",
        "org.freedesktop.DBus.GetNameOwner",
        &["string:org.freedesktop.secrets"],
    );
    assert_denied(&out, "NameHasNoOwner");

    // ListNames: the bus, the portal (and its owner), the client itself; never the secrets.
    let out = dbus_send(
        &via,
        "org.freedesktop.DBus",
        "/org/freedesktop/DBus",
        "org.freedesktop.DBus.ListNames",
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));
    let names = String::from_utf8_lossy(&out.stdout);
    assert!(
        names.contains("\"org.freedesktop.portal.Desktop\""),
        "{names}"
    );
    assert!(!names.contains("org.freedesktop.secrets"), "{names}");
    assert!(!names.contains(&format!("\"{secrets_owner}\"")), "{names}");
    let listed = names.matches("string \"").count();
    assert!(listed <= 4, "more names than the proxy allows: {names}");

    // Owning the portal's name, monitoring the bus.
    let out = dbus_send(
        &via,
        "org.freedesktop.DBus",
        "/org/freedesktop/DBus",
        "org.freedesktop.DBus.RequestName",
        &["string:org.freedesktop.portal.Desktop", "uint32:0"],
    );
    assert_denied(&out, "AccessDenied");
    let out = dbus_send(
        &via,
        "org.freedesktop.DBus",
        "/org/freedesktop/DBus",
        "org.freedesktop.DBus.Monitoring.BecomeMonitor",
        &["array:string:", "uint32:0"],
    );
    assert_denied(&out, "AccessDenied");

    let log = bus.calls_log();
    assert!(!log.contains("OpenURI"), "{log}");
    assert!(!log.contains("id2"), "{log}");
    assert!(!log.contains("secrets Ping"), "{log}");
}

#[test]
fn only_the_notification_signal_is_broadcast_to_the_sandbox() {
    let Some(tools) = tools() else { return };
    let bus = Bus::start(&tools);
    let proxy = bus.proxy("session");
    let mut monitor = Command::new("gdbus")
        .args(["monitor", "--address", &address(proxy.socket())])
        .args(["--dest", portal::PORTAL_NAME])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = monitor.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let recv = |what: &str| -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut seen = Vec::new();
        while Instant::now() < deadline {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(line) => {
                    let done = line.contains(what);
                    seen.push(line);
                    if done {
                        return seen;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        panic!("gdbus monitor never printed {what}: {seen:?}");
    };
    recv("is owned by");
    // gdbus subscribes right after; give its AddMatch a moment to reach the bus.
    std::thread::sleep(Duration::from_millis(300));
    let out = dbus_send(
        &bus.address,
        portal::PORTAL_NAME,
        portal::PORTAL_PATH,
        "test.Control.Emit",
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));
    let seen = recv("ActionInvoked");
    // Both signals were sent back to back, SettingChanged second: anything still queued arrives
    // within this wait.
    std::thread::sleep(Duration::from_millis(500));
    let late: Vec<String> = rx.try_iter().collect();
    let _ = monitor.kill();
    let _ = monitor.wait();
    let all = [seen, late].concat().join("\n");
    assert!(
        all.contains("org.freedesktop.portal.Notification.ActionInvoked"),
        "{all}"
    );
    assert!(!all.contains("SettingChanged"), "{all}");
}

#[test]
fn drop_stops_the_proxy_and_removes_its_socket() {
    let Some(tools) = tools() else { return };
    let bus = Bus::start(&tools);
    let proxy = bus.proxy("session");
    let pid = proxy.pid();
    let socket = proxy.socket().to_path_buf();
    assert!(Path::new(&format!("/proc/{pid}")).exists());
    assert!(socket.exists());
    drop(proxy);
    // Reaped: the pid is gone, not a zombie.
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "pid {pid} is still there"
    );
    assert!(!socket.exists(), "{} is still there", socket.display());
}

/// Run by `the_proxy_exits_when_its_owner_is_killed` in a process of its own: starts a proxy,
/// says its pid, and waits to be killed.
#[test]
#[ignore = "run by the_proxy_exits_when_its_owner_is_killed"]
fn owner_process() {
    let (Some(bus), Some(socket)) = (
        std::env::var_os("AIRLOCK_PORTAL_TEST_BUS"),
        std::env::var_os("AIRLOCK_PORTAL_TEST_SOCKET"),
    ) else {
        return;
    };
    let proxy =
        PortalProxy::start(Path::new(PROXY), bus.to_str().unwrap(), Path::new(&socket)).unwrap();
    println!("proxy pid={}", proxy.pid());
    std::thread::sleep(Duration::from_secs(60));
}

/// A pid that is gone or a zombie (a container's init may not reap orphans).
fn exited(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
    }
}

#[test]
fn the_proxy_exits_when_its_owner_is_killed() {
    let Some(tools) = tools() else { return };
    let bus = Bus::start(&tools);
    let socket = bus.session_dir("session").join("bus");
    let mut owner = Command::new(std::env::current_exe().unwrap())
        .args(["owner_process", "--exact", "--ignored", "--nocapture"])
        .env("AIRLOCK_PORTAL_TEST_BUS", &bus.address)
        .env("AIRLOCK_PORTAL_TEST_SOCKET", &socket)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut pid = None;
    for line in BufReader::new(owner.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(n) = line.strip_prefix("proxy pid=") {
            pid = Some(n.trim().parse::<u32>().unwrap());
            break;
        }
    }
    let pid = pid.expect("the owner process never started its proxy");
    let out = notify(&socket, "owned", "owned");
    assert!(out.status.success(), "{}", text(&out));
    // SIGKILL: no destructor runs; only the closed --fd pipe tells the proxy.
    owner.kill().unwrap();
    owner.wait().unwrap();
    wait_for("the orphaned proxy to exit", Duration::from_secs(5), || {
        exited(pid)
    });
}

#[test]
fn two_sessions_do_not_disturb_each_other() {
    let Some(tools) = tools() else { return };
    let bus = Bus::start(&tools);
    let first = bus.proxy("first");
    let second = bus.proxy("second");
    assert_ne!(first.socket(), second.socket());
    let out = notify(first.socket(), "a", "first");
    assert!(out.status.success(), "{}", text(&out));
    let out = notify(second.socket(), "b", "second");
    assert!(out.status.success(), "{}", text(&out));

    // A third start on the first session's socket is refused, and the first proxy keeps it.
    let err = PortalProxy::start(Path::new(PROXY), &bus.address, first.socket()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists, "{err}");
    let out = notify(first.socket(), "a2", "first again");
    assert!(out.status.success(), "{}", text(&out));

    // Ending the first session leaves the second one's proxy running.
    let first_socket = first.socket().to_path_buf();
    drop(first);
    assert!(!first_socket.exists());
    let out = notify(second.socket(), "b2", "second again");
    assert!(out.status.success(), "{}", text(&out));
    let log = bus.calls_log();
    let pid = second.pid();
    for line in [
        "a title=first ",
        "b title=second ",
        "a2 title=first again ",
        &format!("b2 title=second again pid={pid}\n"),
    ] {
        assert!(log.contains(line), "{line:?} missing from {log}");
    }
}

#[test]
fn the_proxy_gets_no_environment_and_no_stray_descriptors() {
    let Some(tools) = tools() else { return };
    let bus = Bus::start(&tools);
    // A descriptor without close-on-exec, as a careless caller could leave open.
    let marker = bus.dir.path().join("marker");
    fs::write(&marker, "").unwrap();
    let path = std::ffi::CString::new(marker.to_str().unwrap()).unwrap();
    // SAFETY: open with a valid path; the descriptor is closed below.
    let leaked = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY) };
    assert!(leaked >= 0);
    let proxy = bus.proxy("session");
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::close(leaked) };
    let pid = proxy.pid();
    let environ = fs::read(format!("/proc/{pid}/environ")).unwrap();
    assert!(environ.is_empty(), "{}", String::from_utf8_lossy(&environ));
    for entry in fs::read_dir(format!("/proc/{pid}/fd")).unwrap() {
        let target = fs::read_link(entry.unwrap().path()).unwrap_or_default();
        assert_ne!(target, marker, "the proxy inherited a stray descriptor");
    }
}

#[test]
fn a_bus_that_does_not_answer_is_an_error_naming_it() {
    let Some(tools) = tools() else { return };
    let bus = Bus::start(&tools);
    let socket = bus.session_dir("session").join("bus");
    let nowhere = format!("unix:path={}", bus.dir.path().join("no-bus").display());
    let err = PortalProxy::start(Path::new(PROXY), &nowhere, &socket).unwrap_err();
    let message = err.to_string();
    assert!(message.contains(&nowhere), "{message}");
    assert!(
        !socket.exists(),
        "the failed proxy's socket was left behind"
    );
}

#[test]
fn start_errors_name_what_failed() {
    let Some(tools) = tools() else { return };
    let bus = Bus::start(&tools);
    let socket = bus.session_dir("session").join("bus");

    let missing = Path::new("/nonexistent/xdg-dbus-proxy");
    let err = PortalProxy::start(missing, &bus.address, &socket).unwrap_err();
    assert!(
        err.to_string().contains("/nonexistent/xdg-dbus-proxy"),
        "{err}"
    );

    let err = PortalProxy::start(Path::new("xdg-dbus-proxy"), &bus.address, &socket).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");

    // A program that exits at once: the error says it exited, and quotes its stderr.
    let log = bus.dir.path().join("proxy.log");
    let err = PortalProxy::start_logged(Path::new("/bin/false"), &bus.address, &socket, &log)
        .unwrap_err();
    assert!(err.to_string().contains("exited"), "{err}");
    let script = bus.dir.path().join("noisy");
    fs::write(&script, "#!/bin/sh\necho 'cannot bind: no' >&2\nexit 3\n").unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    let err = PortalProxy::start_logged(&script, &bus.address, &socket, &log).unwrap_err();
    let message = err.to_string();
    assert!(message.contains("cannot bind: no"), "{message}");
    assert!(message.contains("exit status: 3"), "{message}");

    // A program that never signals readiness is killed after the bound.
    let script = bus.dir.path().join("silent");
    fs::write(&script, "#!/bin/sh\nexec sleep 30\n").unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    let started = Instant::now();
    let err = PortalProxy::start(&script, &bus.address, &socket).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::TimedOut, "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));

    // A shared directory is refused.
    let open = bus.dir.path().join("open");
    fs::create_dir(&open).unwrap();
    fs::set_permissions(&open, fs::Permissions::from_mode(0o755)).unwrap();
    let err = PortalProxy::start(Path::new(PROXY), &bus.address, &open.join("bus")).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied, "{err}");
}

#[test]
fn rules_allow_only_the_notification_interface() {
    assert_eq!(
        portal::rules(),
        [
            "--filter",
            "--call=org.freedesktop.portal.Desktop=org.freedesktop.portal.Notification.*@/org/freedesktop/portal/desktop",
            "--broadcast=org.freedesktop.portal.Desktop=org.freedesktop.portal.Notification.*@/org/freedesktop/portal/desktop",
        ]
    );
    assert!(!portal::rules().iter().any(|r| r.starts_with("--talk")));
}

/// D-Bus well-known name and Flatpak app id rules: 3 elements here, each `[A-Za-z0-9_-]+` not
/// starting with a digit, `-` only in the last, 255 bytes at most.
fn valid_app_id(id: &str) -> bool {
    let elements: Vec<&str> = id.split('.').collect();
    id.len() <= 255
        && elements.len() == 3
        && elements.iter().enumerate().all(|(i, e)| {
            !e.is_empty()
                && !e.starts_with(|c: char| c.is_ascii_digit())
                && e.chars().all(|c| {
                    c.is_ascii_alphanumeric() || c == '_' || (c == '-' && i == elements.len() - 1)
                })
        })
}

#[test]
fn app_ids_are_valid_for_any_sandbox_name() {
    assert_eq!(portal::app_id("myproject"), "dev.airlock.myproject");
    assert_eq!(portal::app_id("my-project"), "dev.airlock.my-project");
    assert_eq!(portal::app_id("my.project v2"), "dev.airlock.my_project_v2");
    assert_eq!(portal::app_id("2048"), "dev.airlock._2048");
    assert_eq!(portal::app_id(""), "dev.airlock.sandbox");
    assert_eq!(portal::app_id("café/../x"), "dev.airlock.caf_____x");
    for name in [
        "a",
        "-x",
        "9lives",
        "...",
        "név",
        "line\nbreak",
        "[Application]",
        &"long".repeat(100),
    ] {
        let id = portal::app_id(name);
        assert!(valid_app_id(&id), "{name:?} gave {id:?}");
    }
}

#[test]
fn flatpak_info_names_the_app() {
    assert_eq!(
        portal::flatpak_info("dev.airlock.myproject"),
        "[Application]\nname=dev.airlock.myproject\n"
    );
    // Nothing can add a line.
    let info = portal::flatpak_info("dev.airlock.x\n[Context]\nshared=network");
    assert_eq!(info.lines().count(), 2, "{info}");
}
