//! `POST /credential {"op","input"}`: ask the host's git credential helper.
//!
//! The request and the answer are secrets: only `op` and the exit code ever reach the log, and a
//! refusal's reason never quotes `input`.

use std::time::Duration;

use serde::Deserialize;

use super::{Reply, run_for_output, strict};
use crate::launcher::{self, Invocation};

/// A first store may raise a host keychain dialog, so this route gets a long budget.
pub const TIMEOUT: Duration = Duration::from_secs(60);
/// The most output kept from `git credential`.
pub const OUTPUT_CAP: usize = 64 * 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialRequest {
    pub op: String,
    pub input: String,
}

/// The git credential helper protocol's operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialOp {
    Get,
    Store,
    Erase,
}

impl CredentialOp {
    pub fn from_name(name: &str) -> Option<CredentialOp> {
        match name {
            "get" => Some(CredentialOp::Get),
            "store" => Some(CredentialOp::Store),
            "erase" => Some(CredentialOp::Erase),
            _ => None,
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            CredentialOp::Get => "get",
            CredentialOp::Store => "store",
            CredentialOp::Erase => "erase",
        }
    }

    /// The `git credential` verb that performs it.
    pub const fn git_verb(self) -> &'static str {
        match self {
            CredentialOp::Get => "fill",
            CredentialOp::Store => "approve",
            CredentialOp::Erase => "reject",
        }
    }
}

/// Decodes and validates a body. Reasons name no part of `input`.
pub fn decide(body: &[u8]) -> Result<(CredentialOp, String), String> {
    // serde's messages can quote a value, so a decoding error is reported without detail.
    let request: CredentialRequest = strict(body).map_err(|_| {
        "malformed request: expected {\"op\": string, \"input\": string}".to_owned()
    })?;
    let op = CredentialOp::from_name(&request.op).ok_or_else(|| {
        // Quoted only when it looks like a word: a confused client may have put a secret there.
        let word = request.op.len() <= 16
            && request
                .op
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        let shown = if word {
            request.op.as_str()
        } else {
            "(not a word)"
        };
        format!("op {shown} is not allowed; allowed: get, store, erase")
    })?;
    if request.input.contains('\0') {
        return Err("input contains a NUL byte".into());
    }
    https_only(&request.input)?;
    Ok((op, request.input))
}

/// Only HTTPS credentials are served: the protocol named by every `protocol=` and `url=` line must
/// be https, and one must be there. Other protocols (`ext::`, `file`, `ssh`) are refused before git
/// runs; the reason names the protocol only when it is a plain word.
fn https_only(input: &str) -> Result<(), String> {
    let mut named = false;
    for line in input.lines() {
        let protocol = if let Some(value) = line.strip_prefix("protocol=") {
            value
        } else if let Some(value) = line.strip_prefix("url=") {
            value.split_once("://").map_or("", |(scheme, _)| scheme)
        } else {
            continue;
        };
        named = true;
        if !protocol.eq_ignore_ascii_case("https") {
            let word = !protocol.is_empty()
                && protocol.len() <= 16
                && protocol
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'-');
            let shown = if word { protocol } else { "(not a word)" };
            return Err(format!(
                "/credential: protocol {shown} is not allowed; only https credentials are served"
            ));
        }
    }
    if !named {
        return Err("/credential: the input names no protocol; expected protocol=https".into());
    }
    Ok(())
}

pub async fn serve(body: &[u8], scope: Option<&crate::scope::SessionScope>) -> Reply {
    let (op, input) = match decide(body) {
        Ok(decided) => decided,
        Err(reason) => return Reply::bad_request(reason),
    };
    let fields = vec![("op", op.name().to_owned())];
    if let Some(Err(reason)) = scope.map(|s| s.allows_credential(&input)) {
        return Reply::forbidden(reason).with_fields(fields);
    }
    let git = match launcher::find("git") {
        Ok(git) => git,
        Err(e) => return Reply::failed(e.to_string()).with_fields(fields),
    };
    let args = ["credential".into(), op.git_verb().into()];
    run_for_output(
        Invocation {
            program: &git,
            args: &args,
            // The daemon has no terminal: git must never wait for one, and never show the host's
            // password dialog (askpass) with text a sandbox chose. No repository is found from
            // `/`, and none above it.
            env: &[
                ("GIT_TERMINAL_PROMPT", "0"),
                ("GIT_ASKPASS", ""),
                ("SSH_ASKPASS", ""),
                ("GIT_CEILING_DIRECTORIES", "/"),
                ("GIT_CONFIG_COUNT", "1"),
                ("GIT_CONFIG_KEY_0", "core.askPass"),
                ("GIT_CONFIG_VALUE_0", ""),
            ],
            stdin: Some(input.as_bytes()),
            timeout: TIMEOUT,
            output_cap: OUTPUT_CAP,
            merge_stderr: false,
        },
        fields,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_map_to_git_verbs() {
        let d = |op: &str| {
            decide(
                serde_json::json!({"op": op, "input": "protocol=https\nhost=x\n"})
                    .to_string()
                    .as_bytes(),
            )
        };
        assert_eq!(d("get").unwrap().0.git_verb(), "fill");
        let p = |input: &str| {
            decide(
                serde_json::json!({"op": "get", "input": input})
                    .to_string()
                    .as_bytes(),
            )
        };
        assert!(p("protocol=https\nhost=x\n").is_ok());
        assert!(p("url=https://x.example/r.git\n").is_ok());
        for bad in [
            "host=x\n",
            "protocol=http\nhost=x\n",
            "protocol=ext\nhost=sh -c evil\n",
            "protocol=https\nurl=file:///etc\n",
        ] {
            let e = p(bad).expect_err(bad);
            assert!(e.starts_with("/credential: "), "{e}");
        }
        assert_eq!(d("store").unwrap().0.git_verb(), "approve");
        assert_eq!(d("erase").unwrap().0.git_verb(), "reject");
        assert!(d("list").is_err());
        assert!(d("fill").is_err());
    }

    #[test]
    fn reasons_never_quote_the_input() {
        for body in [
            r#"{"op":"get","input":"password=hunter2","extra":"password=hunter2"}"#,
            r#"{"op":"get","input":"password=hunter2","input":"password=hunter2"}"#,
            r#"{"op":1,"input":"password=hunter2"}"#,
            r#"{"op":"get","input":["password=hunter2"]}"#,
            r#"{"op":"password=hunter2","input":"x"}"#,
        ] {
            let reason = decide(body.as_bytes()).expect_err(body);
            assert!(!reason.contains("hunter2"), "{reason}");
        }
    }
}
