//! prune-mappings: drops mappings whose pane is gone and whose sandbox sbx no longer lists, then
//! offers (popup) to delete sandboxes that still exist but lost their pane.

use std::collections::HashSet;

use serde_json::json;

use crate::app::{App, Outcome};
use crate::backend::SandboxBackend;
use crate::error::Result;

pub fn run(app: &App) -> Result<Outcome> {
    let config = app.config()?;
    let backend = app.backend(&config)?;
    let sbx: &dyn SandboxBackend = backend.as_ref();
    let herdr = app.herdr()?;
    // Both listings must be readable: an unreadable one never means "gone".
    let sandboxes: HashSet<String> = sbx.list()?.into_iter().map(|s| s.name).collect();
    let panes: HashSet<String> = herdr.list_panes()?.into_iter().map(|p| p.pane_id).collect();
    let mut pruned = Vec::new();
    let mut kept = Vec::new();
    let mut orphans = Vec::new();
    for m in app.store.list()? {
        let listed = m.deletion_targets().iter().any(|n| sandboxes.contains(n));
        if panes.contains(&m.pane_id) {
            kept.push(json!({"paneId": m.pane_id, "sandboxName": m.sandbox_name, "reason": "pane exists"}));
        } else if !listed {
            if app.store.delete_if_revision(&m.pane_id, &m.revision)? {
                pruned.push(json!({"paneId": m.pane_id, "sandboxName": m.sandbox_name}));
            } else {
                kept.push(json!({"paneId": m.pane_id, "sandboxName": m.sandbox_name, "reason": "changed while pruning"}));
            }
        } else if m.bridge_running() || !m.live_shells().is_empty() || m.deletion_in_progress() {
            kept.push(
                json!({"paneId": m.pane_id, "sandboxName": m.sandbox_name, "reason": "in use"}),
            );
        } else {
            orphans.push(m);
        }
    }
    let batch = super::delete_mappings(app, &config, &herdr, sbx, &orphans, "prune-mappings")?;
    for pane in &batch.declined {
        let name = orphans
            .iter()
            .find(|m| &m.pane_id == pane)
            .map(|m| m.sandbox_name.clone());
        kept.push(json!({"paneId": pane, "sandboxName": name, "reason": "deletion declined"}));
    }
    let text = format!(
        "pruned {}, deleted {}, kept {}, failed {}",
        pruned.len(),
        batch.deleted.len(),
        kept.len(),
        batch.failures.len()
    );
    Ok(Outcome::default()
        .field("pruned", pruned)
        .field("kept", kept)
        .field("deleted", batch.deleted)
        .field("failures", batch.failures)
        .field(
            "orphansConfirmed",
            if orphans.is_empty() {
                serde_json::Value::Null
            } else {
                batch.confirmed.into()
            },
        )
        .line(text))
}
