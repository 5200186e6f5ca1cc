//! `launch`: host code execution, so only with the type's capability, a declared command and
//! none of the options that hand the program more of the host.

use serde_json::json;

use super::super::{Capability, Command};
use super::{
    CALLER, OWNED, REVDIFF, denied, denied_with, forwarded, forwarded_with, full_policy, owned,
    policy_with, request,
};

/// A launch of revdiff with `fields` added to its payload (JSON members, may be empty).
fn launch(fields: &str) -> Vec<u8> {
    let sep = if fields.is_empty() { "" } else { "," };
    request(
        "launch",
        &format!(r#"{{"args":["{REVDIFF}","--staged"]{sep}{fields}}}"#),
    )
}

#[test]
fn each_window_type_needs_its_own_capability() {
    let cases = [
        (r#""type":"overlay""#, Capability::LaunchOverlay, "overlay"),
        (
            r#""type":"overlay-main""#,
            Capability::LaunchOverlay,
            "overlay-main",
        ),
        (r#""type":"window""#, Capability::LaunchWindow, "window"),
        // kitty's default type is a window.
        ("", Capability::LaunchWindow, "window"),
        (r#""type":"tab""#, Capability::LaunchTab, "tab"),
        (
            r#""type":"os-window""#,
            Capability::LaunchOsWindow,
            "os-window",
        ),
    ];
    for (fields, capability, kind) in cases {
        let line = launch(fields);
        let (text, cmd, expect) = forwarded_with(&line, &policy_with(&[capability]), &owned(&[]));
        let value: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(value["payload"]["type"], kind, "{fields}");
        assert_eq!(cmd, Command::Launch);
        assert!(expect);
        let others: Vec<_> = Capability::ALL
            .into_iter()
            .filter(|c| *c != capability)
            .collect();
        let reason = denied_with(&line, &policy_with(&others), &owned(&[]));
        assert_eq!(
            reason,
            format!("{} capability not enabled", capability.as_str())
        );
    }
}

#[test]
fn windowless_and_clipboard_types_are_denied() {
    for kind in [
        "background",
        "clipboard",
        "primary",
        "os-panel",
        "Overlay",
        "",
    ] {
        let line = launch(&format!(r#""type":"{kind}""#));
        assert_eq!(denied(&line), "launch type not allowed", "{kind}");
    }
}

#[test]
fn the_forwarded_launch_is_reserialised_from_checked_values() {
    // kitten's defaults, an escape, odd spacing and key order are the client's; the forwarded
    // frame is airlock's, with `type` explicit and defaults dropped.
    let line = format!(
        r#"{{ "payload" : {{"type":"overlay","location":"default","stdin_source":"none","logo_alpha":-1,"os_window_state":"normal","keep_focus":true,"copy_env":[],"env":[],"hold":false,"cwd":"","window_title":"R\u00e9v","args":["\/usr\/local\/bin\/revdiff"]}}, "version":[0,42,0], "cmd":"launch", "kitty_window_id":{CALLER} }}"#
    );
    let (text, _, _) = forwarded_with(line.as_bytes(), &full_policy(), &owned(&[]));
    assert_eq!(
        text,
        r#"{"cmd":"launch","version":[0,42,0],"kitty_window_id":7,"payload":{"args":["/usr/local/bin/revdiff"],"keep_focus":true,"location":"default","os_window_state":"normal","type":"overlay","window_title":"R\u00e9v"}}"#
    );
}

#[test]
fn unknown_payload_fields_cannot_be_smuggled() {
    // kitty would ignore a field it does not know today; one it learns tomorrow could be one
    // the filter should have checked.
    for field in [
        r#""future_option":true"#,
        r#""Type":"tab""#,
        r#""title":"x""#,
    ] {
        assert_eq!(
            denied(&launch(field)),
            "payload does not match kitty's launch schema",
            "{field}"
        );
    }
    assert_eq!(
        denied(&launch(r#""hold":"yes""#)),
        "payload does not match kitty's launch schema"
    );
    assert_eq!(
        denied(&launch(r#""cwd":null"#)),
        "null payload fields are refused"
    );
}

#[test]
fn each_refused_option_is_denied_with_its_own_reason() {
    let cases = [
        (
            r#""env":["AWS_SECRET=SECRET-VALUE"]"#,
            "launch --env is refused",
        ),
        (
            r#""copy_env":["HOME=/SECRET-VALUE"]"#,
            "launch --copy-env is refused",
        ),
        (r#""copy_env":true"#, "launch --copy-env is refused"),
        (r#""copy_cmdline":true"#, "launch --copy-cmdline is refused"),
        (
            r#""watcher":["/tmp/SECRET-VALUE.py"]"#,
            "launch --watcher is refused",
        ),
        (
            r#""allow_remote_control":true"#,
            "launch --allow-remote-control is refused",
        ),
        (
            r#""remote_control_password":["SECRET-VALUE ls"]"#,
            "launch --remote-control-password is refused",
        ),
        (
            r#""source_window":"id:1""#,
            "launch --source-window is refused",
        ),
        (r#""next_to":"id:1""#, "launch --next-to is refused"),
        (
            r#""add_to_session":"SECRET-VALUE""#,
            "launch --add-to-session is refused",
        ),
        (r#""os_panel":["edge=top"]"#, "launch --os-panel is refused"),
        (r#""hold":true"#, "launch --hold is refused"),
        (
            r#""hold_after_ssh":true"#,
            "launch --hold-after-ssh is refused",
        ),
        (
            r#""marker":"text 1 SECRET-VALUE""#,
            "launch --marker is refused",
        ),
        (
            r#""logo":"/home/u/SECRET-VALUE.png""#,
            "launch --logo is refused",
        ),
        (r#""logo_position":"top-left""#, "launch --logo is refused"),
        (r#""logo_alpha":0.5"#, "launch --logo is refused"),
        (
            r#""stdin_source":"@screen_scrollback""#,
            "launch --stdin-source other than none is refused",
        ),
        (
            r#""stdin_source":"@selection""#,
            "launch --stdin-source other than none is refused",
        ),
        (r#""cwd":"current""#, "launch --cwd is refused"),
        (r#""cwd":"/SECRET-VALUE""#, "launch --cwd is refused"),
        (r#""var":["k=v"]"#, "launch --var is not supported"),
        (
            r#""color":["background=red"]"#,
            "launch --color is not supported",
        ),
        (
            r#""spacing":["padding=0"]"#,
            "launch --spacing is not supported",
        ),
    ];
    for (fields, rule) in cases {
        assert_eq!(denied(&launch(fields)), rule, "{fields}");
    }
}

#[test]
fn refused_options_at_their_defaults_pass() {
    let fields = r#""env":[],"copy_env":false,"copy_cmdline":false,"watcher":[],"allow_remote_control":false,"remote_control_password":[],"source_window":"","next_to":"","add_to_session":"","os_panel":[],"hold":false,"hold_after_ssh":false,"marker":"","logo":"","logo_position":"","logo_alpha":-1,"stdin_source":"none","cwd":"","var":[],"color":[],"spacing":[]"#;
    let payload = forwarded(&launch(fields))["payload"].clone();
    assert_eq!(
        payload,
        json!({"args":[REVDIFF,"--staged"],"type":"window"})
    );
}

#[test]
fn match_may_name_only_the_callers_own_tab() {
    let line = launch(&format!(r#""match":"window_id:{CALLER}""#));
    assert_eq!(
        forwarded(&line)["payload"]["match"],
        format!("window_id:{CALLER}")
    );
    assert_eq!(
        forwarded(&launch(r#""match":"""#))["payload"].get("match"),
        None
    );
    for expr in [
        format!("id:{CALLER}"), // a tab id first: may be another tab
        format!("window_id:{}", CALLER + 1),
        format!("window_id:0{CALLER}"),
        format!("window_id:{CALLER} or id:1"),
        "all".to_owned(),
        "title:SECRET-VALUE".to_owned(),
        "recent:0".to_owned(),
    ] {
        let line = launch(&format!(r#""match":"{expr}""#));
        assert_eq!(
            denied(&line),
            "launch --match other than the caller's window is refused",
            "{expr}"
        );
    }
}

#[test]
fn an_empty_or_missing_command_is_denied() {
    // kitty runs the user's shell on the host for an empty command line.
    let line = request("launch", r#"{"args":[],"type":"overlay"}"#);
    assert_eq!(
        denied(&line),
        "launch without a command runs the host shell"
    );
    let line = request("launch", r#"{"type":"overlay"}"#);
    assert_eq!(
        denied(&line),
        "launch without a command runs the host shell"
    );
}

#[test]
fn titles_are_bounded_and_free_of_control_characters() {
    assert_eq!(
        forwarded(&launch(r#""tab_title":"review","os_window_title":"diff""#))["payload"]["tab_title"],
        "review"
    );
    for field in [
        "window_title",
        "tab_title",
        "os_window_title",
        "os_window_name",
        "os_window_class",
    ] {
        let line = launch(&format!(r#""{field}":"a\u001b]0;SECRET-VALUE\u0007""#));
        assert_eq!(
            denied(&line),
            "title too long or has a control character",
            "{field}"
        );
        let line = launch(&format!(r#""{field}":"{}""#, "x".repeat(257)));
        assert_eq!(
            denied(&line),
            "title too long or has a control character",
            "{field}"
        );
    }
}

#[test]
fn choice_options_must_be_kittys_choices() {
    assert_eq!(
        denied(&launch(r#""location":"elsewhere""#)),
        "unknown launch --location"
    );
    assert_eq!(
        denied(&launch(r#""os_window_state":"huge""#)),
        "unknown launch --os-window-state"
    );
    let payload =
        forwarded(&launch(r#""location":"vsplit","bias":30,"self":true"#))["payload"].clone();
    assert_eq!(payload["location"], "vsplit");
    assert_eq!(payload["bias"], 30.0);
    assert_eq!(payload["self"], true);
}

#[test]
fn kittens_async_tag_is_accepted_on_launch_and_not_forwarded() {
    // `kitten @ launch` tags every launch as async; kitty answers a non-waiting one at once,
    // so the tag is dropped rather than registered in kitty's table of pending requests.
    let line = format!(
        r#"{{"cmd":"launch","version":[0,42,0],"kitty_window_id":{CALLER},"async":"abc-123","payload":{{"args":["{REVDIFF}"]}}}}"#
    );
    let value = forwarded(line.as_bytes());
    assert_eq!(value.get("async"), None);
    assert_eq!(value["cmd"], "launch");
}

#[test]
fn waiting_for_the_program_needs_wait_owned_and_keeps_the_async_id() {
    let line = |async_id: &str| {
        format!(
            r#"{{"cmd":"launch","version":[0,42,0],"kitty_window_id":{CALLER}{async_id},"payload":{{"args":["{REVDIFF}"],"type":"overlay","wait_for_child_to_exit":true}}}}"#
        )
        .into_bytes()
    };
    let with_id = line(r#","async":"abc-123""#);
    let (text, cmd, expect) = forwarded_with(&with_id, &full_policy(), &owned(&[]));
    let value: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(value["async"], "abc-123");
    assert_eq!(value["payload"]["wait_for_child_to_exit"], true);
    assert_eq!(cmd, Command::LaunchAndWait);
    assert!(expect);

    let no_wait = policy_with(&[Capability::LaunchOverlay]);
    assert_eq!(
        denied_with(&with_id, &no_wait, &owned(&[])),
        "wait_owned capability not enabled"
    );
    for async_id in ["", r#","async":"""#, r#","async":"a b""#] {
        assert_eq!(
            denied(&line(async_id)),
            "launch --wait-for-child-to-exit needs a valid async id",
            "{async_id}"
        );
    }
    // Asking not to wait is the plain launch.
    let value = forwarded(&launch(r#""wait_for_child_to_exit":false"#));
    assert_eq!(value["payload"].get("wait_for_child_to_exit"), None);
}

#[test]
fn no_response_is_forwarded_and_tells_the_loop_not_to_read_an_answer() {
    let line = format!(
        r#"{{"cmd":"launch","version":[0,42,0],"no_response":true,"payload":{{"args":["{REVDIFF}"]}}}}"#
    );
    let (text, cmd, expect) = forwarded_with(line.as_bytes(), &full_policy(), &owned(&[OWNED]));
    assert!(text.contains(r#""no_response":true"#));
    assert_eq!(cmd, Command::Launch);
    assert!(!expect);
}
