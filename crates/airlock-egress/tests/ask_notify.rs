//! Ask mode's desktop notifications against real programs: a private `dbus-daemon --session`
//! and a fake notification server in Python (`org.freedesktop.Notifications`) that records each
//! `Notify` and answers as the test tells it. Skipped, saying why, without dbus-daemon or a
//! python3 with the dbus and gi modules.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use airlock_egress::ask::notify::Notifier;
use airlock_egress::ask::notify::bus::BusAddress;
use airlock_egress::ask::protocol::Decision;
use airlock_egress::ask::{AskGate, Outcome};

#[path = "support/desktop.rs"]
mod desktop;

use desktop::{Desktop, available, wait_for};

/// A gate whose questions go to `desktop`.
fn gate(desktop: &Desktop, timeout: Duration) -> Arc<AskGate> {
    let path = desktop.dir.path().join("monitor.sock");
    let gate = AskGate::bind(&path, "app-1a2b3c4d", Path::new("/p/app"), timeout).unwrap();
    Arc::new(gate.with_notifier(Notifier::new(BusAddress::Path(desktop.socket.clone()))))
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
    let gate = gate(&desktop, Duration::from_secs(30));
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
        let gate = gate(&desktop, Duration::from_secs(30));
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
        let gate = gate(&desktop, Duration::from_secs(2));
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
