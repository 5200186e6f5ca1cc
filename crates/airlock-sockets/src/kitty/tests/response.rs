//! kitty's answers: ownership learnt from launch answers only, `ls` cut down to owned windows.

use serde_json::{Value, json};

use super::super::{Command, MAX_OWNED_WINDOWS, Owned, filter_ls_response, observe_response};
use super::{OWNED, SECRET, owned, unframe};

fn answer(value: Value) -> Vec<u8> {
    value.to_string().into_bytes()
}

#[test]
fn a_launch_answer_records_the_new_window() {
    let mut owned = Owned::new();
    let id = observe_response(Command::Launch, br#"{"ok":true,"data":"42"}"#, &mut owned);
    assert_eq!(id, Some(42));
    assert!(owned.contains(42));
    assert_eq!(owned.windows().collect::<Vec<_>>(), vec![42]);
    // Once is enough.
    assert_eq!(
        observe_response(Command::Launch, br#"{"ok":true,"data":"42"}"#, &mut owned),
        None
    );
    assert_eq!(owned.len(), 1);
}

#[test]
fn only_plain_launch_answers_create_ownership() {
    // A waiting launch answers with the exit status, other commands with text the sandbox may
    // control: none of it is a window id.
    for cmd in [
        Command::LaunchAndWait,
        Command::CloseWindow,
        Command::FocusWindow,
        Command::SendText,
        Command::GetText,
        Command::SetWindowTitle,
        Command::Ls,
    ] {
        let mut owned = Owned::new();
        assert_eq!(
            observe_response(cmd, br#"{"ok":true,"data":"5"}"#, &mut owned),
            None
        );
        assert!(owned.is_empty(), "{cmd:?}");
    }
}

#[test]
fn malformed_or_failed_launch_answers_record_nothing() {
    for body in [
        r#"{"ok":false,"error":"5"}"#,
        r#"{"ok":true,"data":"0"}"#,
        r#"{"ok":true,"data":5}"#,
        r#"{"ok":true,"data":"05"}"#,
        r#"{"ok":true,"data":"5 6"}"#,
        r#"{"ok":true,"data":"-5"}"#,
        r#"{"ok":true}"#,
        r#"{"ok":true,"data":"5","extra":1}"#,
        r#"{"ok":true,"data":"5","data":"6"}"#,
        r#"{"ok":"true","data":"5"}"#,
        r#"["ok"]"#,
        "",
    ] {
        let mut owned = Owned::new();
        assert_eq!(
            observe_response(Command::Launch, body.as_bytes(), &mut owned),
            None,
            "{body}"
        );
        assert!(owned.is_empty(), "{body}");
    }
}

#[test]
fn the_ownership_table_is_bounded() {
    let mut owned = Owned::new();
    for id in 1..=MAX_OWNED_WINDOWS as u64 + 10 {
        let body = format!(r#"{{"ok":true,"data":"{id}"}}"#);
        observe_response(Command::Launch, body.as_bytes(), &mut owned);
    }
    assert_eq!(owned.len(), MAX_OWNED_WINDOWS);
}

/// A listing as kitty's `ls` produces it: two OS windows, the user's windows 1–3 and the
/// sandbox's 42 in the second tab of the first OS window.
fn listing() -> Value {
    let window = |id: u64, title: &str| {
        json!({
            "id": id, "title": title, "is_focused": false, "is_active": true, "is_self": id == 1,
            "pid": 100 + id, "cwd": "/home/u", "cmdline": ["zsh"],
            "env": {"AWS_SECRET_ACCESS_KEY": SECRET, "PATH": "/usr/bin"},
            "foreground_processes": [{"pid": 200 + id, "cmdline": ["zsh"], "cwd": "/home/u", "environ": SECRET}],
            "user_vars": {}, "at_prompt": true, "lines": 40, "columns": 120, "created_at": 1.5,
            "last_reported_cmdline": "", "last_cmd_exit_status": 0, "in_alternate_screen": false,
            "future_field": SECRET,
        })
    };
    json!([
        {
            "id": 1, "platform_window_id": 77, "is_focused": true, "is_active": true,
            "wm_class": SECRET, "wm_name": "kitty", "background_opacity": 1.0,
            "tabs": [
                {"id": 1, "title": SECRET, "is_focused": true, "is_active": true, "layout": "tall",
                 "layout_state": {}, "enabled_layouts": ["tall"], "groups": [{"id": 1, "windows": [1]}],
                 "active_window_history": [1, 2], "windows": [window(1, SECRET), window(2, SECRET)]},
                {"id": 2, "title": "review", "is_focused": false, "is_active": false, "layout": "stack",
                 "active_window_history": [3], "windows": [window(3, SECRET), window(OWNED, "revdiff")]}
            ]
        },
        {"id": 2, "is_focused": false, "is_active": false, "tabs": [
            {"id": 3, "title": SECRET, "is_focused": false, "is_active": true, "layout": "tall", "windows": [window(4, SECRET)]}
        ]}
    ])
}

fn ls_answer(listing: &Value) -> Vec<u8> {
    // kitty pretty-prints the listing into a JSON string.
    let data = serde_json::to_string_pretty(listing).expect("JSON");
    answer(json!({"ok": true, "data": data}))
}

#[test]
fn ls_answers_keep_only_owned_windows_and_their_containers() {
    let frame = filter_ls_response(&ls_answer(&listing()), &owned(&[OWNED]));
    let text = unframe(&frame);
    assert!(!text.contains(SECRET), "nothing else leaks: {text}");
    let response: Value = serde_json::from_str(text).expect("JSON");
    assert_eq!(response["ok"], true);
    let data: Value =
        serde_json::from_str(response["data"].as_str().expect("a string")).expect("JSON");
    assert_eq!(
        data,
        json!([{
            "id": 1, "is_focused": true, "is_active": true,
            "tabs": [{"id": 2, "is_focused": false, "is_active": false, "layout": "stack", "windows": [{
                "id": OWNED, "title": "revdiff", "is_focused": false, "is_active": true, "is_self": false,
                "pid": 142, "cwd": "/home/u", "cmdline": ["zsh"],
                "foreground_processes": [{"pid": 242, "cmdline": ["zsh"], "cwd": "/home/u"}],
                "user_vars": {}, "at_prompt": true, "lines": 40, "columns": 120, "created_at": 1.5,
                "last_reported_cmdline": "", "last_cmd_exit_status": 0, "in_alternate_screen": false,
            }]}]
        }])
    );
}

#[test]
fn ls_answers_with_nothing_owned_are_empty() {
    let frame = filter_ls_response(&ls_answer(&listing()), &Owned::new());
    let response: Value = serde_json::from_str(unframe(&frame)).expect("JSON");
    assert_eq!(response, json!({"ok": true, "data": "[]"}));
}

#[test]
fn ls_errors_are_relayed_without_the_traceback() {
    let body = answer(json!({"ok": false, "error": "No matching windows", "tb": SECRET}));
    let frame = filter_ls_response(&body, &owned(&[OWNED]));
    let response: Value = serde_json::from_str(unframe(&frame)).expect("JSON");
    assert_eq!(
        response,
        json!({"ok": false, "error": "No matching windows"})
    );
}

#[test]
fn ls_answers_that_do_not_parse_are_replaced_by_an_error() {
    let unfilterable = [
        answer(json!({"ok": true, "data": "not json"})),
        answer(json!({"ok": true, "data": "{}"})),
        answer(json!({"ok": true, "data": "[{\"tabs\": 5}]"})),
        answer(
            json!({"ok": true, "data": "[{\"id\":1,\"tabs\":[{\"windows\":[{\"id\":\"42\"}]}]}]"}),
        ),
        answer(json!({"ok": true})),
        answer(json!({"ok": 1, "data": "[]"})),
        b"{\"ok\":true,\"ok\":true,\"data\":\"[]\"}".to_vec(),
        vec![0xff],
    ];
    for body in unfilterable {
        let frame = filter_ls_response(&body, &owned(&[OWNED]));
        let response: Value = serde_json::from_str(unframe(&frame)).expect("JSON");
        assert_eq!(
            response,
            json!({"ok": false, "error": "airlock: ls response could not be filtered"}),
            "{}",
            String::from_utf8_lossy(&body)
        );
    }
}
