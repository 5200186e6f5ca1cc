//! The routes: one file each. Every file holds a pure `decide` (body bytes in, a validated request or
//! a plain reason out; what the fuzz tests drive) and an async `serve` that performs the host action.

use hyper::StatusCode;
use serde::de::DeserializeOwned;

use crate::audit::{Outcome, clip};
use crate::launcher::{self, Invocation};
use crate::rate::Bucket;

pub mod command;
pub mod credential;
pub mod edit;
pub mod healthz;
pub mod open;
pub mod sound;

/// One route of the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BridgeRoute {
    Healthz,
    Open,
    Edit,
    Credential,
    Command,
    /// `/proximo {"command": verb, "args"?}`: toolbox's shims' spelling of `/command` for the
    /// built-in `proximo`, under the same rules.
    Proximo,
    Sound,
}

impl BridgeRoute {
    pub const ALL: [BridgeRoute; 7] = [
        BridgeRoute::Healthz,
        BridgeRoute::Open,
        BridgeRoute::Edit,
        BridgeRoute::Credential,
        BridgeRoute::Command,
        BridgeRoute::Proximo,
        BridgeRoute::Sound,
    ];

    /// The route for a request path.
    pub fn from_path(path: &str) -> Option<BridgeRoute> {
        BridgeRoute::ALL.into_iter().find(|r| r.path() == path)
    }

    pub const fn path(self) -> &'static str {
        match self {
            BridgeRoute::Healthz => "/healthz",
            BridgeRoute::Open => "/open",
            BridgeRoute::Edit => "/edit",
            BridgeRoute::Credential => "/credential",
            BridgeRoute::Command => "/command",
            BridgeRoute::Proximo => "/proximo",
            BridgeRoute::Sound => "/sound",
        }
    }

    /// The body cap in bytes; one byte more is 413.
    pub const fn body_cap(self) -> usize {
        match self {
            BridgeRoute::Healthz => 0,
            BridgeRoute::Open | BridgeRoute::Edit => 9216,
            BridgeRoute::Credential => 64 * 1024,
            BridgeRoute::Command | BridgeRoute::Proximo => 16 * 1024,
            BridgeRoute::Sound => 512 * 1024,
        }
    }

    pub const fn bucket(self) -> Bucket {
        match self {
            BridgeRoute::Healthz
            | BridgeRoute::Open
            | BridgeRoute::Edit
            | BridgeRoute::Command
            | BridgeRoute::Proximo => Bucket::Shared,
            BridgeRoute::Credential => Bucket::Credential,
            BridgeRoute::Sound => Bucket::Sound,
        }
    }
}

/// A response body.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplyBody {
    Empty,
    Json(serde_json::Value),
    /// A plain-text reason (400, 401, 413, 429, 502, ...).
    Text(String),
}

/// A route's answer and what the audit log records about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub status: StatusCode,
    pub body: ReplyBody,
    pub outcome: Outcome,
    /// Non-secret fields for the audit log, already clipped.
    pub fields: Vec<(&'static str, String)>,
}

impl Reply {
    pub fn no_content(fields: Vec<(&'static str, String)>) -> Reply {
        Reply {
            status: StatusCode::NO_CONTENT,
            body: ReplyBody::Empty,
            outcome: Outcome::Ok,
            fields,
        }
    }

    pub fn ok(body: ReplyBody, fields: Vec<(&'static str, String)>) -> Reply {
        Reply {
            status: StatusCode::OK,
            body,
            outcome: Outcome::Ok,
            fields,
        }
    }

    /// A refusal with its HTTP status; the reason goes to the caller and the log.
    pub fn refuse(status: StatusCode, reason: impl Into<String>) -> Reply {
        let reason = reason.into();
        Reply {
            status,
            body: ReplyBody::Text(reason.clone()),
            outcome: Outcome::Rejected(reason),
            fields: Vec::new(),
        }
    }

    /// 400 with a plain reason.
    pub fn bad_request(reason: impl Into<String>) -> Reply {
        Reply::refuse(StatusCode::BAD_REQUEST, reason)
    }

    /// 502: the host action could not be carried out.
    pub fn failed(reason: impl Into<String>) -> Reply {
        let reason = reason.into();
        Reply {
            status: StatusCode::BAD_GATEWAY,
            body: ReplyBody::Text(reason.clone()),
            outcome: Outcome::Failed(reason),
            fields: Vec::new(),
        }
    }

    pub fn with_fields(mut self, fields: Vec<(&'static str, String)>) -> Reply {
        self.fields = fields;
        self
    }

    /// 403 `{"error": reason}`: the request is well formed, but this sandbox's scope does not
    /// cover it. The reason names the rule and never quotes a secret.
    pub fn forbidden(reason: impl Into<String>) -> Reply {
        let reason = reason.into();
        Reply {
            status: StatusCode::FORBIDDEN,
            body: ReplyBody::Json(serde_json::json!({ "error": reason })),
            outcome: Outcome::Rejected(reason),
            fields: Vec::new(),
        }
    }

    /// Names the sandbox that asked in the audit line.
    pub fn from_sandbox(mut self, scope: Option<&crate::scope::SessionScope>) -> Reply {
        if let Some(scope) = scope {
            self.fields.insert(0, ("sandbox", clip(&scope.sandbox, 64)));
        }
        self
    }
}

/// Runs a host program to completion and answers `{"exit","output"}` (output as lossy UTF-8),
/// adding the exit code to the audit `fields`; a program that cannot be run is 502.
pub(crate) async fn run_for_output(
    invocation: Invocation<'_>,
    mut fields: Vec<(&'static str, String)>,
) -> Reply {
    match launcher::run(invocation).await {
        Ok(done) => {
            fields.push(("exit", done.exit.to_string()));
            let output = String::from_utf8_lossy(&done.output).into_owned();
            Reply::ok(
                ReplyBody::Json(serde_json::json!({"exit": done.exit, "output": output})),
                fields,
            )
        }
        Err(e) => Reply::failed(e.to_string()).with_fields(fields),
    }
}

/// Strict JSON: one object of the request type, unknown and duplicate keys refused (so are keys
/// differing only in case, which are unknown), nothing after it.
pub fn strict<T: DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    // serde's derived structs also accept a JSON array of the fields in order; only objects pass.
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err("malformed request: the body must be a JSON object".into());
    }
    serde_json::from_slice(body).map_err(|e| format!("malformed request: {e}"))
}

/// Refuses strings that cannot become an argv element or a clean log value.
pub(crate) fn no_nul(field: &str, value: &str) -> Result<(), String> {
    if value.contains('\0') {
        Err(format!("{field} contains a NUL byte"))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct One {
        url: String,
    }

    #[test]
    fn strict_decoding() {
        assert!(strict::<One>(br#"{"url":"x"}"#).is_ok());
        for bad in [
            &br#"{"url":"x","url":"y"}"#[..],
            br#"{"url":"x","extra":1}"#,
            br#"{"URL":"x"}"#,
            br#"{"url":"x"} {}"#,
            br#"{"url":null}"#,
            br#"["x"]"#,
            br#"{"url":"x""#,
            b"",
        ] {
            assert!(
                strict::<One>(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn every_path_maps_back() {
        for route in BridgeRoute::ALL {
            assert_eq!(BridgeRoute::from_path(route.path()), Some(route));
        }
        assert_eq!(BridgeRoute::from_path("/proxim"), None);
    }
}
