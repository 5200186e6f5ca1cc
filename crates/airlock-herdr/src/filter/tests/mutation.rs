//! Deterministic mutation fuzzing of `decide`: it must never panic, and whatever it forwards
//! must be one compact line that decides to itself (re-serialising is a fixed point).

use super::super::Decision;
use super::{decide, full_policy};
use crate::fuzz_tests::Rng;

const SEEDS: &[&str] = &[
    r#"{"id":"r1","method":"ping","params":{}}"#,
    r#"{"id":"r1","method":"notification.show","params":{"title":"t","body":"b","sound":"done"}}"#,
    r#"{"id":"r1","method":"pane.report_agent","params":{"pane_id":"w1:p2","source":"s","agent":"claude","state":"idle","agent_session_id":"abc","agent_session_path":"/home/u/.claude/projects/p/abc.jsonl"}}"#,
    r#"{"id":"r1","method":"pane.release_agent","params":{"pane_id":"w1:p2","source":"s","agent":"claude","seq":3}}"#,
];

const TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    "\"",
    ",",
    ":",
    "null",
    "-1",
    "1e999",
    "\\u0000",
    "\\u006d",
    "..",
    "/",
    "é",
    "\n",
    "\r",
    " ",
    "\"id\"",
    "\"method\"",
    "\"params\"",
    "\"Method\"",
    "\"title\"",
];

fn mutate(seed: &str, rng: &mut Rng) -> Vec<u8> {
    let mut bytes = seed.as_bytes().to_vec();
    for _ in 0..=rng.below(3) {
        match rng.below(4) {
            0 if !bytes.is_empty() => {
                let i = rng.below(bytes.len());
                bytes[i] ^= 1 << rng.below(8);
            }
            1 if !bytes.is_empty() => {
                let i = rng.below(bytes.len());
                bytes.remove(i);
            }
            2 => {
                let i = rng.below(bytes.len() + 1);
                let token = TOKENS[rng.below(TOKENS.len())].as_bytes();
                bytes.splice(i..i, token.iter().copied());
            }
            _ => bytes.truncate(rng.below(bytes.len() + 1)),
        }
    }
    bytes
}

#[test]
fn decide_never_panics_and_forwards_only_fixed_points() {
    let policy = full_policy();
    let mut rng = Rng(0x5eed_1e55_a1c0_c0de);
    let mut forwards = 0;
    for seed in SEEDS {
        for _ in 0..3000 {
            let line = mutate(seed, &mut rng);
            match decide(&line, &policy) {
                Decision::Forward { line: out, method } => {
                    forwards += 1;
                    let body = out.strip_suffix(b"\n").expect("ends in a newline");
                    assert!(!body.contains(&b'\n'));
                    let again = decide(&out, &policy);
                    assert_eq!(
                        again,
                        Decision::Forward {
                            line: out.clone(),
                            method
                        },
                        "from {:?}",
                        String::from_utf8_lossy(&line)
                    );
                }
                Decision::Deny {
                    response, reason, ..
                } => {
                    assert!(response.ends_with(b"\n"));
                    assert!(serde_json::from_slice::<serde_json::Value>(&response).is_ok());
                    assert!(reason.is_ascii() && !reason.contains('\n'));
                }
            }
        }
    }
    // Some mutants (a flipped letter in a title, say) are still valid.
    assert!(forwards > 0);
}

const LAUNCH_SEEDS: &[&str] = &[
    r#"{"id":"r1","method":"tab.create","params":{"workspace_id":"w1","cwd":"/home/u/project","label":"revdiff","focus":true}}"#,
    r#"{"id":"r1","method":"tab.close","params":{"tab_id":"w1:t2"}}"#,
    r#"{"id":"r1","method":"pane.send_input","params":{"pane_id":"w1:p3","text":"sh /tmp/s/launch","keys":["Enter"]}}"#,
];

/// Mutants of the `launch_overlay` requests, with `w1:t2`/`w1:p3` owned: no panic, and what is
/// forwarded is one line that decides to itself, except that a `pane.send_input` forwarded
/// always types the launcher's command, never the sandbox's.
#[test]
fn launch_mutants_forward_only_checked_lines() {
    let policy = super::launch::launch_policy();
    let owned = super::launch::owning(&[("w1:t2", "w1:p3")]);
    let mut rng = Rng(0x1a0c_4e55_0b5e_55ed);
    let mut forwards = 0;
    for seed in LAUNCH_SEEDS {
        for _ in 0..3000 {
            let line = mutate(seed, &mut rng);
            let Decision::Forward { line: out, method } =
                super::super::decide(&line, &policy, &owned)
            else {
                continue;
            };
            forwards += 1;
            let body = out.strip_suffix(b"\n").expect("ends in a newline");
            assert!(!body.contains(&b'\n'));
            let value: serde_json::Value = serde_json::from_slice(body).expect("JSON");
            if method == "pane.send_input" {
                assert_eq!(value["params"]["text"], "sh '/priv/launch-1'");
                assert_eq!(value["params"]["pane_id"], "w1:p3");
                assert_eq!(value["params"]["keys"], serde_json::json!(["Enter"]));
                continue;
            }
            let again = super::super::decide(&out, &policy, &owned);
            let expected = Decision::Forward {
                line: out.clone(),
                method,
            };
            assert_eq!(again, expected, "from {:?}", String::from_utf8_lossy(&line));
        }
    }
    assert!(forwards > 0);
}
