//! The `agent.*` methods (an agent is a pane something reported an agent in) and the `plugin.*`
//! methods (linked plugins: their manifest's top-level keys, no actions, no panes).

use std::fs;
use std::path::PathBuf;

use serde_json::{Map, Value, json};

use super::answers::{Answer, Failure, ok, pane_not_found};
use super::methods::{read, str_param, u64_param};
use super::state::{Plugin, Session};

pub(super) fn agents(s: &mut Session, method: &str, p: &Map<String, Value>) -> Answer {
    match method {
        "agent.list" => return Ok(json!({"type": "agent_list", "agents": s.agent_infos()})),
        "agent.view.set" => {
            let label = str_param(p, "label");
            let source = str_param(p, "source");
            s.agent_view = Some(json!({"label": label, "source": source}));
            return Ok(
                json!({"type": "agent_view", "active": true, "label": label, "source": source}),
            );
        }
        "agent.view.clear" => {
            s.agent_view = None;
            return Ok(
                json!({"type": "agent_view", "active": false, "label": null, "source": null}),
            );
        }
        "agent.start" => return start(s, p),
        _ => {}
    }
    let at = s.find_agent(str_param(p, "target").unwrap_or_default())?;
    match method {
        "agent.read" => return read(s, at, p),
        "agent.explain" => {
            let pane = s.pane(at);
            return Ok(json!({
                "type": "agent_explain",
                "explain": {
                    "pane_id": pane.id,
                    "agent": pane.agent,
                    "agent_status": pane.status,
                    "reason": "reported through pane.report_agent (fake herdr)",
                },
            }));
        }
        "agent.send_keys" => return ok(),
        "agent.prompt" => {
            return Ok(json!({"type": "agent_prompted", "agent": s.agent_info(at)}));
        }
        "agent.rename" => s.pane_mut(at).name = str_param(p, "name").map(str::to_owned),
        "agent.focus" => s.focus_pane(at),
        _ => {} // agent.get
    }
    Ok(json!({"type": "agent_info", "agent": s.agent_info(at)}))
}

/// `agent.start`: the pane becomes an idle agent of `kind` named `name`.
fn start(s: &mut Session, p: &Map<String, Value>) -> Answer {
    let at = s.find_pane(str_param(p, "pane_id").unwrap_or_default())?;
    let kind = str_param(p, "kind").unwrap_or_default().to_owned();
    let name = str_param(p, "name").unwrap_or_default().to_owned();
    if let Some(ms) = u64_param(p, "timeout_ms")
        && !(3001..=300_000).contains(&ms)
    {
        return Err(Failure::new(
            "invalid_params",
            "timeout_ms must be greater than 3000 and at most 300000",
        ));
    }
    let mut argv = vec![Value::String(kind.clone())];
    argv.extend(
        p.get("args")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
    );
    let pane = s.pane_mut(at);
    pane.agent = Some(kind);
    pane.name = Some(name);
    pane.status = "idle".into();
    pane.revision += 1;
    Ok(json!({"type": "agent_started", "agent": s.agent_info(at), "argv": argv}))
}

pub(super) fn plugins(s: &mut Session, method: &str, p: &Map<String, Value>) -> Answer {
    let wanted = str_param(p, "plugin_id");
    match method {
        "plugin.link" => link(s, p),
        "plugin.list" => {
            let list: Vec<Value> = s
                .plugins
                .iter()
                .filter(|pl| wanted.is_none_or(|id| pl.id == id))
                .map(Plugin::info)
                .collect();
            Ok(json!({"type": "plugin_list", "plugins": list}))
        }
        "plugin.unlink" => {
            let id = wanted.unwrap_or_default();
            let before = s.plugins.len();
            s.plugins.retain(|pl| pl.id != id);
            Ok(
                json!({"type": "plugin_unlinked", "plugin_id": id, "removed": s.plugins.len() < before}),
            )
        }
        "plugin.enable" | "plugin.disable" => {
            let i = s.find_plugin(wanted.unwrap_or_default())?;
            s.plugins[i].enabled = method == "plugin.enable";
            let kind = if s.plugins[i].enabled {
                "plugin_enabled"
            } else {
                "plugin_disabled"
            };
            Ok(json!({"type": kind, "plugin": s.plugins[i].info()}))
        }
        "plugin.action.list" | "plugin.action.invoke" | "plugin.log.list" => {
            if let Some(id) = wanted {
                s.find_plugin(id)?;
            }
            match method {
                "plugin.action.list" => Ok(json!({"type": "plugin_action_list", "actions": []})),
                "plugin.log.list" => Ok(json!({"type": "plugin_log_list", "logs": []})),
                _ => {
                    let action = str_param(p, "action_id").unwrap_or_default();
                    Err(Failure::new(
                        "plugin_action_not_found",
                        format!("plugin action {action} not found"),
                    ))
                }
            }
        }
        "plugin.pane.open" => {
            s.find_plugin(wanted.unwrap_or_default())?;
            let entry = str_param(p, "entrypoint").unwrap_or_default();
            Err(Failure::new(
                "not_found",
                format!("plugin pane {entry} not found"),
            ))
        }
        // plugin.pane.focus / plugin.pane.close: the fake opens no plugin panes
        _ => Err(pane_not_found(str_param(p, "pane_id").unwrap_or_default())),
    }
}

/// `plugin.link`: reads `herdr-plugin.toml` in `path` and links (or re-links) the plugin it names.
fn link(s: &mut Session, p: &Map<String, Value>) -> Answer {
    let root = PathBuf::from(str_param(p, "path").unwrap_or_default());
    let manifest = root.join("herdr-plugin.toml");
    let text = fs::read_to_string(&manifest).map_err(|e| {
        Failure::new(
            "invalid_params",
            format!("cannot read {}: {e}", manifest.display()),
        )
    })?;
    let key = |k: &str| manifest_string(&text, k);
    let Some(id) = key("id") else {
        return Err(Failure::new("invalid_params", "plugin manifest has no id"));
    };
    let plugin = Plugin {
        name: key("name").unwrap_or_else(|| id.clone()),
        version: key("version").unwrap_or_default(),
        min_herdr_version: key("min_herdr_version").unwrap_or_default(),
        description: key("description"),
        id,
        root: root.display().to_string(),
        manifest: manifest.display().to_string(),
        enabled: p.get("enabled").and_then(Value::as_bool).unwrap_or(true),
    };
    s.plugins.retain(|pl| pl.id != plugin.id);
    s.plugins.push(plugin);
    let info = s.plugins.last().map(Plugin::info);
    Ok(json!({"type": "plugin_linked", "plugin": info}))
}

/// A top-level `key = "value"` of a TOML manifest (before its first table).
fn manifest_string(text: &str, key: &str) -> Option<String> {
    text.lines()
        .map(str::trim)
        .take_while(|line| !line.starts_with('['))
        .filter_map(|line| line.split_once('='))
        .find(|(k, _)| k.trim() == key)
        .and_then(|(_, v)| {
            let v = v.trim();
            v.strip_prefix('"')?.split('"').next().map(str::to_owned)
        })
}
