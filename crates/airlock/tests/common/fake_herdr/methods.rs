//! Which method does what: the dispatch to the method groups, the methods that stand alone
//! (`ping`, `server.*`, `notification.show`, ...), the ones that hold the connection (`*.wait`,
//! `events.*`), and the parameter readers the groups share.

use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::answers::{Answer, Failure, agent_not_found, ok};
use super::schema::Request;
use super::server::State;
use super::state::{At, Session};
use super::{PROTOCOL, VERSION, agents, panes, workspaces};

/// How the server goes on with a request.
pub(super) enum Reply {
    /// Answer and close.
    Now(Answer),
    /// Send the ack, then hold the connection until the client leaves.
    Subscribe,
    /// Hold the connection until the condition holds, the deadline passes or the client leaves.
    Wait(Wait),
}

pub(super) struct Wait {
    until: Until,
    deadline: Option<Instant>,
    timeout_message: String,
}

enum Until {
    Never,
    Output {
        pane: String,
        needle: String,
        lines: Option<u64>,
        source: String,
    },
    Agent {
        pane: String,
        states: Vec<String>,
        prompted: bool,
    },
}

impl Wait {
    fn new(until: Until, timeout_ms: Option<u64>, what: &str) -> Wait {
        Wait {
            until,
            deadline: timeout_ms.map(|ms| Instant::now() + Duration::from_millis(ms)),
            timeout_message: format!("timed out waiting for {what}"),
        }
    }

    /// The answer when the condition holds (or can no longer hold) or the deadline passed; `None`
    /// while the wait goes on.
    pub(super) fn outcome(&self, session: &Session) -> Option<Answer> {
        if let Some(answer) = self.check(session) {
            return Some(answer);
        }
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Some(Err(Failure::new("timeout", self.timeout_message.clone())));
        }
        None
    }

    fn check(&self, session: &Session) -> Option<Answer> {
        match &self.until {
            Until::Never => None,
            Until::Output {
                pane,
                needle,
                lines,
                source,
            } => {
                let at = match session.find_pane(pane) {
                    Ok(at) => at,
                    Err(failure) => return Some(Err(failure)),
                };
                let read = session.read(at, source, "text", *lines);
                let text = read["text"].as_str().unwrap_or_default();
                let line = text
                    .lines()
                    .find(|l| l.contains(needle.as_str()))?
                    .to_owned();
                Some(Ok(json!({
                    "type": "output_matched",
                    "pane_id": pane,
                    "revision": session.pane(at).revision,
                    "matched_line": line,
                    "read": read,
                })))
            }
            Until::Agent {
                pane,
                states,
                prompted,
            } => {
                let Some(at) = session.pane_at(pane) else {
                    return Some(Err(agent_not_found(pane)));
                };
                if !states.iter().any(|s| *s == session.pane(at).status) {
                    return None;
                }
                let kind = if *prompted {
                    "agent_prompted"
                } else {
                    "agent_info"
                };
                Some(Ok(json!({"type": kind, "agent": session.agent_info(at)})))
            }
        }
    }
}

pub(super) fn str_param<'a>(params: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    params.get(key).and_then(Value::as_str)
}

pub(super) fn bool_param(params: &Map<String, Value>, key: &str) -> bool {
    params.get(key).and_then(Value::as_bool).unwrap_or(false)
}

pub(super) fn u64_param(params: &Map<String, Value>, key: &str) -> Option<u64> {
    params.get(key).and_then(Value::as_u64)
}

/// The workspace an optional `workspace_id` names (`None` without one).
pub(super) fn workspace_param(
    s: &Session,
    params: &Map<String, Value>,
) -> Result<Option<usize>, Failure> {
    let id = str_param(params, "workspace_id");
    id.map(|id| s.find_workspace(id)).transpose()
}

/// The workspace `workspace_id` names, else the active one (`none` when there is none).
pub(super) fn workspace_or_active(
    s: &Session,
    params: &Map<String, Value>,
    none: impl FnOnce() -> Failure,
) -> Result<usize, Failure> {
    match workspace_param(s, params)? {
        Some(w) => Ok(w),
        None => s.workspace_at(&s.active).ok_or_else(none),
    }
}

/// Rejects an `env` whose names a process could not have (herdr's check).
pub(super) fn env_param(params: &Map<String, Value>) -> Result<(), Failure> {
    for key in params
        .get("env")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        if key.is_empty() || key.contains('=') || key.contains('\0') {
            return Err(Failure::new(
                "invalid_params",
                format!("invalid environment variable name {key:?}"),
            ));
        }
    }
    Ok(())
}

/// `pane.read` and `agent.read`: the pane's text as `source`, `format` and `lines` ask.
pub(super) fn read(s: &Session, at: At, params: &Map<String, Value>) -> Answer {
    let read = s.read(
        at,
        str_param(params, "source").unwrap_or("recent"),
        str_param(params, "format").unwrap_or("text"),
        u64_param(params, "lines"),
    );
    Ok(json!({"type": "pane_read", "read": read}))
}

