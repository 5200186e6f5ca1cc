//! What the fake answers with: the errors (herdr's codes and messages) and the result shapes the
//! session model describes itself in (`PaneInfo`, `TabInfo`, layouts, the snapshot, ...).

use serde_json::{Value, json};

use super::state::{At, Pane, Plugin, Session, TabAt};
use super::{PROTOCOL, VERSION};

/// A method's answer: a `result` or an `error`.
pub(super) type Answer = Result<Value, Failure>;

/// An `error` answer.
pub(super) struct Failure {
    pub(super) code: String,
    pub(super) message: String,
}

impl Failure {
    pub(super) fn new(code: &str, message: impl Into<String>) -> Failure {
        Failure {
            code: code.to_owned(),
            message: message.into(),
        }
    }
}

pub(super) fn ok() -> Answer {
    Ok(json!({"type": "ok"}))
}

pub(super) fn pane_not_found(id: &str) -> Failure {
    Failure::new("pane_not_found", format!("pane {id} not found"))
}

pub(super) fn tab_not_found(id: &str) -> Failure {
    Failure::new("tab_not_found", format!("tab {id} not found"))
}

pub(super) fn workspace_not_found(id: &str) -> Failure {
    Failure::new("workspace_not_found", format!("workspace {id} not found"))
}

pub(super) fn agent_not_found(target: &str) -> Failure {
    Failure::new(
        "agent_not_found",
        format!("agent target {target} not found"),
    )
}

pub(super) fn plugin_not_found(id: &str) -> Failure {
    Failure::new("plugin_not_found", format!("plugin {id} not found"))
}

impl Plugin {
    pub(super) fn info(&self) -> Value {
        json!({
            "plugin_id": self.id,
            "name": self.name,
            "version": self.version,
            "min_herdr_version": self.min_herdr_version,
            "description": self.description,
            "manifest_path": self.manifest,
            "plugin_root": self.root,
            "enabled": self.enabled,
            "source": {"kind": "local"},
            "platforms": null,
            "actions": [],
            "build": [],
            "events": [],
            "link_handlers": [],
            "panes": [],
            "startup": [],
            "warnings": [],
        })
    }
}

/// The status a tab or workspace shows for its panes: the most urgent one.
fn rollup<'a>(statuses: impl Iterator<Item = &'a str>) -> &'static str {
    const ORDER: [&str; 5] = ["unknown", "idle", "done", "working", "blocked"];
    statuses
        .filter_map(|s| ORDER.iter().position(|o| *o == s))
        .max()
        .map_or("unknown", |i| ORDER[i])
}

impl Session {
    pub(super) fn read(&self, at: At, source: &str, format: &str, lines: Option<u64>) -> Value {
        let pane = self.pane(at);
        let all: Vec<&str> = pane.text.split('\n').collect();
        let keep = lines.map_or(all.len(), |n| (n as usize).min(all.len()));
        let text = all[all.len() - keep..].join("\n");
        json!({
            "pane_id": pane.id,
            "workspace_id": self.workspaces[at.0].id,
            "tab_id": self.tab((at.0, at.1)).id,
            "source": source,
            "format": format,
            "text": text,
            "revision": pane.revision,
            "truncated": keep < all.len(),
        })
    }

    pub(super) fn pane_info(&self, at: At) -> Value {
        let pane = self.pane(at);
        let tab = self.tab((at.0, at.1));
        json!({
            "pane_id": pane.id,
            "terminal_id": pane.terminal_id,
            "workspace_id": self.workspaces[at.0].id,
            "tab_id": tab.id,
            "focused": self.is_focused_tab((at.0, at.1)) && tab.focused == pane.id,
            "cwd": pane.cwd,
            "foreground_cwd": pane.cwd,
            "label": pane.label,
            "title": pane.title,
            "terminal_title": null,
            "terminal_title_stripped": null,
            "agent": pane.agent,
            "display_agent": pane.agent,
            "agent_status": pane.status,
            "agent_session": pane.session,
            "revision": pane.revision,
            "scroll": {"offset_from_bottom": 0, "max_offset_from_bottom": 0, "viewport_rows": 24},
            "state_labels": {},
            "tokens": {},
        })
    }

    pub(super) fn agent_info(&self, at: At) -> Value {
        let pane = self.pane(at);
        let mut info = self.pane_info(at);
        let extra = json!({
            "name": pane.name,
            "interactive_ready": true,
            "launch_pending": false,
            "screen_detection_skipped": false,
            "state_change_seq": pane.state_change_seq,
        });
        if let (Some(info), Some(extra)) = (info.as_object_mut(), extra.as_object()) {
            info.remove("label");
            info.remove("scroll");
            info.extend(extra.clone());
        }
        info
    }

