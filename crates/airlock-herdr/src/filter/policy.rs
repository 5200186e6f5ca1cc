//! What a sandbox may ask of herdr, and the checks each allowed method's params must pass.

use std::fmt::Debug;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::decode::{Envelope, decode_params};
use super::launch;
use super::methods::{LaunchMethod, MethodRule, rule_for};
use super::owned::Owned;
use super::params::{
    EmptyParams, NotificationShowParams, PaneSendInputParams, ReleaseAgentParams,
    ReportAgentParams, ReportAgentSessionParams, TabCreateParams, TabTargetParams,
};
use super::session::{check_session_path, is_token, valid_session_id};

/// The longest notification title herdr shows, in characters.
pub const TITLE_MAX_CHARS: usize = 80;
/// The longest notification body herdr shows, in characters.
pub const BODY_MAX_CHARS: usize = 240;
/// The longest `message` accepted in an agent report, in characters.
pub const MESSAGE_MAX_CHARS: usize = 1024;
/// The longest `source` accepted in an agent report, in characters (herdr's plugin-id cap).
pub const SOURCE_MAX_CHARS: usize = 120;

/// What one sandbox may do through the herdr filter, beyond `ping` which is always allowed.
/// The default allows nothing else.
///
/// Not `PartialEq`: [`LaunchOverlay`] holds a [`ScriptLauncher`], which has no equality.
#[derive(Debug, Clone, Default)]
pub struct FilterPolicy {
    /// The `notify` capability: `notification.show`.
    pub notify: bool,
    /// The `agent_reporting` capability, bound to the pane and agent of a direct
    /// `airlock <agent>` launch; `None` when either anchor is missing.
    pub agent_reporting: Option<AgentReporting>,
    /// The `launch_overlay` capability: `tab.create`, then `tab.close` / `pane.send_input` on
    /// what herdr said it created (the [`Owned`] table, kept apart from the policy).
    pub launch_overlay: Option<LaunchOverlay>,
}

/// The anchors of `launch_overlay`, all derived on the host.
#[derive(Debug, Clone)]
pub struct LaunchOverlay {
    /// The workspace the sandbox's pane is in (host's HERDR_WORKSPACE_ID); tab.create may name
    /// only it (or omit it).
    pub workspace_id: Option<String>,
    /// The project directory; tab.create's cwd may be absent or exactly this path.
    pub project: PathBuf,
    /// Turns the command line the sandbox asks to type (send_input text without the Enter) into
    /// the one typed instead.
    pub launcher: Arc<dyn ScriptLauncher>,
}

/// What makes the line a sandbox asks to type into its tab safe to run on the host: typically,
/// reading the script it names once, validating it, copying it out of the sandbox's reach and
/// naming the copy.
pub trait ScriptLauncher: Send + Sync + Debug {
    /// `command` is the text of a pane.send_input (e.g.
    /// `sh /home/u/.cache/airlock/tmp/s1/revdiff-launch-abc`); returns the text to send instead
    /// (e.g. `sh '/home/u/.cache/airlock/herdr-scripts/s1/launch-1'`), or the rule it broke (a
    /// fixed string that never quotes the request).
    fn relocate(&self, command: &str) -> Result<String, &'static str>;
}

/// The anchors of `agent_reporting`, all derived on the host, never from a report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentReporting {
    /// The host's `HERDR_PANE_ID` for the pane airlock was launched in.
    pub pane_id: String,
    /// The agent airlock was asked to launch (`claude`, `pi`, `codex`, …).
    pub agent: String,
    /// That agent's own session store on the host (see [`super::session_dir`]); reported
    /// transcript paths must lie inside it.
    pub session_dir: PathBuf,
}

/// The result of checking one request against `policy` and the tabs and panes the sandbox owns:
/// the line to forward, or the rule it broke.
///
/// The rule is `&'static str` on purpose: no byte of the request can end up in a denial or in
/// the decision log, so a refused session id or path is never written anywhere.
pub(crate) fn evaluate(
    envelope: Envelope,
    policy: &FilterPolicy,
    owned: &Owned,
) -> Result<Vec<u8>, &'static str> {
    let Envelope { id, method, params } = envelope;
    let params = match rule_for(&method) {
        MethodRule::Ping => ping(params)?,
        MethodRule::NotificationShow => notification(params, policy)?,
        MethodRule::ReportAgent => report_agent(params, reporting(policy)?)?,
        MethodRule::ReportAgentSession => report_agent_session(params, reporting(policy)?)?,
        MethodRule::ReleaseAgent => release_agent(params, reporting(policy)?)?,
        MethodRule::LaunchOverlay(method) => {
            let launch = policy
                .launch_overlay
                .as_ref()
                .ok_or("launch_overlay capability not enabled")?;
            match method {
                LaunchMethod::TabCreate => launch::tab_create(params, launch)?,
                LaunchMethod::TabClose => launch::tab_close(params, owned)?,
                LaunchMethod::PaneSendInput => launch::send_input(params, launch, owned)?,
            }
        }
        MethodRule::Denied(group) => return Err(group.rule()),
    };
    reserialise(&id, &method, &params)
}

