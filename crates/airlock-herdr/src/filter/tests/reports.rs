//! `pane.report_agent`, `pane.report_agent_session`, `pane.release_agent`: only with
//! `agent_reporting`, bound to the host's pane and the launched agent, session values confined.

use std::path::PathBuf;

use super::super::{AgentReporting, Decision, FilterPolicy};
use super::{PANE, decide, denied, denied_with, forwarded, full_policy, request};

const SESSIONS: &str = "/home/u/.claude/projects";

fn report(extra: &str) -> Vec<u8> {
    let params = format!(
        r#"{{"pane_id":"{PANE}","source":"airlock.sandbox","agent":"claude","state":"working"{extra}}}"#
    );
    request("pane.report_agent", &params)
}

fn report_session(extra: &str) -> Vec<u8> {
    let params =
        format!(r#"{{"pane_id":"{PANE}","source":"airlock.sandbox","agent":"claude"{extra}}}"#);
    request("pane.report_agent_session", &params)
}

fn with_path(path: &str) -> Vec<u8> {
    report_session(&format!(r#","agent_session_path":"{path}""#))
}

#[test]
fn all_three_are_denied_without_the_capability() {
    let policy = FilterPolicy {
        agent_reporting: None,
        ..full_policy()
    };
    let release = request(
        "pane.release_agent",
        &format!(r#"{{"pane_id":"{PANE}","source":"s","agent":"claude"}}"#),
    );
    for line in [report(""), report_session(""), release] {
        let reason = denied_with(&line, &policy);
        assert_eq!(reason, "agent_reporting capability not enabled");
    }
}

#[test]
fn a_report_for_the_bound_pane_and_agent_is_forwarded_as_validated() {
    let id = "0b7f3c2e-9a41-4d7e-8f00-1c2d3e4f5a6b";
    let path = format!("{SESSIONS}/-work-main/{id}.jsonl");
    let line = report(&format!(
        r#","message":"running tests","seq":7,"agent_session_id":"{id}","agent_session_path":"{path}""#
    ));
    assert_eq!(
        forwarded(decide(&line, &full_policy())),
        format!(
            "{{\"id\":\"r1\",\"method\":\"pane.report_agent\",\"params\":{{\"pane_id\":\"{PANE}\",\"source\":\"airlock.sandbox\",\"agent\":\"claude\",\"state\":\"working\",\"message\":\"running tests\",\"seq\":7,\"agent_session_id\":\"{id}\",\"agent_session_path\":\"{path}\"}}}}\n"
        )
    );
}

#[test]
fn report_session_and_release_are_forwarded() {
    let line =
        report_session(r#","agent_session_id":"abc","seq":1,"session_start_source":"resume""#);
    assert!(decide(&line, &full_policy()).is_forward());
    let line = request(
        "pane.release_agent",
        &format!(
            r#"{{"pane_id":"{PANE}","source":"airlock.sandbox","agent":"claude","seq":null}}"#
        ),
    );
    assert_eq!(
        forwarded(decide(&line, &full_policy())),
        format!(
            "{{\"id\":\"r1\",\"method\":\"pane.release_agent\",\"params\":{{\"pane_id\":\"{PANE}\",\"source\":\"airlock.sandbox\",\"agent\":\"claude\"}}}}\n"
        )
    );
}

#[test]
fn another_panes_report_is_denied() {
    for method in [
        "pane.report_agent",
        "pane.report_agent_session",
        "pane.release_agent",
    ] {
        let params = r#"{"pane_id":"w1:p3","source":"s","agent":"claude","state":"idle"}"#;
        let params = if method == "pane.report_agent" {
            params.to_owned()
        } else {
            params.replace(r#","state":"idle""#, "")
        };
        assert_eq!(
            denied(&request(method, &params)),
            "report names another pane",
            "{method}"
        );
    }
    // Exact match: no prefix, case or whitespace leeway.
    for pane in ["w1:p22", "W1:P2", " w1:p2", ""] {
        let params = format!(r#"{{"pane_id":"{pane}","source":"s","agent":"claude"}}"#);
        let reason = denied(&request("pane.release_agent", &params));
        assert_eq!(reason, "report names another pane", "{pane:?}");
    }
}

#[test]
fn another_agents_report_is_denied() {
    for agent in ["codex", "Claude", "claude ", "pi"] {
        let params = format!(r#"{{"pane_id":"{PANE}","source":"s","agent":"{agent}"}}"#);
        let reason = denied(&request("pane.report_agent_session", &params));
        assert_eq!(reason, "report names another agent", "{agent:?}");
    }
}

#[test]
fn state_and_other_fields_follow_the_schema() {
    for state in ["done", "Idle", "", "null"] {
        let params =
            format!(r#"{{"pane_id":"{PANE}","source":"s","agent":"claude","state":"{state}"}}"#);
        let reason = denied(&request("pane.report_agent", &params));
        assert_eq!(reason, "params do not match herdr's schema", "{state:?}");
    }
    for extra in [
        r#","x":1"#,
        r#","pane":"w1:p2""#,
        r#","seq":-1"#,
        r#","message":7"#,
    ] {
        assert_eq!(
            denied(&report(extra)),
            "params do not match herdr's schema",
            "{extra}"
        );
    }
    let missing_state = format!(r#"{{"pane_id":"{PANE}","source":"s","agent":"claude"}}"#);
    let reason = denied(&request("pane.report_agent", &missing_state));
    assert_eq!(reason, "params do not match herdr's schema");
}

#[test]
fn session_ids_keep_to_the_charset() {
    let ok = ["abc", "0b7f3c2e-9a41", "a.b_c-d", &"x".repeat(128)];
    for id in ok {
        let line = report(&format!(r#","agent_session_id":"{id}""#));
        assert!(decide(&line, &full_policy()).is_forward(), "{id}");
    }
    let long = "x".repeat(129);
    let bad = [
        "abc;rm -rf ~",
        "a b",
        "$(id)",
        "a'b",
        "",
        "é",
        "a/b",
        "--settings",
        &long,
    ];
    for id in bad {
        let reason = denied(&report(&format!(r#","agent_session_id":"{id}""#)));
        assert_eq!(reason, "invalid agent_session_id", "{id:?}");
    }
}

#[test]
fn transcript_paths_must_lie_inside_the_agents_session_dir() {
    let good = format!("{SESSIONS}/-home-u-project/abc.jsonl");
    assert!(decide(&with_path(&good), &full_policy()).is_forward());
    let cases = [
        (
            "/home/u/.claude/.credentials.json",
            "agent_session_path is outside the agent's session dir",
        ),
        (
            "/home/u/.claude/projects-evil/a.jsonl",
            "agent_session_path is outside the agent's session dir",
        ),
        (
            SESSIONS,
            "agent_session_path is outside the agent's session dir",
        ),
        (
            "/etc/passwd",
            "agent_session_path is outside the agent's session dir",
        ),
        (
            "/home/u/.claude/projects/../settings.json",
            "agent_session_path has a '..', '.' or empty component",
        ),
        (
            "/home/u/.claude/projects/a/../../x",
            "agent_session_path has a '..', '.' or empty component",
        ),
        (
            "/home/u/.claude/projects/./a.jsonl",
            "agent_session_path has a '..', '.' or empty component",
        ),
        (
            "/home/u/.claude/projects//a.jsonl",
            "agent_session_path has a '..', '.' or empty component",
        ),
        (
            "/home/u/.claude/projects/a/",
            "agent_session_path has a '..', '.' or empty component",
        ),
        (
            "home/u/.claude/projects/a.jsonl",
            "agent_session_path is not absolute",
        ),
        ("./a.jsonl", "agent_session_path is not absolute"),
        ("", "agent_session_path is not absolute"),
        (
            "/home/u/.claude/projects/a\\u0000.jsonl",
            "agent_session_path has a control character",
        ),
        (
            "/home/u/.claude/projects/a\\n.jsonl",
            "agent_session_path has a control character",
        ),
        (
            "/home/u/.claude/projects/a\\u001b.jsonl",
            "agent_session_path has a control character",
        ),
        (
            "/home/u/.claude/projects/a b.jsonl",
            "agent_session_path has a character outside [A-Za-z0-9._/-]",
        ),
        (
            "/home/u/.claude/projects/$(id).jsonl",
            "agent_session_path has a character outside [A-Za-z0-9._/-]",
        ),
        (
            "/home/u/.claude/projects/é.jsonl",
            "agent_session_path has a character outside [A-Za-z0-9._/-]",
        ),
    ];
    for (path, rule) in cases {
        assert_eq!(denied(&with_path(path)), rule, "{path:?}");
    }
    let long = format!("{SESSIONS}/{}", "a".repeat(4096));
    assert_eq!(denied(&with_path(&long)), "agent_session_path too long");
}

#[test]
fn pis_auth_json_sits_outside_its_sessions_and_is_denied() {
    let policy = FilterPolicy {
        notify: false,
        agent_reporting: Some(AgentReporting {
            pane_id: PANE.to_owned(),
            agent: "pi".to_owned(),
            session_dir: PathBuf::from("/home/u/.pi/agent/sessions"),
        }),
        launch_overlay: None,
    };
    let line = |path: &str| {
        let params = format!(
            r#"{{"pane_id":"{PANE}","source":"s","agent":"pi","agent_session_path":"{path}"}}"#
        );
        request("pane.report_agent_session", &params)
    };
    let reason = denied_with(&line("/home/u/.pi/agent/auth.json"), &policy);
    assert_eq!(
        reason,
        "agent_session_path is outside the agent's session dir"
    );
    let session = "/home/u/.pi/agent/sessions/--work-main--/2025-01-01T00-00-00_abc.jsonl";
    assert!(decide(&line(session), &policy).is_forward());
}

#[test]
fn an_unusable_session_dir_confines_to_nothing() {
    for dir in ["relative/sessions", "/home/u/../u/.claude/projects"] {
        let mut policy = full_policy();
        if let Some(reporting) = policy.agent_reporting.as_mut() {
            reporting.session_dir = PathBuf::from(dir);
        }
        let reason = denied_with(&with_path("/home/u/.claude/projects/a.jsonl"), &policy);
        assert_eq!(
            reason, "agent_session_path is outside the agent's session dir",
            "{dir}"
        );
    }
}

#[test]
fn source_message_and_start_source_are_bounded_text() {
    let bad_source = request(
        "pane.release_agent",
        &format!(r#"{{"pane_id":"{PANE}","source":"a\u001bb","agent":"claude"}}"#),
    );
    assert_eq!(denied(&bad_source), "invalid report source");
    let empty_source = request(
        "pane.release_agent",
        &format!(r#"{{"pane_id":"{PANE}","source":"","agent":"claude"}}"#),
    );
    assert_eq!(denied(&empty_source), "invalid report source");
    let long = "m".repeat(1025);
    assert_eq!(
        denied(&report(&format!(r#","message":"{long}""#))),
        "invalid report message"
    );
    assert_eq!(
        denied(&report(r#","message":"a\rb""#)),
        "invalid report message"
    );
    let reason = denied(&report_session(r#","session_start_source":"a;b""#));
    assert_eq!(reason, "invalid session_start_source");
}

#[test]
fn denied_session_values_reach_neither_the_log_nor_the_response() {
    let id = "leak;marker";
    let path = "/home/u/.claude/leakmarker/auth.json";
    for line in [
        report(&format!(r#","agent_session_id":"{id}""#)),
        with_path(path),
        with_path("/home/u/.claude/projects/leak\\u0007marker"),
        request(
            "pane.report_agent_session",
            r#"{"pane_id":"leakmarker","source":"s","agent":"claude"}"#,
        ),
    ] {
        let Decision::Deny {
            response,
            method,
            reason,
        } = decide(&line, &full_policy())
        else {
            panic!("expected a denial");
        };
        let response = String::from_utf8_lossy(&response);
        for text in [&*response, &method, &reason] {
            assert!(!text.contains("leak"), "{text}");
            assert!(!text.contains("marker"), "{text}");
        }
    }
}