/// Cuts control characters and surrounding blanks, then keeps `max` characters (herdr's toast
/// text rule); `None` when nothing is left.
fn sanitize(text: &str, max: usize) -> Option<String> {
    let cleaned: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let cleaned: String = cleaned.trim().chars().take(max).collect();
    (!cleaned.is_empty()).then_some(cleaned)
}

pub(super) fn handle(state: &mut State, req: &Request) -> Reply {
    let p = &req.params;
    if let Some(wait) = waiting(&state.session, req) {
        return wait;
    }
    let s = &mut state.session;
    let answer = match req.method {
        "ping" => Ok(json!({
            "type": "pong",
            "version": VERSION,
            "protocol": PROTOCOL,
            "capabilities": {"live_handoff": true, "detached_server_daemon": false},
        })),
        "server.stop" | "server.live_handoff" => ok(),
        "server.reload_config" => {
            Ok(json!({"type": "config_reload", "status": "applied", "diagnostics": []}))
        }
        "server.agent_manifests" => Ok(json!({
            "type": "agent_manifest_status",
            "manifests": [],
            "last_check_unix": null,
            "last_result": null,
        })),
        "server.reload_agent_manifests" => {
            Ok(json!({"type": "agent_manifest_reload", "manifests": []}))
        }
        "notification.show" => match sanitize(str_param(p, "title").unwrap_or(""), 80) {
            None => Err(Failure::new(
                "invalid_params",
                "notification title is empty",
            )),
            Some(title) => {
                state.notifications.push(json!({
                    "title": title,
                    "body": str_param(p, "body").and_then(|b| sanitize(b, 240)),
                    "sound": str_param(p, "sound").unwrap_or("none"),
                    "position": p.get("position").cloned().unwrap_or(Value::Null),
                }));
                Ok(json!({"type": "notification_show", "shown": true, "reason": "shown"}))
            }
        },
        "client.window_title.set" => {
            Ok(json!({"type": "client_window_title", "changed": true, "reason": "set"}))
        }
        "client.window_title.clear" => {
            Ok(json!({"type": "client_window_title", "changed": true, "reason": "cleared"}))
        }
        "session.snapshot" => Ok(json!({"type": "session_snapshot", "snapshot": s.snapshot()})),
        "popup.close" => Err(Failure::new("popup_not_open", "no popup is open")),
        "integration.install" | "integration.uninstall" => {
            let kind = req.method.replace('.', "_");
            let target = str_param(p, "target").unwrap_or_default();
            Ok(json!({
                "type": kind,
                "target": target,
                "details": {"messages": [format!("fake herdr: {} {target}", req.method)]},
            }))
        }
        m if m.starts_with("workspace.") || m.starts_with("worktree.") => {
            workspaces::workspaces(s, m, p)
        }
        m if m.starts_with("tab.") => workspaces::tabs(s, m, p),
        m if m.starts_with("agent.") => agents::agents(s, m, p),
        m if m.starts_with("plugin.") => agents::plugins(s, m, p),
        m => panes::panes(s, m, p),
    };
    Reply::Now(answer)
}

/// The methods that hold the connection, or `None` for the others.
fn waiting(s: &Session, req: &Request) -> Option<Reply> {
    let p = &req.params;
    let timeout = u64_param(p, "timeout_ms");
    Some(match req.method {
        "events.subscribe" => Reply::Subscribe,
        "events.wait" => Reply::Wait(Wait::new(Until::Never, timeout, "event")),
        "pane.wait_for_output" => {
            let pane = str_param(p, "pane_id").unwrap_or_default();
            if let Err(failure) = s.find_pane(pane) {
                return Some(Reply::Now(Err(failure)));
            }
            let until = Until::Output {
                pane: pane.to_owned(),
                needle: p["match"]["value"].as_str().unwrap_or_default().to_owned(),
                lines: u64_param(p, "lines"),
                source: str_param(p, "source").unwrap_or("recent").to_owned(),
            };
            Reply::Wait(Wait::new(until, timeout, "output"))
        }
        "agent.wait" => agent_wait(s, p, p.get("until"), timeout, false),
        "agent.prompt" if p.get("wait").is_some_and(Value::is_object) => {
            let wait = &p["wait"];
            agent_wait(s, p, wait.get("until"), wait["timeout_ms"].as_u64(), true)
        }
        _ => return None,
    })
}

/// `agent.wait`, and `agent.prompt` with `wait`: until the `target` agent is in one of `until`.
fn agent_wait(
    s: &Session,
    p: &Map<String, Value>,
    until: Option<&Value>,
    timeout: Option<u64>,
    prompted: bool,
) -> Reply {
    let at = match s.find_agent(str_param(p, "target").unwrap_or_default()) {
        Ok(at) => at,
        Err(failure) => return Reply::Now(Err(failure)),
    };
    let until = Until::Agent {
        pane: s.pane(at).id.clone(),
        states: wait_states(until),
        prompted,
    };
    Reply::Wait(Wait::new(until, timeout, "agent"))
}

/// The agent states a wait ends on (`idle`/`done` when the request names none).
fn wait_states(until: Option<&Value>) -> Vec<String> {
    let states: Vec<String> = until
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    if states.is_empty() {
        vec!["idle".into(), "done".into()]
    } else {
        states
    }
}
