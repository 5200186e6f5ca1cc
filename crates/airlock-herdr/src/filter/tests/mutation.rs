//! Deterministic mutation fuzzing of `decide`: it must never panic, and whatever it forwards
//! must be one compact line that decides to itself (re-serialising is a fixed point).

use super::super::{Decision, decide};
use super::full_policy;
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
