//! The `worktree.removed` hook: offers (popup) to delete the sandboxes whose mounted directory is
//! exactly the removed worktree. Declining keeps them for prune-mappings.

use serde_json::{Value, json};

use crate::actions;
use crate::app::App;
use crate::backend::SandboxBackend;
use crate::error::{PluginError, Result};
use crate::result;

/// The removed worktree's path from `HERDR_PLUGIN_EVENT_JSON` (`{"event", "data": {"worktree": {"path"}}}`).
pub fn removed_path(raw: Option<&str>) -> Result<String> {
    let raw = raw.filter(|r| !r.trim().is_empty()).ok_or_else(|| {
        PluginError::target(
            "HERDR_PLUGIN_EVENT_JSON is missing; the worktree hook runs only from herdr.",
        )
    })?;
    let v: Value = serde_json::from_str(raw)
        .map_err(|e| PluginError::target(format!("HERDR_PLUGIN_EVENT_JSON is not JSON ({e}).")))?;
    let event = v.get("event").and_then(Value::as_str).unwrap_or("");
    if event != "worktree.removed" {
        return Err(PluginError::target(format!(
            "The hook handles worktree.removed, not {event:?}."
        )));
    }
    v.pointer("/data/worktree/path")
        .and_then(Value::as_str)
        .filter(|p| p.starts_with('/'))
        .map(|p| p.trim_end_matches('/').to_owned())
        .ok_or_else(|| {
            PluginError::target("HERDR_PLUGIN_EVENT_JSON names no absolute data.worktree.path.")
        })
}

fn handle(app: &App) -> Result<serde_json::Map<String, Value>> {
    let path = removed_path(std::env::var("HERDR_PLUGIN_EVENT_JSON").ok().as_deref())?;
    let config = app.config()?;
    let targets: Vec<_> = app
        .store
        .list()?
        .into_iter()
        .filter(|m| m.local_path.trim_end_matches('/') == path)
        .collect();
    let mut fields = serde_json::Map::new();
    fields.insert("worktree".into(), json!(path));
    fields.insert(
        "mappings".into(),
        json!(targets.iter().map(|m| &m.pane_id).collect::<Vec<_>>()),
    );
    if targets.is_empty() || !config.cleanup_on_worktree_removed {
        fields.insert("deleted".into(), json!([]));
        fields.insert("confirmed".into(), Value::Null);
        return Ok(fields);
    }
    let backend = app.backend(&config)?;
    let sbx: &dyn SandboxBackend = backend.as_ref();
    let herdr = app.herdr()?;
    let batch = actions::delete_mappings(app, &config, &herdr, sbx, &targets, "worktree.removed")?;
    fields.insert("deleted".into(), json!(batch.deleted));
    fields.insert("failures".into(), json!(batch.failures));
    fields.insert("confirmed".into(), json!(batch.confirmed));
    Ok(fields)
}

/// Runs the hook, printing a result line like an action; returns the exit code.
pub fn run() -> i32 {
    let app = App::from_env(None, None);
    let plugin = app
        .as_ref()
        .map_or(crate::context::PLUGIN_ID.to_owned(), |a| {
            a.plugin_id.clone()
        });
    match app.and_then(|a| handle(&a)) {
        Ok(fields) => {
            println!("{}", result::success(&plugin, "worktree.removed", fields));
            0
        }
        Err(e) => {
            println!("{}", result::failure(&plugin, "worktree.removed", &e));
            1
        }
    }
}
