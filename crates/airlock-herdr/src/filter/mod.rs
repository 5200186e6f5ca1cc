//! The herdr socket filter's decisions: one request line in, forward or deny out.
//!
//! The host's herdr socket grants everything herdr can do: `pane.read` reads other terminals,
//! `pane.send_text` types into any pane, `worktree.*` mutates git, `plugin.*` loads code and
//! `server.stop` stops the server. A sandbox only ever gets a proxy socket, and this module
//! decides what crosses it: `ping` always, `notification.show` with `notify`, the three agent
//! reports with `agent_reporting` (bound to the host's pane id and launched agent), and with
//! `launch_overlay` a `tab.create` followed by `tab.close` / `pane.send_input` on the tab and
//! pane herdr said it created (one command line, rewritten by the policy's [`ScriptLauncher`]);
//! nothing else.
//!
//! [`decide`] is pure code: no sockets, no clock, no environment (the launcher it may call is
//! the policy's). It judges a line under a [`FilterPolicy`] and the [`Owned`] table;
//! [`observe_response`], pure as well, records in that table what herdr answered to a
//! forwarded `tab.create` or `tab.close`, which is the only way ids enter or leave it. [`serve`]
//! hands `decide` the first line a client sends, acts on the [`Decision`] and passes herdr's
//! answer to `observe_response` before relaying it (the listener's life is airlock-sockets');
//! [`activate`] decides whether a launch gets the filter at all.

pub mod activate;
mod decode;
mod launch;
mod methods;
mod owned;
mod params;
mod policy;
pub mod serve;
mod session;

#[cfg(test)]
mod tests;

use serde::Serialize;

pub use decode::{DecodeError, Envelope, MAX_DEPTH, MAX_LINE_BYTES, ParamsMismatch};
pub use decode::{decode_line, decode_params};
pub use launch::{COMMAND_MAX_BYTES, ENTER, LABEL_MAX_CHARS};
pub use methods::{DeniedGroup, LaunchMethod, MethodRule, UNRECOGNISED_METHOD, loggable, rule_for};
pub use owned::{MAX_ID_BYTES, MAX_OWNED_TABS, Observed, Owned, observe_response};
pub use params::{
    EmptyParams, NotificationShowParams, NotificationSound, PaneAgentState, PaneSendInputParams,
    ReleaseAgentParams, ReportAgentParams, ReportAgentSessionParams, TabCreateParams,
    TabTargetParams, ToastPosition,
};
pub use policy::{AgentReporting, FilterPolicy, LaunchOverlay, ScriptLauncher};
pub use policy::{BODY_MAX_CHARS, MESSAGE_MAX_CHARS, SOURCE_MAX_CHARS, TITLE_MAX_CHARS};
pub use session::{MAX_SESSION_ID_BYTES, MAX_SESSION_PATH_BYTES, SessionPathError};
pub use session::{check_session_path, session_dir, valid_session_id};

/// herdr's error code in every denial airlock writes.
pub const FORBIDDEN: &str = "forbidden";

/// What to do with one request line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Send `line` to the real herdr and relay its response. `line` is re-serialised from the
    /// validated request (compact, one trailing `\n`), never the client's bytes.
    Forward { line: Vec<u8>, method: String },
    /// Answer the client with `response` (a herdr error line, `\n`-terminated) and close.
    /// `reason` is for the decision log: a fixed rule, never a value from the request.
    /// `method` is empty when the envelope did not decode, and [`UNRECOGNISED_METHOD`] when the
    /// name is not herdr-shaped (see [`loggable`]).
    Deny {
        response: Vec<u8>,
        method: String,
        reason: String,
    },
}

impl Decision {
    /// The method for the decision log.
    pub fn method(&self) -> &str {
        match self {
            Decision::Forward { method, .. } | Decision::Deny { method, .. } => method,
        }
    }

    /// Whether the request goes to herdr.
    pub fn is_forward(&self) -> bool {
        matches!(self, Decision::Forward { .. })
    }
}

/// Decides one request line (with or without its trailing `\n`) under `policy`, with `owned` the
/// tabs and panes herdr said this sandbox created.
pub fn decide(line: &[u8], policy: &FilterPolicy, owned: &Owned) -> Decision {
    let envelope = match decode_line(line) {
        Ok(envelope) => envelope,
        // herdr answers an undecodable request with an empty id; so does airlock.
        Err(err) => return deny("", "", err.rule()),
    };
    let id = envelope.id.clone();
    let method = loggable(&envelope.method).to_owned();
    match policy::evaluate(envelope, policy, owned) {
        Ok(line) => Decision::Forward { line, method },
        Err(rule) => deny(&id, &method, rule),
    }
}

fn deny(id: &str, method: &str, rule: &'static str) -> Decision {
    Decision::Deny {
        response: denial_line(id, method, rule),
        method: method.to_owned(),
        reason: rule.to_owned(),
    }
}

/// `{"id":…,"error":{"code":"forbidden","message":"airlock: <method> is not allowed in this
/// sandbox (<rule>)"}}` and a newline: herdr's error shape, so herdr's CLI prints the message.
fn denial_line(id: &str, method: &str, rule: &str) -> Vec<u8> {
    #[derive(Serialize)]
    struct ErrorResponse<'a> {
        id: &'a str,
        error: ErrorBody<'a>,
    }
    #[derive(Serialize)]
    struct ErrorBody<'a> {
        code: &'a str,
        message: &'a str,
    }
    let subject = if method.is_empty() { "request" } else { method };
    let message = format!("airlock: {subject} is not allowed in this sandbox ({rule})");
    let response = ErrorResponse {
        id,
        error: ErrorBody {
            code: FORBIDDEN,
            message: &message,
        },
    };
    let mut line = serde_json::to_vec(&response).unwrap_or_else(|_| {
        br#"{"id":"","error":{"code":"forbidden","message":"airlock: request is not allowed in this sandbox"}}"#
            .to_vec()
    });
    line.push(b'\n');
    line
}
