//! Ask mode's monitor protocol (`airlock-egress/src/ask/protocol.rs`): `parse_answer` on a line a
//! monitor sends (the answer that lets a request through), `parse_server` on a line the proxy
//! sends (what a monitor reads).
//!
//! Beyond "no panic": an accepted answer is one JSON object, nothing after it, whose top-level
//! keys are exactly `id` and `decision`, once each, compared after unescaping (read by an
//! independent key lister, `airlock_fuzz::object_keys`); its decision is one of the four words,
//! and it reads back the same once re-encoded.
#![no_main]

use airlock_egress::ask::protocol::{MAX_LINE, parse_answer, parse_server};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(answer) = parse_answer(line) {
        let trimmed = line.trim_end_matches(['\n', '\r']);
        assert!(trimmed.len() <= MAX_LINE);
        let mut keys = airlock_fuzz::object_keys(trimmed).expect("an accepted answer is an object");
        keys.sort();
        assert_eq!(keys, ["decision", "id"], "{line:?}");
        assert!(["once", "session", "always", "deny"].contains(&answer.decision.as_str()));
        let again = serde_json::to_string(&answer).expect("an answer encodes");
        assert_eq!(parse_answer(&again), Ok(answer));
    }
    if let Ok(message) = parse_server(line) {
        assert_eq!(parse_server(&message.line()), Ok(message));
    }
});
