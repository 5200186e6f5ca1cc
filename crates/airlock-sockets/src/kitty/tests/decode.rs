//! Strict decoding (invariant 5): one object, one reading, kitty's envelope keys only.

use super::super::{Capability, KittyPolicy, MAX_DEPTH, decide, decode_request};
use super::{CALLER, OWNED, denied, denied_with, forwarded, full_policy, owned, request};

const LS: &str = r#"{"cmd":"ls","version":[0,42,0],"kitty_window_id":7,"payload":{}}"#;

#[test]
fn a_plain_request_is_forwarded_reserialised() {
    assert_eq!(
        forwarded(LS.as_bytes()),
        serde_json::json!({"cmd":"ls","version":[0,42,0],"kitty_window_id":7,"payload":{}})
    );
    // No payload at all is kitty's empty payload.
    let line = r#"{"cmd":"ls","version":[0,42,0]}"#;
    assert_eq!(
        forwarded(line.as_bytes()),
        serde_json::json!({"cmd":"ls","version":[0,42,0],"payload":{}})
    );
}

#[test]
fn the_envelope_decodes_into_its_fields() {
    let line = r#"{"cmd":"launch","version":[0,42,1],"no_response":true,"kitty_window_id":7,"async":"a-1","payload":{"args":[]}}"#;
    let envelope = decode_request(line.as_bytes()).expect("decodes");
    assert_eq!(envelope.cmd, "launch");
    assert_eq!(envelope.version, [0, 42, 1]);
    assert!(envelope.no_response);
    assert_eq!(envelope.kitty_window_id, Some(7));
    assert_eq!(envelope.async_id.as_deref(), Some("a-1"));
    assert_eq!(envelope.payload.len(), 1);
}

#[test]
fn invalid_utf8_is_denied() {
    let mut line = LS.as_bytes().to_vec();
    line[9] = 0xff;
    assert_eq!(denied(&line), "request is not UTF-8");
}

#[test]
fn anything_but_exactly_one_object_is_denied() {
    assert_eq!(denied(b"[]"), "request is not a JSON object");
    assert_eq!(denied(b" {}"), "request is not a JSON object");
    assert_eq!(denied(b"\"ls\""), "request is not a JSON object");
    assert_eq!(denied(b"{"), "invalid JSON");
    assert_eq!(
        denied(format!("{LS} ").as_bytes()),
        "bytes after the request object"
    );
    assert_eq!(
        denied(format!("{LS}{LS}").as_bytes()),
        "bytes after the request object"
    );
    // Python's json.loads takes NaN; serde_json and so airlock do not.
    let line = r#"{"cmd":"launch","version":[0,42,0],"payload":{"bias":NaN}}"#;
    assert_eq!(denied(line.as_bytes()), "invalid JSON");
}