    /// [`Session::agent_info`] of every pane with an agent, in order.
    pub(super) fn agent_infos(&self) -> Vec<Value> {
        self.all_panes()
            .into_iter()
            .filter(|at| self.pane(*at).agent.is_some())
            .map(|at| self.agent_info(at))
            .collect()
    }

    pub(super) fn tab_info(&self, (w, t): TabAt) -> Value {
        let tab = self.tab((w, t));
        json!({
            "tab_id": tab.id,
            "workspace_id": self.workspaces[w].id,
            "number": tab.number,
            "label": tab.label,
            "focused": self.is_focused_tab((w, t)),
            "pane_count": tab.panes.len(),
            "agent_status": rollup(tab.panes.iter().map(|p| p.status.as_str())),
        })
    }

    pub(super) fn workspace_info(&self, w: usize) -> Value {
        let ws = &self.workspaces[w];
        let panes = ws.tabs.iter().flat_map(|t| t.panes.iter());
        json!({
            "workspace_id": ws.id,
            "number": ws.number,
            "label": ws.label,
            "focused": ws.id == self.active,
            "pane_count": ws.tabs.iter().map(|t| t.panes.len()).sum::<usize>(),
            "tab_count": ws.tabs.len(),
            "active_tab_id": ws.active_tab,
            "agent_status": rollup(panes.map(|p| p.status.as_str())),
            "tokens": ws.tokens,
            "worktree": null,
        })
    }

    /// A 200x50 tab split into equal columns, one per pane.
    pub(super) fn layout(&self, (w, t): TabAt) -> Value {
        let tab = self.tab((w, t));
        let count = tab.panes.len().max(1);
        let width = 200 / count;
        let panes: Vec<Value> = tab
            .panes
            .iter()
            .enumerate()
            .map(|(i, p)| {
                json!({
                    "pane_id": p.id,
                    "focused": p.id == tab.focused,
                    "rect": {"x": i * width, "y": 0, "width": width, "height": 50},
                })
            })
            .collect();
        let splits: Vec<Value> = (1..count)
            .map(|i| {
                json!({
                    "id": format!("split-{i}"),
                    "direction": "right",
                    "ratio": 1.0 / (count - i + 1) as f64,
                    "rect": {"x": (i - 1) * width, "y": 0, "width": 200 - (i - 1) * width, "height": 50},
                })
            })
            .collect();
        json!({
            "workspace_id": self.workspaces[w].id,
            "tab_id": tab.id,
            "zoomed": tab.zoomed,
            "area": {"x": 0, "y": 0, "width": 200, "height": 50},
            "focused_pane_id": tab.focused,
            "panes": panes,
            "splits": splits,
        })
    }

    /// The tab as a layout tree: each pane split off to the right of the ones before it.
    pub(super) fn description(&self, (w, t): TabAt) -> Value {
        let tab = self.tab((w, t));
        let leaf = |p: &Pane| json!({"type": "pane", "pane_id": p.id, "cwd": p.cwd, "label": p.label, "command": null, "env": {}});
        let mut nodes = tab.panes.iter().rev().map(leaf);
        let mut root = nodes.next().unwrap_or_else(|| json!({"type": "pane"}));
        for (i, node) in nodes.enumerate() {
            root = json!({
                "type": "split",
                "direction": "right",
                "ratio": 1.0 / (i + 2) as f64,
                "first": node,
                "second": root,
            });
        }
        json!({
            "workspace_id": self.workspaces[w].id,
            "tab_id": tab.id,
            "zoomed": tab.zoomed,
            "focused_pane_id": tab.focused,
            "root": root,
        })
    }

    pub(super) fn snapshot(&self) -> Value {
        let focused = self.focused();
        json!({
            "version": VERSION,
            "protocol": PROTOCOL,
            "workspaces": (0..self.workspaces.len()).map(|w| self.workspace_info(w)).collect::<Vec<_>>(),
            "tabs": self.all_tabs().into_iter().map(|at| self.tab_info(at)).collect::<Vec<_>>(),
            "panes": self.all_panes().into_iter().map(|at| self.pane_info(at)).collect::<Vec<_>>(),
            "layouts": self.all_tabs().into_iter().map(|at| self.layout(at)).collect::<Vec<_>>(),
            "agents": self.agent_infos(),
            "focused_workspace_id": focused.map(|at| self.workspaces[at.0].id.clone()),
            "focused_tab_id": focused.map(|at| self.tab((at.0, at.1)).id.clone()),
            "focused_pane_id": focused.map(|at| self.pane(at).id.clone()),
        })
    }
}
