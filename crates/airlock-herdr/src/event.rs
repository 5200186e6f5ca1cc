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

/// The hook's result fields, and whether every deletion succeeded (the exit code says so).
fn handle(app: &App) -> Result<(serde_json::Map<String, Value>, bool)> {
    let raw = std::env::var("HERDR_PLUGIN_EVENT_JSON").ok();
    let mut fields = serde_json::Map::new();
    // Another event, or one without a worktree path, is nothing to clean up: exit 0, like herdr
    // expects of a hook that does not apply.
    if let Some(ignored) = ignored_event(raw.as_deref())? {
        fields.insert("ignored".into(), json!(ignored));
        fields.insert("deleted".into(), json!([]));
        fields.insert("confirmed".into(), Value::Null);
        return Ok((fields, true));
    }
    let path = removed_path(raw.as_deref())?;
    let config = app.config()?;
    let targets: Vec<_> = app
        .store
        .list()?
        .into_iter()
        .filter(|m| m.local_path.trim_end_matches('/') == path)
        .collect();
    fields.insert("worktree".into(), json!(path));
    fields.insert(
        "mappings".into(),
        json!(targets.iter().map(|m| &m.pane_id).collect::<Vec<_>>()),
    );
    if targets.is_empty() || !config.cleanup_on_worktree_removed {
        fields.insert("deleted".into(), json!([]));
        fields.insert("confirmed".into(), Value::Null);
        return Ok((fields, true));
    }
    let backend = app.backend_for_all(&config, &targets)?;
    let sbx: &dyn SandboxBackend = backend.as_ref();
    let herdr = app.herdr()?;
    let confirmed = actions::confirm_batch(app, &herdr, &targets, "worktree.removed")?;
    let (mut deleted, mut failures) = (Vec::new(), Vec::new());
    if confirmed {
        for m in &targets {
            match actions::delete_one(app, sbx, m) {
                Ok(d) => deleted.extend(actions::deleted_names(&d)),
                Err(e) => failures.push(actions::failure_json(m, &e)),
            }
        }
    }
    if !deleted.is_empty() {
        herdr.notify(
            "Docker Sandboxes removed",
            &format!("{} (worktree {path} was removed)", deleted.join(", ")),
        );
    }
    let clean = failures.is_empty();
    fields.insert("deleted".into(), json!(deleted));
    fields.insert("failures".into(), json!(failures));
    fields.insert("confirmed".into(), json!(confirmed));
    Ok((fields, clean))
}

/// `Some(why)` when the payload is valid JSON but not a `worktree.removed` event with a path.
fn ignored_event(raw: Option<&str>) -> Result<Option<String>> {
    let Some(raw) = raw.filter(|r| !r.trim().is_empty()) else {
        return Ok(None);
    };
    let v: Value = serde_json::from_str(raw)
        .map_err(|e| PluginError::target(format!("HERDR_PLUGIN_EVENT_JSON is not JSON ({e}).")))?;
    let event = v.get("event").and_then(Value::as_str).unwrap_or("");
    if event != "worktree.removed" {
        return Ok(Some(format!("event {event:?} is not handled")));
    }
    if v.pointer("/data/worktree/path")
        .and_then(Value::as_str)
        .is_none()
    {
        return Ok(Some("the event carries no worktree path".to_owned()));
    }
    Ok(None)
}

/// Runs the hook, printing a result line like an action. Exit 0 when there was nothing to do or
/// every confirmed deletion succeeded (a declined popup included), 1 when one failed or the hook
/// could not run.
pub fn run() -> i32 {
    let app = App::from_env(None, None);
    let plugin = app
        .as_ref()
        .map_or(crate::context::PLUGIN_ID.to_owned(), |a| {
            a.plugin_id.clone()
        });
    match app.and_then(|a| handle(&a)) {
        Ok((fields, clean)) => {
            println!("{}", result::success(&plugin, "worktree.removed", fields));
            i32::from(!clean)
        }
        Err(e) => {
            println!("{}", result::failure(&plugin, "worktree.removed", &e));
            1
        }
    }
}
