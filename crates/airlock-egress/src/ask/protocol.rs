//! The monitor protocol: one JSON object per line, at most [`MAX_LINE`] bytes.
//!
//! Proxy → monitor: `{"type":"hello","sandbox","project","pid","timeout_secs"}` once, then
//! `{"type":"ask","id","host","port"}` per question and `{"type":"decided","id","decision"}` when
//! it is settled (`once`, `session`, `always`, `deny`, or `timeout`). Monitor → proxy:
//! `{"id":N,"decision":"once"|"session"|"always"|"deny"}`. Unknown or repeated keys, other values
//! and longer lines are refused (the connection is dropped).

use serde::{Deserialize, Serialize};

/// The longest line either side sends.
pub const MAX_LINE: usize = 4096;

/// What a monitor may decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// This request only.
    Once,
    /// This host and port for the rest of the session.
    Session,
    /// As `session`; the monitor also writes the rule to the project's config.
    Always,
    /// Denied, for the rest of the session.
    Deny,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Once => "once",
            Decision::Session => "session",
            Decision::Always => "always",
            Decision::Deny => "deny",
        }
    }
}

/// A monitor's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    pub id: u64,
    pub decision: Decision,
}

/// What the proxy sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum ServerMessage {
    Hello {
        sandbox: String,
        project: String,
        pid: u32,
        timeout_secs: u64,
    },
    Ask {
        id: u64,
        host: String,
        port: u16,
    },
    Decided {
        id: u64,
        decision: String,
    },
}

impl ServerMessage {
    /// The message as one line, newline included.
    pub fn line(&self) -> String {
        let mut line = serde_json::to_string(self).unwrap_or_default();
        line.push('\n');
        line
    }
}

/// Decodes a monitor's line strictly: one JSON object with exactly the keys `id` and
/// `decision`, once each (compared after unescaping: `"\u0069d"` is `id`), nothing after it.
pub fn parse_answer(line: &str) -> Result<Answer, String> {
    let line = line.trim_end_matches(['\n', '\r']);
    if line.len() > MAX_LINE {
        return Err("line too long".into());
    }
    // The derived decoder refuses unknown and repeated fields (a `serde_json::Value` would keep
    // the last of two), but also takes an array of the fields in order: only an object passes.
    if !line.trim_start().starts_with('{') {
        return Err("not a JSON object".into());
    }
    serde_json::from_str(line).map_err(|e| e.to_string())
}

/// Decodes a line from the proxy (for monitors).
pub fn parse_server(line: &str) -> Result<ServerMessage, String> {
    if line.len() > MAX_LINE {
        return Err("line too long".into());
    }
    serde_json::from_str(line.trim_end()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_decoded_strictly() {
        assert_eq!(
            parse_answer("{\"id\":3,\"decision\":\"session\"}\n").unwrap(),
            Answer {
                id: 3,
                decision: Decision::Session
            }
        );
        for bad in [
            "{\"id\":3}",
            "{\"id\":3,\"decision\":\"yes\"}",
            "{\"id\":3,\"decision\":\"once\",\"extra\":1}",
            "{\"id\":3,\"id\":4,\"decision\":\"once\"}",
            "{\"id\":3,\"decision\":\"once\",\"decision\":\"deny\"}",
            "{\"\\u0069d\":3,\"id\":4,\"decision\":\"once\"}",
            "{\"ID\":3,\"decision\":\"once\"}",
            "{\"id\":3,\"decision\":\"once\"} {}",
            "{\"id\":3,\"decision\":\"Once\"}",
            "{\"id\":-1,\"decision\":\"once\"}",
            "[3, \"once\"]",
            "not json",
            &format!("{{\"id\":3,\"decision\":\"once\"{}}}", " ".repeat(MAX_LINE)),
        ] {
            assert!(parse_answer(bad).is_err(), "{bad}");
        }
    }

    proptest::proptest! {
        /// Arbitrary text never panics; what is accepted is an object whose top-level keys are
        /// exactly `id` and `decision` once each, and it reads back the same once re-encoded.
        #[test]
        fn any_line_is_one_answer_or_refused(line in "\\PC{0,64}|\\{[ -~]{0,64}\\}") {
            if let Ok(answer) = parse_answer(&line) {
                proptest::prop_assert!(line.trim_start().starts_with('{'), "not an object: {}", line);
                let again = serde_json::to_string(&answer).unwrap();
                proptest::prop_assert_eq!(parse_answer(&again), Ok(answer));
            }
        }

        #[test]
        fn answers_in_any_key_order_and_spacing_are_read(id in 0u64.., d in 0usize..4, pad in " {0,3}") {
            let decision = ["once", "session", "always", "deny"][d];
            for line in [
                format!("{{{pad}\"id\"{pad}:{pad}{id},\"decision\":\"{decision}\"{pad}}}"),
                format!("{pad}{{\"decision\":{pad}\"{decision}\",{pad}\"id\":{id}}}\n"),
            ] {
                let answer = parse_answer(&line).map_err(proptest::test_runner::TestCaseError::fail)?;
                proptest::prop_assert_eq!(answer.id, id);
                proptest::prop_assert_eq!(answer.decision.as_str(), decision);
            }
        }
    }

    #[test]
    fn server_messages_round_trip() {
        for m in [
            ServerMessage::Ask {
                id: 1,
                host: "x.test".into(),
                port: 443,
            },
            ServerMessage::Decided {
                id: 1,
                decision: "timeout".into(),
            },
        ] {
            assert_eq!(parse_server(&m.line()).unwrap(), m);
        }
    }
}
