//! A desktop for tests: a private `dbus-daemon --session` and a fake notification server in
//! Python (`org.freedesktop.Notifications`) that records each call and answers as told. Shared by
//! airlock-egress's `ask_notify` tests and airlock's end-to-end one (`#[path]`-included there).

#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "../../../airlock-sockets/tests/support/session_bus.rs"]
mod session_bus;
use session_bus::SessionBus;

/// The server: `argv[3]` says what it does after each Notify: `allow`/`deny` invoke that
/// action, `default` clicks the body, `dismiss` closes it, `forge` has a second connection emit
/// `ActionInvoked(id, "allow-once")` (which must count for nothing), `silent` nothing.
/// `argv[4]` = `markup` or `plain`: its capabilities. Each call is a JSON line in `argv[2]`.
pub const SERVER: &str = r#"
import json, sys, dbus, dbus.service, dbus.mainloop.glib
from gi.repository import GLib
dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.bus.BusConnection(sys.argv[1])
other = dbus.bus.BusConnection(sys.argv[1])
log = open(sys.argv[2], "a", buffering=1)
mode, caps = sys.argv[3], sys.argv[4]
IFACE = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"

class Server(dbus.service.Object):
    next_id = 7
    @dbus.service.method(IFACE, in_signature="", out_signature="as")
    def GetCapabilities(self):
        return ["actions", "body"] + (["body-markup"] if caps == "markup" else [])
    @dbus.service.method(IFACE, in_signature="susssasa{sv}i", out_signature="u")
    def Notify(self, app, replaces, icon, summary, body, actions, hints, timeout):
        nid = Server.next_id
        Server.next_id += 1
        log.write(json.dumps({"call": "Notify", "id": nid, "app": str(app), "summary": str(summary),
            "body": str(body), "actions": [str(a) for a in actions],
            "urgency": int(hints.get("urgency", -1)), "timeout": int(timeout)}) + "\n")
        GLib.timeout_add(100, self.answer, nid)
        return nid
    def answer(self, nid):
        if mode in ("allow", "deny", "default"):
            self.ActionInvoked(nid, {"allow": "allow-once", "deny": "deny", "default": "default"}[mode])
            if mode == "default":
                GLib.timeout_add(100, lambda: self.ActionInvoked(nid, "allow-once") and False)
        elif mode == "dismiss":
            self.NotificationClosed(nid, 2)
        elif mode == "forge":
            other.send_message(forged(nid))
        return False
    @dbus.service.method(IFACE, in_signature="u", out_signature="")
    def CloseNotification(self, nid):
        log.write(json.dumps({"call": "CloseNotification", "id": int(nid)}) + "\n")
    @dbus.service.signal(IFACE, signature="us")
    def ActionInvoked(self, nid, key): pass
    @dbus.service.signal(IFACE, signature="uu")
    def NotificationClosed(self, nid, reason): pass

def forged(nid):
    m = dbus.lowlevel.SignalMessage(PATH, IFACE, "ActionInvoked")
    m.append(dbus.UInt32(nid), "allow-once", signature="us")
    return m

name = dbus.service.BusName(IFACE, bus)
Server(bus, PATH)
log.write(json.dumps({"call": "ready"}) + "\n")
GLib.MainLoop().run()
"#;

pub const PYTHON: &str = "/usr/bin/python3";

pub fn available() -> bool {
    let daemon = Path::new("/usr/bin/dbus-daemon").is_file();
    let modules = Command::new(PYTHON)
        .args([
            "-c",
            "import dbus, dbus.service, dbus.mainloop.glib; from gi.repository import GLib",
        ])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !(daemon && modules) {
        eprintln!(
            "skipped: needs /usr/bin/dbus-daemon and {PYTHON} with dbus and gi (apt-get install dbus python3-dbus python3-gi)"
        );
    }
    daemon && modules
}

/// A private bus with the fake server in `mode`.
pub struct Desktop {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    server: Child,
    _bus: SessionBus,
}

impl Desktop {
    pub fn start(mode: &str, caps: &str) -> Desktop {
        let dir = tempfile::tempdir().unwrap();
        let bus = SessionBus::start(Path::new("/usr/bin/dbus-daemon"), dir.path());
        let socket = bus.socket.clone();
        let log = dir.path().join("calls.jsonl");
        let address = bus.address.clone();
        let server = Command::new(PYTHON)
            .args([
                "-c",
                SERVER,
                &address,
                &log.display().to_string(),
                mode,
                caps,
            ])
            .spawn()
            .unwrap();
        let desktop = Desktop {
            dir,
            socket,
            server,
            _bus: bus,
        };
        wait_for("the notification server", || {
            desktop.calls().iter().any(|c| c["call"] == "ready")
        });
        desktop
    }

    pub fn calls(&self) -> Vec<serde_json::Value> {
        fs::read_to_string(self.dir.path().join("calls.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    pub fn notifies(&self) -> Vec<serde_json::Value> {
        let calls = self.calls();
        calls
            .into_iter()
            .filter(|c| c["call"] == "Notify")
            .collect()
    }
}

impl Drop for Desktop {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
