//! A private session bus for tests: `dbus-daemon` with a minimal config, fake services on it (a
//! portal, a secrets service), and the programs that talk to it. Shared by airlock-sockets'
//! portal tests and airlock's end-to-end portal test (`#[path]`-included there).

#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use airlock_sockets::portal::PortalProxy;

#[path = "session_bus.rs"]
mod session_bus;
use session_bus::SessionBus;

pub const PROXY: &str = "/usr/bin/xdg-dbus-proxy";

/// The fake services: `org.freedesktop.portal.Desktop` (Notification and OpenURI at the portal's
/// path and at `/other`, two signals sent on `test.Control.Emit`) on one connection, and
/// `org.freedesktop.secrets` on another. Every call is a line in the log; `AddNotification`
/// records the caller's pid as the bus reports it (what xdg-desktop-portal looks at).
pub const FAKE: &str = r#"
import sys, dbus, dbus.service, dbus.mainloop.glib
from gi.repository import GLib
dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
portal_bus = dbus.bus.BusConnection(sys.argv[1])
secrets_bus = dbus.bus.BusConnection(sys.argv[1])
log = open(sys.argv[2], "a", buffering=1)

def pid_of(sender):
    return int(portal_bus.call_blocking("org.freedesktop.DBus", "/org/freedesktop/DBus",
        "org.freedesktop.DBus", "GetConnectionUnixProcessID", "s", (sender,)))

class Portal(dbus.service.Object):
    @dbus.service.method("org.freedesktop.portal.Notification", in_signature="sa{sv}",
                         out_signature="", sender_keyword="sender", path_keyword="path")
    def AddNotification(self, id, n, sender=None, path=None):
        log.write("AddNotification %s %s title=%s pid=%d\n" % (path, id, n.get("title", ""), pid_of(sender)))
    @dbus.service.method("org.freedesktop.portal.Notification", in_signature="s", out_signature="")
    def RemoveNotification(self, id):
        log.write("RemoveNotification %s\n" % id)
    @dbus.service.method("org.freedesktop.portal.OpenURI", in_signature="ssa{sv}", out_signature="o")
    def OpenURI(self, parent, uri, options):
        log.write("OpenURI %s\n" % uri)
        return "/org/freedesktop/portal/desktop/request/1"
    @dbus.service.signal("org.freedesktop.portal.Notification", signature="ssav")
    def ActionInvoked(self, id, action, parameters): pass
    @dbus.service.signal("org.freedesktop.portal.Settings", signature="ssv")
    def SettingChanged(self, namespace, key, value): pass
    @dbus.service.method("test.Control", in_signature="", out_signature="")
    def Emit(self):
        self.ActionInvoked("id1", "open", dbus.Array([], signature="v"))
        self.SettingChanged("org.example", "hidden-key", dbus.String("v"))

class Secrets(dbus.service.Object):
    @dbus.service.method("org.freedesktop.Secret.Service", in_signature="", out_signature="s")
    def Ping(self):
        log.write("secrets Ping\n")
        return "pong"

portal_name = dbus.service.BusName("org.freedesktop.portal.Desktop", portal_bus)
secrets_name = dbus.service.BusName("org.freedesktop.secrets", secrets_bus)
Portal(portal_bus, "/org/freedesktop/portal/desktop")
Portal(portal_bus, "/other")
Secrets(secrets_bus, "/org/freedesktop/secrets")
log.write("ready\n")
GLib.MainLoop().run()
"#;

pub fn on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| Path::new(dir).join(program))
        .find(|p| p.is_file())
}