/// Validated params, ready to be serialised into the forwarded line (as the inner value alone).
#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum Checked {
    Empty(EmptyParams),
    Notification(NotificationShowParams),
    ReportAgent(ReportAgentParams),
    ReportAgentSession(ReportAgentSessionParams),
    ReleaseAgent(ReleaseAgentParams),
    TabCreate(TabCreateParams),
    TabTarget(TabTargetParams),
    SendInput(PaneSendInputParams),
}

fn ping(params: Map<String, Value>) -> Result<Checked, &'static str> {
    let params = decode_params(params).map_err(|_| "ping params must be {}")?;
    Ok(Checked::Empty(params))
}

fn notification(
    params: Map<String, Value>,
    policy: &FilterPolicy,
) -> Result<Checked, &'static str> {
    if !policy.notify {
        return Err("notify capability not enabled");
    }
    let params: NotificationShowParams = schema(params)?;
    check_notification(&params)?;
    Ok(Checked::Notification(params))
}

fn report_agent(
    params: Map<String, Value>,
    anchors: &AgentReporting,
) -> Result<Checked, &'static str> {
    let params: ReportAgentParams = schema(params)?;
    check_reporter(anchors, &params.pane_id, &params.agent, &params.source)?;
    if let Some(message) = &params.message {
        check_text(message, MESSAGE_MAX_CHARS, "invalid report message")?;
    }
    check_session(
        anchors,
        params.agent_session_id.as_deref(),
        params.agent_session_path.as_deref(),
    )?;
    Ok(Checked::ReportAgent(params))
}

fn report_agent_session(
    params: Map<String, Value>,
    anchors: &AgentReporting,
) -> Result<Checked, &'static str> {
    let params: ReportAgentSessionParams = schema(params)?;
    check_reporter(anchors, &params.pane_id, &params.agent, &params.source)?;
    check_session(
        anchors,
        params.agent_session_id.as_deref(),
        params.agent_session_path.as_deref(),
    )?;
    // Claude's SessionStart sources: startup, resume, clear, compact.
    if let Some(source) = &params.session_start_source
        && !is_token(source, 64)
    {
        return Err("invalid session_start_source");
    }
    Ok(Checked::ReportAgentSession(params))
}

fn release_agent(
    params: Map<String, Value>,
    anchors: &AgentReporting,
) -> Result<Checked, &'static str> {
    let params: ReleaseAgentParams = schema(params)?;
    check_reporter(anchors, &params.pane_id, &params.agent, &params.source)?;
    Ok(Checked::ReleaseAgent(params))
}

pub(super) fn schema<T: DeserializeOwned>(params: Map<String, Value>) -> Result<T, &'static str> {
    decode_params(params).map_err(|_| "params do not match herdr's schema")
}

/// The bytes sent to herdr: serialised from the validated value, never the client's bytes, so
/// anything the checks did not see (an ignored field, odd whitespace, an escape) is dropped.
fn reserialise<P: Serialize>(id: &str, method: &str, params: &P) -> Result<Vec<u8>, &'static str> {
    #[derive(Serialize)]
    struct Request<'a, P> {
        id: &'a str,
        method: &'a str,
        params: &'a P,
    }
    let mut line = serde_json::to_vec(&Request { id, method, params })
        .map_err(|_| "request could not be re-serialised")?;
    line.push(b'\n');
    Ok(line)
}

/// herdr can deliver toasts as terminal escape sequences, so a control character in the text
/// would reach the host terminal.
fn check_notification(params: &NotificationShowParams) -> Result<(), &'static str> {
    if params.title.chars().count() > TITLE_MAX_CHARS {
        return Err("notification title over 80 characters");
    }
    if params
        .body
        .as_ref()
        .is_some_and(|body| body.chars().count() > BODY_MAX_CHARS)
    {
        return Err("notification body over 240 characters");
    }
    let mut text = params
        .title
        .chars()
        .chain(params.body.iter().flat_map(|b| b.chars()));
    if text.any(char::is_control) {
        return Err("notification text has a control character");
    }
    Ok(())
}

fn reporting(policy: &FilterPolicy) -> Result<&AgentReporting, &'static str> {
    policy
        .agent_reporting
        .as_ref()
        .ok_or("agent_reporting capability not enabled")
}

/// A report speaks only for the pane airlock runs in and the agent it launched.
fn check_reporter(
    anchors: &AgentReporting,
    pane_id: &str,
    agent: &str,
    source: &str,
) -> Result<(), &'static str> {
    if pane_id != anchors.pane_id {
        return Err("report names another pane");
    }
    if agent != anchors.agent {
        return Err("report names another agent");
    }
    if source.is_empty() {
        return Err("invalid report source");
    }
    check_text(source, SOURCE_MAX_CHARS, "invalid report source")
}

/// herdr stores and displays these strings: bounded, and free of terminal control bytes.
fn check_text(text: &str, max_chars: usize, rule: &'static str) -> Result<(), &'static str> {
    if text.chars().count() > max_chars || text.chars().any(char::is_control) {
        return Err(rule);
    }
    Ok(())
}

fn check_session(
    anchors: &AgentReporting,
    id: Option<&str>,
    path: Option<&str>,
) -> Result<(), &'static str> {
    if let Some(id) = id
        && !valid_session_id(id)
    {
        return Err("invalid agent_session_id");
    }
    if let Some(path) = path {
        check_session_path(path, &anchors.session_dir).map_err(|err| err.rule())?;
    }
    Ok(())
}
