//! Methods no policy allows, each denied with its group's rule.

use super::super::{DeniedGroup, FilterPolicy, MethodRule, UNRECOGNISED_METHOD, rule_for};
use super::{decide, denied, denied_with, full_policy, request};

#[test]
fn every_denied_group_is_denied_under_the_fullest_policy() {
    let cases = [
        (
            "events.subscribe",
            "streaming and waiting methods are denied",
        ),
        ("events.wait", "streaming and waiting methods are denied"),
        (
            "pane.wait_for_output",
            "streaming and waiting methods are denied",
        ),
        ("agent.wait", "streaming and waiting methods are denied"),
        ("pane.list", "introspection methods are denied"),
        ("tab.list", "introspection methods are denied"),
        ("pane.current", "introspection methods are denied"),
        ("session.snapshot", "introspection methods are denied"),
        ("pane.get", "introspection methods are denied"),
        ("workspace.list", "introspection methods are denied"),
        ("layout.export", "introspection methods are denied"),
        ("pane.read", "reading panes is denied"),
        ("pane.send_text", "typing into panes is denied"),
        ("pane.send_keys", "typing into panes is denied"),
        (
            "pane.clear_agent_authority",
            "clearing agent authority is denied",
        ),
        ("agent.prompt", "agent.* methods are denied"),
        ("agent.send_keys", "agent.* methods are denied"),
        ("agent.start", "agent.* methods are denied"),
        ("agent.read", "agent.* methods are denied"),
        ("worktree.create", "worktree.* methods are denied"),
        ("worktree.remove", "worktree.* methods are denied"),
        ("plugin.link", "plugin.* methods are denied"),
        ("plugin.action.invoke", "plugin.* methods are denied"),
        ("server.stop", "server.* methods are denied"),
        ("server.reload_config", "server.* methods are denied"),
        ("server.live_handoff", "server.* methods are denied"),
        ("pane.split", "not in airlock's herdr allowlist"),
        ("pane.close", "not in airlock's herdr allowlist"),
        ("workspace.create", "not in airlock's herdr allowlist"),
        ("layout.apply", "not in airlock's herdr allowlist"),
        ("integration.install", "not in airlock's herdr allowlist"),
        ("popup.close", "not in airlock's herdr allowlist"),
        ("no.such.method", "not in airlock's herdr allowlist"),
    ];
    for (method, rule) in cases {
        assert_eq!(denied(&request(method, "{}")), rule, "{method}");
    }
}

#[test]
fn launch_overlay_methods_need_the_capability() {
    let cases = [
        ("tab.create", r#"{"cwd":"/tmp","focus":true}"#),
        ("tab.close", r#"{"tab_id":"w1:t1"}"#),
        (
            "pane.send_input",
            r#"{"pane_id":"w1:p2","text":"ls","keys":["Enter"]}"#,
        ),
    ];
    for (method, params) in cases {
        let reason = denied(&request(method, params));
        assert_eq!(reason, "launch_overlay capability not enabled", "{method}");
    }
}

#[test]
fn method_names_are_matched_exactly() {
    for method in [
        "Ping",
        "PING",
        "ping ",
        "notification.Show",
        "pane.report_agent.",
        "pane.read\\u0000",
    ] {
        let reason = denied_with(&request(method, "{}"), &full_policy());
        assert_eq!(reason, "not in airlock's herdr allowlist", "{method:?}");
    }
    assert_eq!(
        rule_for("pane.read"),
        MethodRule::Denied(DeniedGroup::PaneRead)
    );
    assert_eq!(rule_for("ping"), MethodRule::Ping);
}

#[test]
fn only_herdr_shaped_method_names_reach_the_log() {
    let line = request("Pane.Read", "{}");
    assert_eq!(
        decide(&line, &FilterPolicy::default()).method(),
        UNRECOGNISED_METHOD
    );
    let line = request("sk-live-0123\\n2026-01-01 forged log line", "{}");
    assert_eq!(
        decide(&line, &FilterPolicy::default()).method(),
        UNRECOGNISED_METHOD
    );
    let line = request(&"a".repeat(65), "{}");
    assert_eq!(
        decide(&line, &FilterPolicy::default()).method(),
        UNRECOGNISED_METHOD
    );
    let line = request("pane.read", "{}");
    assert_eq!(
        decide(&line, &FilterPolicy::default()).method(),
        "pane.read"
    );
    assert_eq!(decide(b"{", &FilterPolicy::default()).method(), "");
}
