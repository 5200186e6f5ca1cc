//! prune-mappings: drops mappings whose pane is gone and whose sandbox sbx no longer lists, then
//! offers (popup) to delete sandboxes that still exist but lost their pane.
//!
//! The mappings are read before the two listings, so every decision is made on data at least as
//! old as the listings; a mapping rewritten meanwhile fails the compare-and-delete and is kept.

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::app::{App, Outcome};
use crate::backend::SandboxBackend;
use crate::error::{PluginError, Result};
use crate::herdr::HerdrCli;
use crate::store::PaneMapping;

/// The `kept` reasons (a public contract: orchestrators match on the part before the colon).
pub const STILL_OWNED: &str = "a bridge or a deletion still owns this mapping";
pub const SHELL_ATTACHED: &str = "an open-shell session is attached";
pub const CHANGED: &str = "mapping changed while pruning; run prune-mappings again";
pub const ORPHAN: &str = "sandbox still exists: reconnect adopts it, forget-mapping deletes it";
pub const PANE_OPEN: &str = "pane still open: run forget-mapping from that pane";
pub const CAME_BACK: &str = "pane came back while the confirmation was open; nothing deleted";

fn entry(m: &PaneMapping, reason: &str) -> Value {
    json!({"paneId": m.pane_id, "sandboxName": m.sandbox_name, "reason": reason})
}

fn pane_ids(herdr: &HerdrCli, why: &str) -> Result<HashSet<String>> {
    herdr
        .list_panes()
        .map(|panes| panes.into_iter().map(|p| p.pane_id).collect())
        .map_err(|e| PluginError {
            message: format!("Cannot {why} without herdr's pane list: {}", e.message),
            ..e
        })
}

pub fn run(app: &App) -> Result<Outcome> {
    let config = app.config()?;
    let mappings = app.store.list()?;
    let backend = app.backend_for_all(&config, &mappings)?;
    let sbx: &dyn SandboxBackend = backend.as_ref();
    let herdr = app.herdr()?;
    // Both listings must be readable: an unreadable one never means "gone".
    let sandboxes: HashSet<String> = sbx
        .list()
        .map_err(|e| PluginError {
            message: format!("Cannot prune without a sandbox list: {}", e.message),
            ..e
        })?
        .into_iter()
        .map(|s| s.name)
        .collect();
    let panes = pane_ids(&herdr, "prune")?;
    let (mut pruned, mut kept, mut orphans) = (Vec::new(), Vec::new(), Vec::new());
    for m in mappings {
        let pane_exists = panes.contains(&m.pane_id);
        let listed = m.tracked_names().iter().any(|n| sandboxes.contains(n));
        if pane_exists {
            if !listed {
                kept.push(entry(&m, PANE_OPEN));
            }
        } else if m.bridge_running() || m.deletion_in_progress() {
            // A bridge may be creating a sandbox sbx does not list yet.
            kept.push(entry(&m, STILL_OWNED));
        } else if !m.live_shells().is_empty() {
            kept.push(entry(&m, SHELL_ATTACHED));
        } else if !listed {
            if app.store.delete_if_revision(&m.pane_id, &m.revision)? {
                pruned.push(json!({"paneId": m.pane_id, "sandboxName": m.sandbox_name}));
            } else {
                kept.push(entry(&m, CHANGED));
            }
        } else {
            orphans.push(m);
        }
    }
    let (mut deleted, mut failures) = (Vec::new(), Vec::new());
    let confirmed = if orphans.is_empty() {
        None
    } else {
        Some(super::confirm_batch(
            app,
            &herdr,
            &orphans,
            "prune-mappings",
        )?)
    };
    if confirmed == Some(true) {
        // The popup may have stayed open for a minute: a pane that came back meanwhile (herdr
        // restored it, or reconnect adopted the sandbox) is no orphan any more.
        let now = pane_ids(&herdr, "delete orphans")?;
        for m in &orphans {
            if now.contains(&m.pane_id) {
                kept.push(entry(m, CAME_BACK));
                continue;
            }
            match super::delete_one(app, sbx, m) {
                Ok(d) => deleted.extend(super::deleted_names(&d)),
                Err(e) => {
                    let reason = format!("deletion failed ({}): {}", e.kind, e.message);
                    kept.push(entry(m, &reason));
                    failures.push(super::failure_json(m, &e));
                }
            }
        }
    } else {
        kept.extend(orphans.iter().map(|m| entry(m, ORPHAN)));
    }
    let mut out = Outcome::default().line(format!(
        "pruned {} mapping(s), deleted {} sandbox(es), kept {}, failed {}",
        pruned.len(),
        deleted.len(),
        kept.len(),
        failures.len()
    ));
    for k in &kept {
        out = out.line(format!(
            "kept {}\t{}\t{}",
            k["paneId"].as_str().unwrap_or(""),
            k["sandboxName"].as_str().unwrap_or(""),
            k["reason"].as_str().unwrap_or("")
        ));
    }
    Ok(out
        .field("pruned", pruned)
        .field("kept", kept)
        .field("deleted", deleted)
        .field("failures", failures)
        .field("orphansConfirmed", confirmed))
}