#[test]
fn nesting_ten_thousand_deep_is_denied_without_overflowing() {
    let deep = format!(
        r#"{{"cmd":"ls","version":[0,42,0],"payload":{{"match":{}{}}}}}"#,
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    assert_eq!(denied(deep.as_bytes()), "JSON nested too deeply");
    let objects = format!("{}{}", r#"{"a":"#.repeat(10_000), "}".repeat(10_000));
    assert_eq!(denied(objects.as_bytes()), "JSON nested too deeply");
}

#[test]
fn nesting_is_capped_at_max_depth() {
    // The envelope is level 1; `inner` containers follow it.
    let nest = |inner: usize| {
        format!(
            r#"{{"cmd":"ls","version":[0,42,0],"x":{}{}}}"#,
            "[".repeat(inner),
            "]".repeat(inner)
        )
    };
    // Within the cap the nesting is fine (and the unknown key is what is refused).
    assert_eq!(
        denied(nest(MAX_DEPTH - 1).as_bytes()),
        "unknown key in the request envelope"
    );
    assert_eq!(denied(nest(MAX_DEPTH).as_bytes()), "JSON nested too deeply");
}

#[test]
fn duplicate_keys_are_denied_at_every_depth_and_after_unescaping() {
    for line in [
        r#"{"cmd":"ls","cmd":"launch","version":[0,42,0]}"#,
        r#"{"cmd":"ls","version":[0,42,0],"payload":{"match":"id:42","match":"id:1"}}"#,
        r#"{"cmd":"launch","version":[0,42,0],"payload":{"args":[{"a":1,"a":2}]}}"#,
        r#"{"cmd":"ls","c\u006dd":"launch","version":[0,42,0]}"#,
        r#"{"cmd":"ls","version":[0,42,0],"payload":{"match":"id:42","m\u0061tch":"all"}}"#,
    ] {
        assert_eq!(denied(line.as_bytes()), "duplicate JSON key", "{line}");
    }
}

#[test]
fn case_variant_keys_are_denied() {
    // Beside their own spelling at any depth …
    for line in [
        r#"{"cmd":"ls","CMD":"launch","version":[0,42,0]}"#,
        r#"{"cmd":"ls","version":[0,42,0],"payload":{"match":"id:42","Match":"all"}}"#,
        r#"{"cmd":"ls","version":[0,42,0],"payload":{"match":"id:42","M\u0041TCH":"all"}}"#,
    ] {
        assert_eq!(
            denied(line.as_bytes()),
            "JSON keys that differ only in case",
            "{line}"
        );
    }
    // … and alone, as keys kitty does not know.
    let line = r#"{"Cmd":"launch","version":[0,42,0]}"#;
    assert_eq!(
        denied(line.as_bytes()),
        "unknown key in the request envelope"
    );
    let line = request("ls", r#"{"Match":"id:42"}"#);
    assert_eq!(denied(&line), "payload does not match kitty's schema");
}

#[test]
fn unknown_envelope_keys_are_denied() {
    for line in [
        r#"{"cmd":"ls","version":[0,42,0],"extra":1}"#,
        r#"{"cmd":"ls","version":[0,42,0],"peer_id":3}"#,
        r#"{"cmd":"ls","version":[0,42,0],"__proto__":{}}"#,
    ] {
        assert_eq!(
            denied(line.as_bytes()),
            "unknown key in the request envelope",
            "{line}"
        );
    }
}

#[test]
fn password_and_encrypted_envelopes_are_denied() {
    for line in [
        r#"{"cmd":"ls","version":[0,42,0],"password":"SECRET-VALUE"}"#,
        r#"{"cmd":"ls","version":[0,42,0],"password":""}"#,
        r#"{"version":[0,42,0],"iv":"a","tag":"b","pubkey":"c","encrypted":"SECRET-VALUE"}"#,
        r#"{"version":[0,42,0],"encrypted":"x","enc_proto":"1"}"#,
        r#"{"cmd":"ls","version":[0,42,0],"timestamp":1}"#,
        // Whatever else is wrong, the password is the reason given.
        r#"{"zzz":1,"password":"p"}"#,
    ] {
        assert_eq!(
            denied(line.as_bytes()),
            "password and encrypted requests are refused",
            "{line}"
        );
    }
}

#[test]
fn streaming_and_async_control_are_denied() {
    for line in [
        r#"{"cmd":"send-text","version":[0,42,0],"stream":true}"#,
        r#"{"cmd":"send-text","version":[0,42,0],"stream_id":"s1"}"#,
    ] {
        assert_eq!(denied(line.as_bytes()), "streamed requests are refused");
    }
    for line in [
        r#"{"cmd":"launch","version":[0,42,0],"async":"a1","cancel_async":true}"#,
        r#"{"cmd":"launch","version":[0,42,0],"async_id":"a1"}"#,
    ] {
        assert_eq!(
            denied(line.as_bytes()),
            "async control requests are refused"
        );
    }
    // `async` itself is kitty's client's tag on launch only.
    let line = r#"{"cmd":"ls","version":[0,42,0],"async":"a1"}"#;
    assert_eq!(denied(line.as_bytes()), "async requests are refused");
    let line = r#"{"cmd":"launch","version":[0,42,0],"async":1}"#;
    assert_eq!(denied(line.as_bytes()), "async must be a string");
    // kitty copies these into the payload itself; a client may not put them there.
    for field in ["async_id", "peer_id", "stream_id"] {
        let line = request("ls", &format!(r#"{{"{field}":"x"}}"#));
        assert_eq!(denied(&line), "payload does not match kitty's schema");
    }
}

#[test]
fn envelope_values_must_have_kitty_types() {
    let cases = [
        (
            r#"{"version":[0,42,0]}"#,
            "request envelope lacks cmd or version",
        ),
        (r#"{"cmd":"ls"}"#, "request envelope lacks cmd or version"),
        (r#"{"cmd":1,"version":[0,42,0]}"#, "cmd must be a string"),
        (
            r#"{"cmd":"ls","version":"0.42.0"}"#,
            "version must be three non-negative integers",
        ),
        (
            r#"{"cmd":"ls","version":[0,42]}"#,
            "version must be three non-negative integers",
        ),
        (
            r#"{"cmd":"ls","version":[0,-1,0]}"#,
            "version must be three non-negative integers",
        ),
        (
            r#"{"cmd":"ls","version":[0,42,0],"no_response":"yes"}"#,
            "no_response must be a boolean",
        ),
        (
            r#"{"cmd":"ls","version":[0,42,0],"kitty_window_id":"7"}"#,
            "kitty_window_id must be a non-negative integer",
        ),
        (
            r#"{"cmd":"ls","version":[0,42,0],"kitty_window_id":-7}"#,
            "kitty_window_id must be a non-negative integer",
        ),
        (
            r#"{"cmd":"ls","version":[0,42,0],"payload":[]}"#,
            "payload must be a JSON object",
        ),
        (
            r#"{"cmd":"ls","version":[0,42,0],"payload":null}"#,
            "payload must be a JSON object",
        ),
    ];
    for (line, rule) in cases {
        assert_eq!(denied(line.as_bytes()), rule, "{line}");
    }
}

#[test]
fn a_request_may_claim_only_the_callers_window() {
    let line = format!(
        r#"{{"cmd":"ls","version":[0,42,0],"kitty_window_id":{}}}"#,
        CALLER + 1
    );
    assert_eq!(
        denied(line.as_bytes()),
        "kitty_window_id is not the caller's window"
    );
    // Outside a kitty window there is no caller window to claim.
    let policy = KittyPolicy {
        caller_window: None,
        ..full_policy()
    };
    assert_eq!(
        denied_with(LS.as_bytes(), &policy, &owned(&[OWNED])),
        "kitty_window_id is not the caller's window"
    );
}

#[test]
fn everything_else_is_denied_whatever_the_capabilities() {
    for cmd in [
        "run",
        "kitten",
        "action",
        "load-config",
        "send-key",
        "signal-child",
        "set-colors",
        "set-user-vars",
        "env",
        "new-window",
        "close-tab",
        "focus-tab",
        "detach-window",
        "select-window",
        "scroll-window",
        "create-marker",
        "set-window-logo",
        "set-background-image",
        "set-tab-title",
        "resize-os-window",
        "screenshot",
        // kitty maps `_` to `-`; airlock accepts kitty's own spelling only.
        "close_window",
        "Launch",
        "",
    ] {
        let line = request(cmd, "{}");
        assert_eq!(
            denied(&line),
            "command not allowed through the kitty filter",
            "{cmd}"
        );
    }
}

#[test]
fn unknown_command_names_are_logged_as_unrecognised() {
    let decision = decide(
        &request("rm -rf SECRET-VALUE", "{}"),
        &full_policy(),
        &owned(&[]),
    );
    assert_eq!(decision.cmd(), "unrecognised");
    let decision = decide(&request("run", "{}"), &full_policy(), &owned(&[]));
    assert_eq!(decision.cmd(), "run");
    // An envelope that did not decode has no name at all.
    let decision = decide(b"{}", &full_policy(), &owned(&[]));
    assert_eq!(decision.cmd(), "");
}

#[test]
fn the_default_policy_allows_nothing() {
    let policy = KittyPolicy::default();
    assert!(Capability::ALL.iter().all(|c| !policy.allows(*c)));
    let line = r#"{"cmd":"ls","version":[0,42,0]}"#;
    assert_eq!(
        denied_with(line.as_bytes(), &policy, &owned(&[OWNED])),
        "list_owned capability not enabled"
    );
}

#[test]
fn capabilities_have_one_spelling() {
    for capability in Capability::ALL {
        assert_eq!(Capability::parse(capability.as_str()), Some(capability));
        let json = serde_json::to_string(&capability).expect("serialises");
        assert_eq!(json, format!("\"{}\"", capability.as_str()));
    }
    assert_eq!(Capability::parse("Launch_Overlay"), None);
    let launches: Vec<_> = Capability::ALL
        .into_iter()
        .filter(|c| c.is_launch())
        .collect();
    assert_eq!(launches.len(), 4);
    assert!(launches.iter().all(|c| c.as_str().starts_with("launch_")));
}
