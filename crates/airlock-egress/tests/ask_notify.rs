//! Ask mode's desktop notifications against real programs: a private `dbus-daemon --session`
//! and a fake notification server in Python (`org.freedesktop.Notifications`) that records each
//! `Notify` and answers as the test tells it. Skipped, saying why, without dbus-daemon or a
//! python3 with the dbus and gi modules.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use airlock_egress::ask::notify::Notifier;
use airlock_egress::ask::notify::bus::BusAddress;
use airlock_egress::ask::protocol::Decision;
use airlock_egress::ask::{AskGate, Outcome};

/// The server: `argv[3]` says what it does after each Notify: `allow`/`deny` invoke that
/// action, `default` clicks the body, `dismiss` closes it, `forge` has a second connection emit
/// `ActionInvoked(id, "allow-once")` (which must count for nothing), `silent` nothing.
/// `argv[4]` = `markup` or `plain`: its capabilities. Each call is a JSON line in `argv[2]`.
const SERVER: &str = r#"
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

const BUS_CONFIG: &str = r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=@BUS@</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"#;

const PYTHON: &str = "/usr/bin/python3";

fn available() -> bool {
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
struct Desktop {
    dir: tempfile::TempDir,
    socket: PathBuf,
    daemon: Child,
    server: Child,
}

impl Desktop {
    fn start(mode: &str, caps: &str) -> Desktop {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("bus");
        let config = dir.path().join("bus.conf");
        fs::write(
            &config,
            BUS_CONFIG.replace("@BUS@", &socket.display().to_string()),
        )
        .unwrap();
        let daemon = Command::new("/usr/bin/dbus-daemon")
            .arg(format!("--config-file={}", config.display()))
            .arg("--nofork")
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        wait_for("the bus socket", || socket.exists());
        let log = dir.path().join("calls.jsonl");
        let address = format!("unix:path={}", socket.display());
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
            daemon,
            server,
        };
        wait_for("the notification server", || {
            desktop.calls().iter().any(|c| c["call"] == "ready")
        });
        desktop
    }

    fn calls(&self) -> Vec<serde_json::Value> {
        fs::read_to_string(self.dir.path().join("calls.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn notifies(&self) -> Vec<serde_json::Value> {
        let calls = self.calls();
        calls
            .into_iter()
            .filter(|c| c["call"] == "Notify")
            .collect()
    }

    /// A gate whose questions go to this desktop.
    fn gate(&self, timeout: Duration) -> Arc<AskGate> {
        let path = self.dir.path().join("monitor.sock");
        let gate = AskGate::bind(&path, "app-1a2b3c4d", Path::new("/p/app"), timeout).unwrap();
        Arc::new(gate.with_notifier(Notifier::new(BusAddress::Path(self.socket.clone()))))
    }
}

impl Drop for Desktop {
    fn drop(&mut self) {
        for child in [&mut self.server, &mut self.daemon] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn ask(gate: &Arc<AskGate>, host: &str) -> (Outcome, Duration) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let start = Instant::now();
    let outcome = rt.block_on(gate.ask(host, 443));
    (outcome, start.elapsed())
}

#[test]
fn allow_once_in_the_notification_lets_the_waiting_request_through() {
    if !available() {
        return;
    }
    let desktop = Desktop::start("allow", "markup");
    let gate = desktop.gate(Duration::from_secs(30));
    let (outcome, took) = ask(&gate, "registry.example.org");
    assert_eq!(outcome, Outcome::Allowed(Decision::Once));
    assert!(
        took < Duration::from_secs(10),
        "answered, not timed out: {took:?}"
    );
    let n = &desktop.notifies()[0];
    assert_eq!(n["app"], "airlock");
    assert_eq!(n["summary"], "airlock: app-1a2b3c4d asks for the network");
    assert_eq!(
        n["body"],
        "registry.example.org:443 (no rule allows it). Denied in 30 s unless allowed."
    );
    assert_eq!(
        n["actions"],
        serde_json::json!(["allow-once", "Allow once", "deny", "Deny"])
    );
    assert_eq!(n["urgency"], 2);
    assert_eq!(n["timeout"], 30_000);
    wait_for("the notification to be closed", || {
        desktop
            .calls()
            .iter()
            .any(|c| c["call"] == "CloseNotification" && c["id"] == n["id"])
    });
    // Once: the next request asks again.
    let (again, _) = ask(&gate, "registry.example.org");
    assert_eq!(again, Outcome::Allowed(Decision::Once));
    assert_eq!(desktop.notifies().len(), 2);
}

#[test]
fn a_hostile_host_name_reaches_the_desktop_as_escaped_text() {
    if !available() {
        return;
    }
    let hostile = "<a href=\"https://evil.test\">click</a><img src=x>&amp;\n\u{1b}]52;c;AAAA\u{7}\u{202e}gro.x";
    for (caps, expected) in [
        (
            "markup",
            "&lt;a href=&quot;https://evil.test&quot;&gt;click&lt;/a&gt;&lt;img src=x&gt;&amp;amp;\\u{a}\\u{1b}]52;c;AAAA\\u{7}\\u{202e}gro.x:443",
        ),
        (
            "plain",
            "<a href=\"https://evil.test\">click</a><img src=x>&amp;\\u{a}\\u{1b}]52;c;AAAA\\u{7}\\u{202e}gro.x:443",
        ),
    ] {
        let desktop = Desktop::start("deny", caps);
        let gate = desktop.gate(Duration::from_secs(30));
        let (outcome, _) = ask(&gate, hostile);
        assert!(
            matches!(outcome, Outcome::Denied(ref r) if r.starts_with("denied when asked")),
            "{outcome:?}"
        );
        let body = desktop.notifies()[0]["body"].as_str().unwrap().to_owned();
        assert!(body.starts_with(expected), "{caps}: {body}");
        assert!(
            !body.chars().any(|c| c.is_control() || !c.is_ascii()),
            "{body:?}"
        );
        // Denied: for the rest of the session, without asking again.
        let (cached, _) = ask(&gate, hostile);
        assert!(matches!(cached, Outcome::Denied(ref r) if r.contains("earlier in this session")));
        assert_eq!(desktop.notifies().len(), 1);
    }
}

#[test]
fn nobody_answering_a_forged_signal_or_a_dismissal_is_a_deny_at_the_timeout() {
    if !available() {
        return;
    }
    for mode in ["silent", "forge", "dismiss", "default"] {
        let desktop = Desktop::start(mode, "markup");
        let gate = desktop.gate(Duration::from_secs(2));
        let (outcome, took) = ask(&gate, "registry.example.org");
        if mode == "default" {
            // A click on the body is no answer; the action after it is.
            assert_eq!(outcome, Outcome::Allowed(Decision::Once), "{mode}");
            continue;
        }
        assert_eq!(
            outcome,
            Outcome::Denied("not answered in airlock network monitor within 2 s".into()),
            "{mode}"
        );
        assert!(took >= Duration::from_secs(2), "{mode}: {took:?}");
        assert_eq!(desktop.notifies().len(), 1, "{mode}");
        if mode != "dismiss" {
            let id = desktop.notifies()[0]["id"].clone();
            wait_for("the notification to be closed at the timeout", || {
                desktop
                    .calls()
                    .iter()
                    .any(|c| c["call"] == "CloseNotification" && c["id"] == id)
            });
        }
    }
}

#[test]
fn no_session_bus_leaves_the_monitor_and_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let gate = AskGate::bind(
        &dir.path().join("m.sock"),
        "app-1a2b3c4d",
        Path::new("/p"),
        Duration::from_secs(1),
    )
    .unwrap()
    .with_notifier(Notifier::new(BusAddress::Path(dir.path().join("no-bus"))));
    let (outcome, _) = ask(&Arc::new(gate), "registry.example.org");
    assert_eq!(
        outcome,
        Outcome::Denied("not answered in airlock network monitor within 1 s".into())
    );
}
