//! The ownership table: ids enter it only from herdr's `tab_created` answers to forwarded
//! `tab.create`s, of exactly the expected shape, and leave it when herdr closes the tab.

use serde_json::{Value, json};

use super::super::{Decision, MAX_OWNED_TABS, Observed, Owned, decide, observe_response};
use super::launch::{launch_policy, owning};
use super::{denied_owning, forwarded, request};

fn forward(line: &[u8], owned: &Owned) -> Vec<u8> {
    forwarded(decide(line, &launch_policy(), owned)).into_bytes()
}

fn create_line() -> Vec<u8> {
    forward(&request("tab.create", "{}"), &Owned::new())
}

fn answer(value: Value) -> Vec<u8> {
    format!("{value}\n").into_bytes()
}

/// A `tab_created` answer to `r1` for tab `w1:t2` and pane `w1:p3`, to be bent by each test.
fn created() -> Value {
    json!({"id": "r1", "result": {
        "type": "tab_created",
        "tab": {"tab_id": "w1:t2", "workspace_id": "w1", "number": 2, "label": "",
                "focused": true, "pane_count": 1, "agent_status": "unknown"},
        "root_pane": {"pane_id": "w1:p3", "terminal_id": "t", "workspace_id": "w1",
                      "tab_id": "w1:t2", "focused": true, "agent_status": "unknown",
                      "revision": 0},
    }})
}

fn send_p3() -> Vec<u8> {
    request(
        "pane.send_input",
        r#"{"pane_id":"w1:p3","text":"sh /tmp/s/launch","keys":["Enter"]}"#,
    )
}

#[test]
fn a_recorded_answer_is_what_makes_a_pane_the_sandboxs() {
    let mut owned = Owned::new();
    let reason = denied_owning(&send_p3(), &launch_policy(), &owned);
    assert_eq!(reason, "pane not created by this sandbox");
    let observed = observe_response(&create_line(), &answer(created()), &mut owned);
    assert_eq!(observed, Observed::Recorded);
    assert!(owned.owns_tab("w1:t2") && owned.owns_pane("w1:p3"));
    assert!(!owned.owns_pane("w1:t2") && !owned.owns_tab("w1:p3"));
    assert!(decide(&send_p3(), &launch_policy(), &owned).is_forward());
}

#[test]
fn nothing_the_client_sent_is_recorded() {
    // The request names ids in every field it may carry; only herdr's answer counts.
    let line = request(
        "tab.create",
        r#"{"workspace_id":"w1","label":"w1:p1","cwd":"/home/u/project"}"#,
    );
    let line = forward(&line, &Owned::new());
    let mut owned = Owned::new();
    assert_eq!(
        observe_response(&line, &answer(created()), &mut owned),
        Observed::Recorded
    );
    assert!(!owned.owns_pane("w1:p1") && !owned.owns_tab("w1:p1"));
    assert_eq!(owned.len(), 1);
    // A send_input or ping answered with a tab_created shape is not a tab.create's answer.
    for line in [send_p3(), request("ping", "{}")] {
        let line = forward(&line, &owning(&[("w1:t9", "w1:p3")]));
        let mut owned = Owned::new();
        assert_eq!(
            observe_response(&line, &answer(created()), &mut owned),
            Observed::Unobserved
        );
        assert!(owned.is_empty());
    }
}

#[test]
fn an_error_answer_records_nothing() {
    let mut owned = Owned::new();
    let error = json!({"id": "r1", "error": {"code": "workspace_not_found", "message": "no"}});
    let observed = observe_response(&create_line(), &answer(error), &mut owned);
    assert_eq!(observed, Observed::Ignored("herdr answered an error"));
    assert!(owned.is_empty());
    assert!(!decide(&send_p3(), &launch_policy(), &owned).is_forward());
}

