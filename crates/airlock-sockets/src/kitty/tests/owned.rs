//! Owned-window commands: only with their capability, only at a window kitty reported this
//! sandbox's launch created, named exactly as `id:<id>`.

use serde_json::json;

use super::super::{Capability, Command};
use super::{
    OWNED, denied, denied_with, forwarded, forwarded_with, full_policy, owned, policy_with, request,
};

const NOT_OWNED: &str = "--match must name one window this sandbox launched";

/// Each owned-window command, its capability and a valid payload aimed at window 42.
fn commands() -> [(&'static str, Capability, Command, String); 6] {
    [
        (
            "close-window",
            Capability::CloseOwned,
            Command::CloseWindow,
            r#"{"match":"id:42"}"#.to_owned(),
        ),
        (
            "focus-window",
            Capability::FocusOwned,
            Command::FocusWindow,
            r#"{"match":"id:42"}"#.to_owned(),
        ),
        (
            "send-text",
            Capability::SendTextOwned,
            Command::SendText,
            r#"{"match":"id:42","data":"text:q"}"#.to_owned(),
        ),
        (
            "get-text",
            Capability::GetTextOwned,
            Command::GetText,
            r#"{"match":"id:42","extent":"all"}"#.to_owned(),
        ),
        (
            "set-window-title",
            Capability::SetTitleOwned,
            Command::SetWindowTitle,
            r#"{"match":"id:42","title":"review"}"#.to_owned(),
        ),
        (
            "ls",
            Capability::ListOwned,
            Command::Ls,
            r#"{"match":"id:42"}"#.to_owned(),
        ),
    ]
}

#[test]
fn each_command_is_allowed_for_an_owned_window_with_its_capability() {
    for (cmd, capability, command, payload) in commands() {
        let line = request(cmd, &payload);
        let (_, forwarded_cmd, _) =
            forwarded_with(&line, &policy_with(&[capability]), &owned(&[OWNED]));
        assert_eq!(forwarded_cmd, command, "{cmd}");
        let others: Vec<_> = Capability::ALL
            .into_iter()
            .filter(|c| *c != capability)
            .collect();
        assert_eq!(
            denied_with(&line, &policy_with(&others), &owned(&[OWNED])),
            format!("{} capability not enabled", capability.as_str()),
            "{cmd}"
        );
    }
}

#[test]
fn windows_the_sandbox_did_not_launch_are_out_of_reach() {
    for (cmd, _, _, payload) in commands() {
        // The caller's own window, an unowned one, and nothing owned at all.
        for (expr, owned_ids) in [
            ("id:7", &[OWNED][..]),
            ("id:43", &[OWNED][..]),
            ("id:42", &[][..]),
        ] {
            let line = request(cmd, &payload.replace("id:42", expr));
            assert_eq!(
                denied_with(&line, &full_policy(), &owned(owned_ids)),
                NOT_OWNED,
                "{cmd} {expr}"
            );
        }
    }
}

#[test]
fn only_a_single_exact_id_match_names_a_window() {
    for (cmd, _, _, payload) in commands() {
        for expr in [
            "id:42 or id:1",
            "id:042",
            "id:-1",
            "id: 42",
            "ID:42",
            "all",
            "title:SECRET-VALUE",
            "state:focused",
            "recent:0",
            "pid:42",
        ] {
            let line = request(cmd, &payload.replace("id:42", expr));
            assert_eq!(denied(&line), NOT_OWNED, "{cmd} {expr}");
        }
    }
}

#[test]
fn without_a_match_kitty_would_pick_the_users_window() {
    for (cmd, _, _, payload) in commands() {
        if cmd == "ls" {
            continue;
        }
        let line = request(cmd, &payload.replace(r#""match":"id:42""#, r#""match":"""#));
        assert_eq!(denied(&line), NOT_OWNED, "{cmd}");
        let mut value: serde_json::Value = serde_json::from_str(&payload).expect("JSON");
        value.as_object_mut().expect("object").remove("match");
        let line = request(cmd, &value.to_string());
        assert_eq!(denied(&line), NOT_OWNED, "{cmd}");
    }
}

#[test]
fn send_text_cannot_reach_other_windows() {
    let cases = [
        (
            r#"{"match":"id:42","data":"text:x","all":true}"#,
            "send-text --all is refused",
        ),
        (
            r#"{"match":"id:42","data":"text:x","match_tab":"id:1"}"#,
            "send-text --match-tab is refused",
        ),
        (
            r#"{"match":"id:42","data":"text:x","session_id":"s"}"#,
            "send-text broadcast sessions are refused",
        ),
        (
            r#"{"match":"id:42","data":"session:start"}"#,
            "send-text data encoding not allowed",
        ),
        (
            r#"{"match":"id:42","data":"SECRET-VALUE"}"#,
            "send-text data encoding not allowed",
        ),
        (
            r#"{"match":"id:42","data":"base64:SECRET VALUE"}"#,
            "send-text data is not base64",
        ),
        (r#"{"match":"id:42"}"#, "send-text needs data"),
        (
            r#"{"match":"id:42","data":"text:x","bracketed_paste":"always"}"#,
            "unknown send-text --bracketed-paste",
        ),
        (
            r#"{"match":"id:42","data":"text:x","window":"id:1"}"#,
            "payload does not match kitty's schema",
        ),
    ];
    for (payload, rule) in cases {
        assert_eq!(denied(&request("send-text", payload)), rule, "{payload}");
    }
}

#[test]
fn send_text_forwards_kittens_defaults_and_encodings() {
    let payload = r#"{"match":"id:42","data":"base64:cSAK","match_tab":"","all":false,"session_id":"","exclude_active":false,"bracketed_paste":"disable"}"#;
    assert_eq!(
        forwarded(&request("send-text", payload))["payload"],
        json!({"match":"id:42","data":"base64:cSAK","exclude_active":false,"bracketed_paste":"disable"})
    );
    for data in ["text:q\r", "kitty-key:G1tB", "text:"] {
        let payload = json!({"match":"id:42","data":data}).to_string();
        assert_eq!(
            forwarded(&request("send-text", &payload))["payload"]["data"],
            data
        );
    }
}

#[test]
fn get_text_extents_are_kittys() {
    for extent in [
        "screen",
        "all",
        "selection",
        "last_cmd_output",
        "last_non_empty_output",
    ] {
        let payload = json!({"match":"id:42","extent":extent,"ansi":true,"self":true}).to_string();
        assert_eq!(
            forwarded(&request("get-text", &payload))["payload"]["extent"],
            extent
        );
    }
    let line = request("get-text", r#"{"match":"id:42","extent":"everything"}"#);
    assert_eq!(denied(&line), "unknown get-text --extent");
}

#[test]
fn window_titles_are_checked() {
    let line = request(
        "set-window-title",
        r#"{"match":"id:42","title":"a\u0007b"}"#,
    );
    assert_eq!(denied(&line), "title too long or has a control character");
    // No title restores the program's own; allowed.
    let value = forwarded(&request(
        "set-window-title",
        r#"{"match":"id:42","temporary":true}"#,
    ));
    assert_eq!(value["payload"], json!({"match":"id:42","temporary":true}));
}

#[test]
fn ls_may_list_everything_or_one_owned_window_but_no_tab() {
    assert_eq!(forwarded(&request("ls", "{}"))["payload"], json!({}));
    assert_eq!(
        forwarded(&request(
            "ls",
            r#"{"all_env_vars":true,"match":"","match_tab":""}"#
        ))["payload"],
        json!({"all_env_vars":true})
    );
    let line = request("ls", r#"{"match_tab":"id:1"}"#);
    assert_eq!(denied(&line), "ls --match-tab is refused");
    let line = request("ls", r#"{"match":"id:43"}"#);
    assert_eq!(denied(&line), NOT_OWNED);
}

#[test]
fn the_ls_forward_tells_the_loop_to_filter_the_answer() {
    let (_, cmd, expect) = forwarded_with(&request("ls", "{}"), &full_policy(), &owned(&[]));
    assert_eq!(cmd, Command::Ls);
    assert!(expect);
}

#[test]
fn null_fields_are_refused() {
    let line = request("close-window", r#"{"match":"id:42","self":null}"#);
    assert_eq!(denied(&line), "null payload fields are refused");
}
