//! list-sandboxes: every mapping, flagging sandboxes and panes that no longer exist.

use serde_json::{Value, json};

use crate::app::{App, Outcome};
use crate::backend::SandboxBackend;
use crate::error::{PluginError, Result};
use crate::herdr::HerdrCli;
use crate::store::PaneMapping;

/// One row per mapping plus the listing error, if sbx could not be read (then `exists` is null:
/// an unreadable listing never reads as "sandbox gone").
pub fn list_rows(
    mappings: &[PaneMapping],
    backend: Option<&dyn SandboxBackend>,
    herdr: Option<&HerdrCli>,
) -> (Vec<Value>, Option<PluginError>, Option<String>) {
    // The two listings are independent processes: run them side by side.
    let (sandboxes, panes) = std::thread::scope(|scope| {
        let panes = scope.spawn(|| herdr.map(|h| h.list_panes()));
        let sandboxes = backend.map(|b| b.list());
        (
            sandboxes,
            panes.join().expect("the pane listing does not panic"),
        )
    });
    let (sandboxes, sandbox_error) = match sandboxes {
        Some(Ok(list)) => (Some(list), None),
        Some(Err(e)) => (None, Some(e)),
        None => (
            None,
            Some(PluginError::startup("sbx is not available".to_owned())),
        ),
    };
    let (panes, pane_error) = match panes {
        Some(Ok(p)) => (
            Some(
                p.into_iter()
                    .map(|p| p.pane_id)
                    .collect::<std::collections::HashSet<_>>(),
            ),
            None,
        ),
        Some(Err(e)) => (None, Some(e.message)),
        None => (None, Some("herdr is not available".to_owned())),
    };
    let rows = mappings
        .iter()
        .map(|m| {
            let sandbox = sandboxes.as_ref().map(|list| list.iter().find(|s| s.name == m.sandbox_name));
            let mut row = json!({
                "paneId": m.pane_id,
                "paneExists": panes.as_ref().map(|p| p.contains(&m.pane_id)),
                "sandboxName": m.sandbox_name,
                "agentKind": m.agent_kind,
                "localPath": m.local_path,
                "workdir": m.workdir,
                "workspaceMode": m.workspace_mode.as_str(),
                "lifecycleState": m.lifecycle_state.as_str(),
                "exists": sandbox.map(|s| s.is_some()),
                "status": sandbox.flatten().and_then(|s| s.status.clone()),
                "ports": sandbox.flatten().map(|s| s.ports.iter().map(|p| p.sandbox_port).collect::<Vec<_>>()),
            });
            row["paneError"] = json!(pane_error);
            row
        })
        .collect();
    (rows, sandbox_error, pane_error)
}

pub fn run(app: &App) -> Result<Outcome> {
    let config = app.config()?;
    let mappings = app.store.list()?;
    let sbx = app.backend_for_all(&config, &mappings);
    let herdr = app.herdr().ok();
    let (rows, mut sandbox_error, _) = list_rows(&mappings, sbx.as_deref().ok(), herdr.as_ref());
    // A backend that could not even be resolved says why (sbx missing), not "not available".
    if let Err(e) = &sbx {
        sandbox_error = Some(e.clone());
    }
    let mut out = Outcome::default()
        .field("mappings", Value::Array(rows.clone()))
        .field("sandboxError", sandbox_error.as_ref().map(error_json));
    if rows.is_empty() {
        out = out.line("No mappings. start-agent creates one.");
    }
    for r in &rows {
        let flag = |key: &str, gone: &str| match r[key].as_bool() {
            Some(false) => format!(" [{gone}]"),
            _ => String::new(),
        };
        out = out.line(format!(
            "{}  {}  {}  {}{}{}",
            r["paneId"].as_str().unwrap_or(""),
            r["sandboxName"].as_str().unwrap_or(""),
            r["lifecycleState"].as_str().unwrap_or(""),
            r["status"].as_str().unwrap_or("-"),
            flag("paneExists", "pane gone"),
            flag("exists", "sandbox gone"),
        ));
    }
    if let Some(e) = sandbox_error {
        out = out.line(format!("sbx ls failed ({}): {}", e.kind, e.message));
    }
    Ok(out)
}

/// A listing error as result lines carry it: `{kind, message}`.
pub fn error_json(e: &PluginError) -> Value {
    json!({"kind": e.kind.as_str(), "message": e.message})
}