#[test]
fn an_answer_of_any_other_shape_records_nothing() {
    // (what, where in the answer, the value put there; `None` removes the key)
    let bent: &[(&str, &[&str], Option<Value>)] = &[
        ("extra envelope key", &["extra"], Some(json!(1))),
        (
            "error beside result",
            &["error"],
            Some(json!({"code": "x"})),
        ),
        ("another request's id", &["id"], Some(json!("r2"))),
        ("empty id", &["id"], Some(json!(""))),
        ("no id", &["id"], None),
        (
            "extra result key",
            &["result", "pane"],
            Some(json!({"pane_id": "w1:p1"})),
        ),
        ("another type", &["result", "type"], Some(json!("tab_info"))),
        ("ok", &["result"], Some(json!({"type": "ok"}))),
        (
            "result not an object",
            &["result"],
            Some(json!("tab_created")),
        ),
        ("no tab id", &["result", "tab", "tab_id"], None),
        ("no root pane", &["result", "root_pane"], None),
        (
            "tab id a number",
            &["result", "tab", "tab_id"],
            Some(json!(2)),
        ),
        (
            "pane id a number",
            &["result", "root_pane", "pane_id"],
            Some(json!(3)),
        ),
        (
            "root pane null",
            &["result", "root_pane"],
            Some(json!(null)),
        ),
        ("tab a list", &["result", "tab"], Some(json!(["w1:t2"]))),
        (
            "pane in another tab",
            &["result", "root_pane", "tab_id"],
            Some(json!("w1:t1")),
        ),
        (
            "pane elsewhere",
            &["result", "root_pane", "workspace_id"],
            Some(json!("w2")),
        ),
        (
            "odd pane id",
            &["result", "root_pane", "pane_id"],
            Some(json!("w1:p3; rm")),
        ),
        (
            "empty pane id",
            &["result", "root_pane", "pane_id"],
            Some(json!("")),
        ),
        (
            "long pane id",
            &["result", "root_pane", "pane_id"],
            Some(json!("p".repeat(65))),
        ),
        (
            "control in tab id",
            &["result", "tab", "tab_id"],
            Some(json!("w1:t2\n")),
        ),
    ];
    for (what, path, value) in bent {
        let mut answer_value = created();
        let (last, parents) = path.split_last().expect("a path");
        let parent = parents
            .iter()
            .fold(&mut answer_value, |v, key| &mut v[*key]);
        let parent = parent.as_object_mut().expect("an object");
        match value {
            Some(value) => parent.insert((*last).to_owned(), value.clone()),
            None => parent.remove(*last),
        };
        let mut owned = Owned::new();
        let observed = observe_response(&create_line(), &answer(answer_value), &mut owned);
        assert!(
            matches!(observed, Observed::Ignored(_)),
            "{what}: {observed:?}"
        );
        assert!(owned.is_empty(), "{what}");
    }
    let good = created().to_string();
    let duplicate = good.replacen(
        r#""pane_id":"w1:p3""#,
        r#""pane_id":"w1:p3","pane_id":"w1:p1""#,
        1,
    );
    assert_ne!(duplicate, good);
    for raw in [
        duplicate,
        format!("{good} {{}}"),
        format!(" {good}"),
        good[..good.len() - 1].to_owned(),
        "not json".to_owned(),
        String::new(),
        "[]".to_owned(),
    ] {
        let mut owned = Owned::new();
        let observed = observe_response(&create_line(), raw.as_bytes(), &mut owned);
        assert!(matches!(observed, Observed::Ignored(_)), "{raw}");
        assert!(owned.is_empty(), "{raw}");
    }
}

#[test]
fn fields_a_later_herdr_adds_inside_tab_and_pane_are_ignored() {
    let mut value = created();
    value["result"]["tab"]["color"] = json!("red");
    value["result"]["root_pane"]["scroll"] = json!({"offset_from_bottom": 0});
    let mut owned = Owned::new();
    let observed = observe_response(&create_line(), &answer(value), &mut owned);
    assert_eq!(observed, Observed::Recorded);
    // Without its trailing newline too.
    let mut owned = Owned::new();
    let line = created().to_string();
    let observed = observe_response(&create_line(), line.as_bytes(), &mut owned);
    assert_eq!(observed, Observed::Recorded);
}

/// A `tab_created` answer for tab `w1:t<n>` and pane `w1:p<n>`.
fn created_n(n: usize) -> Vec<u8> {
    let mut value = created();
    value["result"]["tab"]["tab_id"] = json!(format!("w1:t{n}"));
    value["result"]["root_pane"]["tab_id"] = json!(format!("w1:t{n}"));
    value["result"]["root_pane"]["pane_id"] = json!(format!("w1:p{n}"));
    answer(value)
}

