//! Tests of the herdr filter's decisions, by rule. Every denial goes through [`denied`], which
//! also checks that the response is herdr's error shape and that the log reason is a fixed rule.

mod decode;
mod groups;
mod launch;
mod mutation;
mod notify;
mod owned;
mod params;
mod reports;
mod session_dir;

use std::path::PathBuf;

use serde_json::Value;

use super::{AgentReporting, Decision, FilterPolicy, Owned};

const PANE: &str = "w1:p2";

/// Everything this module can allow: `notify`, and reporting for claude in pane `w1:p2`.
fn full_policy() -> FilterPolicy {
    FilterPolicy {
        notify: true,
        agent_reporting: Some(AgentReporting {
            pane_id: PANE.to_owned(),
            agent: "claude".to_owned(),
            session_dir: PathBuf::from("/home/u/.claude/projects"),
        }),
        launch_overlay: None,
    }
}

/// [`super::decide`] with nothing owned, for the rules that never look at the table.
fn decide(line: &[u8], policy: &FilterPolicy) -> Decision {
    super::decide(line, policy, &Owned::new())
}

/// A request line with id `r1`; `params` is JSON text.
fn request(method: &str, params: &str) -> Vec<u8> {
    format!(r#"{{"id":"r1","method":"{method}","params":{params}}}"#).into_bytes()
}

/// The forwarded line as text, panicking on a denial.
fn forwarded(decision: Decision) -> String {
    match decision {
        Decision::Forward { line, .. } => {
            String::from_utf8(line).expect("forwarded lines are UTF-8")
        }
        Decision::Deny { reason, .. } => panic!("expected a forward, denied: {reason}"),
    }
}

/// Decides `line` under `policy` and `owned`, expecting a denial; returns its log reason after
/// checking the response line: one line of herdr's error JSON, id as given, message naming method
/// and rule.
fn denied_owning(line: &[u8], policy: &FilterPolicy, owned: &Owned) -> String {
    let decision = super::decide(line, policy, owned);
    let Decision::Deny {
        response,
        method,
        reason,
    } = decision
    else {
        panic!("expected a denial of {:?}", String::from_utf8_lossy(line));
    };
    let text = std::str::from_utf8(&response).expect("denials are UTF-8");
    let body = text.strip_suffix('\n').expect("denials end in a newline");
    assert!(!body.contains('\n'), "one line: {text:?}");
    let value: Value = serde_json::from_str(body).expect("denials are JSON");
    let object = value.as_object().expect("an object");
    assert_eq!(object.len(), 2, "id and error only: {body}");
    let error = object["error"].as_object().expect("error is an object");
    assert_eq!(error.len(), 2, "code and message only: {body}");
    assert_eq!(error["code"], "forbidden");
    let subject = if method.is_empty() {
        "request"
    } else {
        &method
    };
    assert_eq!(
        error["message"],
        format!("airlock: {subject} is not allowed in this sandbox ({reason})")
    );
    assert!(object["id"].is_string());
    assert!(
        !reason.is_empty() && reason.len() < 80,
        "short reason: {reason}"
    );
    reason
}

/// [`denied_owning`] with nothing owned.
fn denied_with(line: &[u8], policy: &FilterPolicy) -> String {
    denied_owning(line, policy, &Owned::new())
}

/// [`denied_with`] under [`full_policy`].
fn denied(line: &[u8]) -> String {
    denied_with(line, &full_policy())
}

/// The id a denial answered with.
fn denial_id(line: &[u8], policy: &FilterPolicy) -> String {
    match decide(line, policy) {
        Decision::Deny { response, .. } => {
            let value: Value = serde_json::from_slice(&response).expect("denials are JSON");
            value["id"].as_str().expect("a string id").to_owned()
        }
        Decision::Forward { .. } => panic!("expected a denial"),
    }
}