/// A python3 with the `dbus` and `gi` modules.
pub fn python() -> Option<PathBuf> {
    let mut candidates = vec![PathBuf::from("/usr/bin/python3")];
    candidates.extend(on_path("python3"));
    candidates.into_iter().find(|p| {
        Command::new(p)
            .args([
                "-c",
                "import dbus, dbus.service, dbus.mainloop.glib; from gi.repository import GLib",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

pub struct Tools {
    pub python: PathBuf,
    pub dbus_daemon: PathBuf,
}

pub fn tools() -> Option<Tools> {
    let missing = |what: &str| {
        eprintln!(
            "skipped: {what} is not installed (apt-get install xdg-dbus-proxy dbus libglib2.0-bin python3-dbus python3-gi)"
        );
        None
    };
    if !Path::new(PROXY).is_file() {
        return missing(PROXY);
    }
    let Some(dbus_daemon) = on_path("dbus-daemon") else {
        return missing("dbus-daemon");
    };
    if on_path("dbus-send").is_none() {
        return missing("dbus-send");
    }
    if on_path("gdbus").is_none() {
        return missing("gdbus");
    }
    let Some(python) = python() else {
        return missing("python3 with the dbus and gi modules");
    };
    Some(Tools {
        python,
        dbus_daemon,
    })
}

/// A private session bus with the fake services on it.
pub struct Bus {
    pub dir: tempfile::TempDir,
    pub address: String,
    pub calls: PathBuf,
    fake: Child,
    _bus: SessionBus,
}

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.fake.kill();
        let _ = self.fake.wait();
    }
}

pub fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Bus {
    pub fn start(tools: &Tools) -> Bus {
        let dir = tempfile::tempdir().unwrap();
        let session = SessionBus::start(&tools.dbus_daemon, dir.path());
        let address = session.address.clone();

        let script = dir.path().join("fake.py");
        fs::write(&script, FAKE).unwrap();
        let calls = dir.path().join("calls.log");
        let fake = Command::new(&tools.python)
            .arg(&script)
            .arg(&address)
            .arg(&calls)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let bus = Bus {
            dir,
            address,
            calls,
            fake,
            _bus: session,
        };
        wait_for("the fake portal", Duration::from_secs(10), || {
            bus.calls_log().contains("ready\n")
        });
        bus
    }

    pub fn calls_log(&self) -> String {
        fs::read_to_string(&self.calls).unwrap_or_default()
    }

    /// A fresh 0700 session directory, as the supervisor makes one.
    pub fn session_dir(&self, name: &str) -> PathBuf {
        let dir = self.dir.path().join(name);
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        dir
    }

    pub fn proxy(&self, session: &str) -> PortalProxy {
        let socket = self.session_dir(session).join("bus");
        PortalProxy::start(Path::new(PROXY), &self.address, &socket)
            .unwrap_or_else(|e| panic!("the proxy did not start: {e}"))
    }

    /// The unique name owning `name` on the real bus.
    pub fn owner(&self, name: &str) -> String {
        let out = dbus_send(
            &self.address,
            "org.freedesktop.DBus",
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus.GetNameOwner",
            &[&format!("string:{name}")],
        );
        assert!(out.status.success(), "{}", text(&out));
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        stdout.split('"').nth(1).unwrap().to_string()
    }
}

pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub fn address(socket: &Path) -> String {
    format!("unix:path={}", socket.display())
}

pub fn dbus_send(address: &str, dest: &str, path: &str, method: &str, args: &[&str]) -> Output {
    Command::new("dbus-send")
        .arg(format!("--bus={address}"))
        .arg(format!("--dest={dest}"))
        .args([
            "--type=method_call",
            "--print-reply",
            "--reply-timeout=5000",
        ])
        .arg(path)
        .arg(method)
        .args(args)
        .output()
        .unwrap()
}

pub fn gdbus_call(address: &str, dest: &str, path: &str, method: &str, args: &[&str]) -> Output {
    Command::new("gdbus")
        .args([
            "call",
            "--timeout",
            "5",
            "--address",
            address,
            "--dest",
            dest,
        ])
        .args(["--object-path", path, "--method", method])
        .args(args)
        .output()
        .unwrap()
}