#[test]
fn the_table_holds_at_most_256_tabs() {
    let mut owned = Owned::new();
    for n in 0..MAX_OWNED_TABS {
        let observed = observe_response(&create_line(), &created_n(n), &mut owned);
        assert_eq!(observed, Observed::Recorded, "{n}");
    }
    assert_eq!(owned.len(), MAX_OWNED_TABS);
    let full = MAX_OWNED_TABS;
    let observed = observe_response(&create_line(), &created_n(full), &mut owned);
    assert_eq!(
        observed,
        Observed::Ignored("the table of owned tabs is full")
    );
    assert_eq!(owned.len(), MAX_OWNED_TABS);
    let send_last = request(
        "pane.send_input",
        &json!({"pane_id": format!("w1:p{full}"), "text": "sh /tmp/s/launch", "keys": ["Enter"]})
            .to_string(),
    );
    let reason = denied_owning(&send_last, &launch_policy(), &owned);
    assert_eq!(reason, "pane not created by this sandbox");
    // Closing one makes room again.
    let close = forward(&request("tab.close", r#"{"tab_id":"w1:t0"}"#), &owned);
    let ok = answer(json!({"id": "r1", "result": {"type": "ok"}}));
    assert_eq!(
        observe_response(&close, &ok, &mut owned),
        Observed::Released
    );
    let observed = observe_response(&create_line(), &created_n(full), &mut owned);
    assert_eq!(observed, Observed::Recorded);
    assert!(decide(&send_last, &launch_policy(), &owned).is_forward());
}

#[test]
fn an_answer_naming_an_owned_tab_or_pane_again_records_nothing() {
    let mut owned = owning(&[("w1:t2", "w1:p3")]);
    let mut same_pane = created();
    same_pane["result"]["tab"]["tab_id"] = json!("w1:t5");
    same_pane["result"]["root_pane"]["tab_id"] = json!("w1:t5");
    for value in [created(), same_pane] {
        let observed = observe_response(&create_line(), &answer(value), &mut owned);
        assert_eq!(
            observed,
            Observed::Ignored("the answer names a tab or pane already owned")
        );
    }
    assert_eq!(owned.len(), 1);
}

#[test]
fn a_closed_tab_and_its_pane_are_released() {
    let owned = owning(&[("w1:t2", "w1:p3"), ("w1:t3", "w1:p4")]);
    let close = forward(&request("tab.close", r#"{"tab_id":"w1:t2"}"#), &owned);
    // herdr's ok, or its tab_not_found (the user closed it), releases the tab and its pane.
    for gone in [
        json!({"id": "r1", "result": {"type": "ok"}}),
        json!({"id": "r1", "error": {"code": "tab_not_found", "message": "tab w1:t2 not found"}}),
    ] {
        let mut after = owned.clone();
        assert_eq!(
            observe_response(&close, &answer(gone), &mut after),
            Observed::Released
        );
        assert!(!after.owns_tab("w1:t2") && !after.owns_pane("w1:p3"));
        assert!(after.owns_tab("w1:t3") && after.owns_pane("w1:p4"));
        let reason = denied_owning(&send_p3(), &launch_policy(), &after);
        assert_eq!(reason, "pane not created by this sandbox");
        let again = request("tab.close", r#"{"tab_id":"w1:t2"}"#);
        let reason = denied_owning(&again, &launch_policy(), &after);
        assert_eq!(reason, "tab not created by this sandbox");
    }
    // Any other answer keeps it.
    for kept in [
        json!({"id": "r1", "error": {"code": "internal_error", "message": "busy"}}),
        json!({"id": "r2", "result": {"type": "ok"}}),
        json!({"id": "r1", "result": {"type": "ok", "extra": true}}),
        json!({"id": "r1", "result": {"type": "tab_info"}}),
        json!({"id": "r1"}),
    ] {
        let mut after = owned.clone();
        let observed = observe_response(&close, &answer(kept.clone()), &mut after);
        assert!(matches!(observed, Observed::Ignored(_)), "{kept}");
        assert_eq!(after, owned, "{kept}");
    }
}

#[test]
fn log_reasons_are_fixed_text() {
    let reasons = [
        Observed::Unobserved.log_reason(),
        Observed::Recorded.log_reason(),
        Observed::Released.log_reason(),
        Observed::Ignored("herdr answered an error").log_reason(),
    ];
    assert_eq!(reasons[0], "forwarded");
    for reason in reasons {
        assert!(
            reason.starts_with("forwarded") && !reason.contains("w1:"),
            "{reason}"
        );
    }
    // A denied request never reaches observe_response: decide answered it.
    assert!(matches!(
        decide(&send_p3(), &launch_policy(), &Owned::new()),
        Decision::Deny { .. }
    ));
}
