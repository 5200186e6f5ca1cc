//! The notification portal end to end: a private session bus with a fake portal and a fake
//! secrets service on the host (airlock-sockets' test fixture), the real xdg-dbus-proxy started by
//! airlock for the session, and `gdbus` inside a real sandbox calling through it.

mod common;
#[path = "../../airlock-sockets/tests/support/dbus.rs"]
mod dbus;

use common::{TestHome, report, sandbox_starts, stdout};

const INSIDE: &str = r#"
echo "bus=$DBUS_SESSION_BUS_ADDRESS"
gdbus call --timeout 5 --session --dest org.freedesktop.portal.Desktop \
  --object-path /org/freedesktop/portal/desktop \
  --method org.freedesktop.portal.Notification.AddNotification id1 \
  "{'title': <'build done'>}" > notify.out 2>&1; echo "notify=$?"
gdbus call --timeout 5 --session --dest org.freedesktop.secrets \
  --object-path /org/freedesktop/secrets --method org.freedesktop.Secret.Service.Ping \
  > secrets.out 2>&1; echo "secrets=$?"
gdbus call --timeout 5 --session --dest org.freedesktop.portal.Desktop \
  --object-path /org/freedesktop/portal/desktop --method org.freedesktop.portal.OpenURI.OpenURI \
  '' 'https://attacker.test/' '{}' > openuri.out 2>&1; echo "openuri=$?"
test -e /.flatpak-info && echo "flatpak_info=yes"
"#;

#[test]
fn a_sandbox_can_notify_through_the_portal_and_reach_nothing_else_on_the_bus() {
    if !sandbox_starts() {
        eprintln!("skipped: the sandbox cannot start here");
        return;
    }
    let Some(tools) = dbus::tools() else { return };
    let bus = dbus::Bus::start(&tools);
    let h = TestHome::new("home/code/app");
    let run = || {
        h.airlock(&["run", "--network", "none", "--", "sh", "-c", INSIDE])
            .env("PATH", "/usr/bin:/bin")
            .env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
            .output()
            .expect("airlock")
    };
    let out = run();
    let text = stdout(&out);
    assert!(out.status.success(), "{}", report(&out));
    let file = |name: &str| std::fs::read_to_string(h.project.join(name)).unwrap_or_default();
    assert!(text.contains("bus=unix:path=/run/user/"), "{text}");
    assert!(text.contains("notify=0"), "{text}\n{}", file("notify.out"));
    assert!(
        bus.calls_log().contains("AddNotification"),
        "{}",
        bus.calls_log()
    );
    assert!(
        !text.contains("secrets=0"),
        "secrets reached: {}",
        file("secrets.out")
    );
    assert!(
        !text.contains("openuri=0"),
        "OpenURI reached: {}",
        file("openuri.out")
    );
    assert!(
        !bus.calls_log().contains("secrets Ping"),
        "{}",
        bus.calls_log()
    );
    assert!(!bus.calls_log().contains("OpenURI"), "{}", bus.calls_log());
    assert!(text.contains("flatpak_info=yes"), "{text}");
    // Turned off: no bus inside at all.
    h.config("[tools.portal]\nnotifications = false\n");
    let off = run();
    assert!(stdout(&off).contains("bus=\n"), "{}", report(&off));
}
