//! `notification.show`: only with `notify`, bounded text, schema enums.

use super::super::FilterPolicy;
use super::{decide, denied, denied_with, forwarded, full_policy, request};

fn show(params: &str) -> Vec<u8> {
    request("notification.show", params)
}

#[test]
fn denied_without_the_notify_capability() {
    let policy = FilterPolicy {
        notify: false,
        ..full_policy()
    };
    let reason = denied_with(&show(r#"{"title":"done"}"#), &policy);
    assert_eq!(reason, "notify capability not enabled");
    let reason = denied_with(&show(r#"{"title":"done"}"#), &FilterPolicy::default());
    assert_eq!(reason, "notify capability not enabled");
}

#[test]
fn forwarded_with_notify_and_every_optional_field() {
    let line = show(
        r#"{"title":"done","body":"all tests pass","position":"bottom-right","sound":"request"}"#,
    );
    assert_eq!(
        forwarded(decide(&line, &full_policy())),
        "{\"id\":\"r1\",\"method\":\"notification.show\",\"params\":{\"title\":\"done\",\"body\":\"all tests pass\",\"position\":\"bottom-right\",\"sound\":\"request\"}}\n"
    );
    for position in ["top-left", "top-right", "bottom-left", "bottom-right"] {
        let line = show(&format!(r#"{{"title":"t","position":"{position}"}}"#));
        assert!(decide(&line, &full_policy()).is_forward(), "{position}");
    }
    for sound in ["none", "done", "request"] {
        let line = show(&format!(r#"{{"title":"t","sound":"{sound}"}}"#));
        assert!(decide(&line, &full_policy()).is_forward(), "{sound}");
    }
}

#[test]
fn nullable_fields_accept_null_and_drop_it() {
    let line = show(r#"{"title":"t","body":null,"position":null}"#);
    assert_eq!(
        forwarded(decide(&line, &full_policy())),
        "{\"id\":\"r1\",\"method\":\"notification.show\",\"params\":{\"title\":\"t\"}}\n"
    );
}

#[test]
fn values_outside_the_schema_are_denied() {
    for params in [
        r#"{}"#,
        r#"{"title":null}"#,
        r#"{"title":5}"#,
        r#"{"title":"t","sound":null}"#,
        r#"{"title":"t","sound":"Done"}"#,
        r#"{"title":"t","sound":"beep"}"#,
        r#"{"title":"t","position":"middle"}"#,
        r#"{"title":"t","position":"Top-Left"}"#,
        r#"{"title":"t","body":["b"]}"#,
    ] {
        assert_eq!(
            denied(&show(params)),
            "params do not match herdr's schema",
            "{params}"
        );
    }
}

#[test]
fn the_title_is_at_most_80_characters() {
    let line = show(&format!(r#"{{"title":"{}"}}"#, "t".repeat(80)));
    assert!(decide(&line, &full_policy()).is_forward());
    // Characters, not bytes: 80 two-byte characters pass.
    let line = show(&format!(r#"{{"title":"{}"}}"#, "é".repeat(80)));
    assert!(decide(&line, &full_policy()).is_forward());
    let line = show(&format!(r#"{{"title":"{}"}}"#, "t".repeat(81)));
    assert_eq!(denied(&line), "notification title over 80 characters");
}

#[test]
fn the_body_is_at_most_240_characters() {
    let line = show(&format!(r#"{{"title":"t","body":"{}"}}"#, "b".repeat(240)));
    assert!(decide(&line, &full_policy()).is_forward());
    let line = show(&format!(r#"{{"title":"t","body":"{}"}}"#, "b".repeat(241)));
    assert_eq!(denied(&line), "notification body over 240 characters");
}

#[test]
fn control_characters_in_the_text_are_denied() {
    for params in [
        r#"{"title":"\u001b]52;c;aGk=\u0007"}"#,
        r#"{"title":"a\u0000b"}"#,
        r#"{"title":"t","body":"line\nline"}"#,
        r#"{"title":"t","body":"\u009b2J"}"#,
    ] {
        let reason = denied(&show(params));
        assert_eq!(
            reason, "notification text has a control character",
            "{params}"
        );
    }
}

#[test]
fn the_denial_never_repeats_the_text() {
    let secret = "sk-live-0123456789";
    let line = show(&format!(r#"{{"title":"{secret}{}"}}"#, "x".repeat(80)));
    let reason = denied(&line);
    let response = match decide(&line, &full_policy()) {
        super::super::Decision::Deny { response, .. } => response,
        super::super::Decision::Forward { .. } => unreachable!(),
    };
    assert!(!reason.contains(secret));
    assert!(!String::from_utf8_lossy(&response).contains(secret));
}
