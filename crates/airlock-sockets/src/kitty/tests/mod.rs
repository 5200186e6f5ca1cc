//! Tests of the kitty filter, by rule. Every denial goes through [`denied_with`], which also
//! checks that the response is a kitty error frame and that the reason is a fixed rule.

mod decode;
mod frame;
mod launch;
mod owned;
mod pattern;
mod properties;
mod response;

use serde_json::Value;

use super::{
    ArgShape, Capability, Command, Decision, FRAME_PREFIX, FRAME_SUFFIX, KittyPolicy,
    LaunchPattern, Owned, decide, observe_response,
};

/// The host window airlock runs in (`KITTY_WINDOW_ID`).
const CALLER: u64 = 7;
/// A window kitty reported as created by this sandbox's launch.
const OWNED: u64 = 42;
const REVDIFF: &str = "/usr/local/bin/revdiff";
const SHELL: &str = "/bin/sh";
/// Put into refused values: it must never appear in a denial.
const SECRET: &str = "SECRET-VALUE";

/// revdiff, pinned, with up to 8 free arguments, runnable as `/bin/sh -c "…"`.
fn revdiff() -> LaunchPattern {
    LaunchPattern {
        tool: "revdiff".to_owned(),
        program: Some(REVDIFF.into()),
        args: ArgShape::Trailing {
            leading: Vec::new(),
            max_free: 8,
            allow_options: true,
        },
        shell: Some(SHELL.into()),
    }
}

fn policy_with(capabilities: &[Capability]) -> KittyPolicy {
    KittyPolicy {
        capabilities: capabilities.iter().copied().collect(),
        launch_patterns: vec![revdiff()],
        caller_window: Some(CALLER),
        overlay: None,
    }
}

/// Every capability, revdiff's pattern, caller window 7.
fn full_policy() -> KittyPolicy {
    policy_with(&Capability::ALL)
}

/// A request as `kitten @` sends it from window 7; `payload` is JSON text.
fn request(cmd: &str, payload: &str) -> Vec<u8> {
    format!(
        r#"{{"cmd":"{cmd}","version":[0,42,0],"kitty_window_id":{CALLER},"payload":{payload}}}"#
    )
    .into_bytes()
}

/// The windows kitty answered `ids` for, learnt as the filter learns them.
fn owned(ids: &[u64]) -> Owned {
    let mut owned = Owned::new();
    for id in ids {
        let answer = format!(r#"{{"ok":true,"data":"{id}"}}"#);
        assert_eq!(
            observe_response(Command::Launch, answer.as_bytes(), &mut owned),
            Some(*id)
        );
    }
    owned
}

/// The JSON inside a frame, checking the framing.
fn unframe(frame: &[u8]) -> &str {
    let json = frame
        .strip_prefix(FRAME_PREFIX)
        .and_then(|f| f.strip_suffix(FRAME_SUFFIX))
        .expect("a kitty-cmd frame");
    let text = std::str::from_utf8(json).expect("frames are UTF-8");
    assert!(text.is_ascii(), "frames are ASCII: {text}");
    assert!(!text.contains('\u{1b}'), "no ESC inside: {text}");
    text
}

/// Decides under `policy` and `owned`, expecting a forward: the forwarded JSON text.
fn forwarded_with(line: &[u8], policy: &KittyPolicy, owned: &Owned) -> (String, Command, bool) {
    match decide(line, policy, owned) {
        Decision::Forward {
            frame,
            cmd,
            expect_response,
        } => (unframe(&frame).to_owned(), cmd, expect_response),
        Decision::Deny { reason, .. } => panic!("expected a forward, denied: {reason}"),
    }
}

/// [`forwarded_with`] under [`full_policy`] with window 42 owned, as a JSON value.
fn forwarded(line: &[u8]) -> Value {
    let (text, _, _) = forwarded_with(line, &full_policy(), &owned(&[OWNED]));
    serde_json::from_str(&text).expect("forwarded frames are JSON")
}

/// Decides `line` expecting a denial; returns its reason after checking the response: one
/// kitty error frame naming the command and the rule, and nothing the request carried.
fn denied_with(line: &[u8], policy: &KittyPolicy, owned: &Owned) -> &'static str {
    let Decision::Deny {
        response,
        cmd,
        reason,
    } = decide(line, policy, owned)
    else {
        panic!("expected a denial of {:?}", String::from_utf8_lossy(line));
    };
    let text = unframe(&response);
    assert!(!text.contains(SECRET), "a request value leaked: {text}");
    let value: Value = serde_json::from_str(text).expect("denials are JSON");
    let object = value.as_object().expect("an object");
    assert_eq!(object.len(), 2, "ok and error only: {text}");
    assert_eq!(object["ok"], false);
    let subject = if cmd.is_empty() { "request" } else { cmd };
    assert_eq!(
        object["error"],
        format!("airlock: {subject} is not allowed in this sandbox ({reason})")
    );
    assert!(
        !reason.is_empty() && reason.len() < 80,
        "short reason: {reason}"
    );
    reason
}

/// [`denied_with`] under [`full_policy`] with window 42 owned.
fn denied(line: &[u8]) -> &'static str {
    denied_with(line, &full_policy(), &owned(&[OWNED]))
}
