//! forget-mapping and replace-sandbox (popup, `sbx rm --force`, then drop or recreate), and the
//! deletion steps prune-mappings and the worktree hook share.

use std::path::Path;

use serde_json::{Value, json};

use super::target::{self, Target};
use crate::app::{App, Outcome};
use crate::backend::SandboxBackend;
use crate::confirm;
use crate::error::{ErrorKind, PluginError, Result};
use crate::herdr::HerdrCli;
use crate::launch::{launch_with_fallback, rehome};
use crate::lifecycle::{self, Deleted};
use crate::naming::{pane_label, sandbox_name, shell_quote};
use crate::store::{LifecycleState, PaneMapping};

/// Guards, popup, then the deletion; the mapping stays claimed until the caller is done with it.
/// Returns what was deleted and whether the mapped pane still exists.
fn confirmed_destroy(
    app: &App,
    herdr: &HerdrCli,
    sbx: &dyn SandboxBackend,
    target: &Target,
    action: &str,
) -> Result<(Deleted, bool)> {
    let m = &target.mapping;
    let pane = if target.orphan {
        None
    } else {
        herdr.get_pane(&m.pane_id)?
    };
    lifecycle::guard_idle(m, pane.as_ref(), true)?;
    confirm::ask(app, herdr, action, std::slice::from_ref(m))?;
    let deleted = lifecycle::destroy(&app.store, sbx, &m.pane_id, Some(&m.revision))?;
    Ok((deleted, pane.is_some()))
}

fn drop_mapping(app: &App, pane: &str) -> Result<()> {
    app.store.update(pane, |slot| {
        if slot.as_ref().is_some_and(|m| {
            m.deletion
                .as_ref()
                .is_some_and(|d| d.pid == std::process::id())
        }) {
            *slot = None;
        }
        Ok(())
    })
}

pub fn forget(app: &App) -> Result<Outcome> {
    let config = app.config()?;
    let herdr = app.herdr()?;
    let target = target::resolve(app, &herdr)?;
    target::refuse_focused_agent(app, &target, "delete the sandbox")?;
    let backend = app.backend_of(&config, &target.mapping)?;
    let (deleted, _) = confirmed_destroy(app, &herdr, backend.as_ref(), &target, "forget-mapping")?;
    let m = &target.mapping;
    drop_mapping(app, &m.pane_id)?;
    herdr.notify("Docker Sandbox deleted", &m.deletion_targets().join(", "));
    Ok(Outcome::default()
        .field("paneId", m.pane_id.clone())
        .field("sandboxName", m.sandbox_name.clone())
        .field("deleted", deleted.deleted.clone())
        .field("alreadyMissing", deleted.already_missing.clone())
        .line(format!(
            "Deleted {} and forgot pane {}.",
            m.deletion_targets().join(", "),
            m.pane_id
        )))
}

/// Where the replacement's agent starts: the recorded directory while it still exists inside the
/// worktree, else the worktree itself.
fn replacement_workdir(m: &PaneMapping) -> String {
    let inside = Path::new(&m.workdir).starts_with(&m.local_path);
    if inside && Path::new(&m.workdir).is_dir() {
        m.workdir.clone()
    } else {
        m.local_path.clone()
    }
}

pub fn replace(app: &App) -> Result<Outcome> {
    let config = app.config()?;
    let herdr = app.herdr()?;
    let target = target::resolve(app, &herdr)?;
    target::refuse_focused_agent(app, &target, "replace the sandbox")?;
    let m = target.mapping.clone();
    // Everything the replacement needs is checked before anything is deleted.
    let agent = config.agent(&config.agent_kind)?;
    if !Path::new(&m.local_path).is_dir() {
        return Err(PluginError::target(format!(
            "The workspace path {} no longer exists, so no replacement sandbox can be created; nothing was deleted. Use forget-mapping to delete {}.",
            m.local_path, m.sandbox_name
        )));
    }
    shell_quote(&m.local_path)?;
    let workdir = replacement_workdir(&m);
    let backend = app.backend_of(&config, &m)?;
    // The replacement gets the configured backend, as it gets the configured agent and mode.
    let fresh_kind = crate::backend::choose::choose(&config).kind;
    let (deleted, pane_exists) =
        confirmed_destroy(app, &herdr, backend.as_ref(), &target, "replace-sandbox")?;
    let fresh_name = sandbox_name(
        &config.sandbox_name_prefix,
        &agent.kind,
        &m.local_path,
        &m.pane_id,
    );
    let mut pane = m.pane_id.clone();
    let mut adopted_from = None;
    if !pane_exists {
        let current = app.store.require(&m.pane_id)?;
        pane = rehome(app, &herdr, &current).inspect_err(|_| {
            lifecycle::release_claim(&app.store, &m.pane_id);
        })?;
        adopted_from = Some(m.pane_id.clone());
    }
    // The history is built from the mapping as it is now: re-homing may have absorbed a displaced
    // mapping's sandboxes, and every earlier round stays listed.
    app.store.modify(&pane, |cur| {
        // Another process claimed the mapping meanwhile: it owns it now; what was deleted is
        // already recorded for it.
        if let Some(d) = cur.deletion.as_ref().filter(|d| d.pid != std::process::id()) {
            return Err(PluginError::conflict(format!(
                "The mapping of pane {} was taken over by process {} while its sandboxes were deleted; no replacement was started.",
                cur.pane_id, d.pid
            )));
        }
        cur.replaces_sandbox_names = cur.tracked_names();
        for name in deleted.deleted.iter().chain(&deleted.already_missing) {
            if !cur.deleted_sandbox_names.contains(name) {
                cur.deleted_sandbox_names.push(name.clone());
            }
        }
        cur.sandbox_name = fresh_name.clone();
        cur.agent_kind = agent.kind.clone();
        cur.sbx_agent = agent.sbx_agent.clone();
        cur.workdir = workdir.clone();
        cur.workspace_mode = config.workspace_mode;
        cur.backend = (fresh_kind == crate::store::BackendKind::Airlock).then_some(fresh_kind);
        cur.lifecycle_state = LifecycleState::Provisional;
        cur.setup_script_ran_at = None;
        cur.last_error = None;
        cur.deletion = None;
        cur.created_at = None;
        Ok(())
    })?;
    if let Err(e) = herdr.rename_pane(&pane, &pane_label(&agent.kind, &fresh_name)) {
        eprintln!("could not relabel pane {pane}: {e}");
    }
    let launched = launch_with_fallback(app, &config, &herdr, &pane, "start")?;
    herdr.notify(
        "Docker Sandbox replaced",
        &format!("{} deleted, {fresh_name} starting", m.sandbox_name),
    );
    Ok(Outcome::default()
        .field("paneId", launched.pane_id.clone())
        .field("sandboxName", fresh_name.clone())
        .field("agentKind", agent.kind.clone())
        .field("deleted", deleted.deleted)
        .field("alreadyMissing", deleted.already_missing)
        .field("adoptedFrom", adopted_from)
        .field("movedTo", launched.moved_to)
        .line(format!(
            "Replaced {} with {fresh_name} in pane {}.",
            m.sandbox_name, launched.pane_id
        )))
}

/// One popup for every sandbox of `mappings`; `Ok(false)` when it was declined, closed or timed
/// out (not an error for the batch callers: the mappings are kept).
pub fn confirm_batch(
    app: &App,
    herdr: &HerdrCli,
    mappings: &[PaneMapping],
    action: &str,
) -> Result<bool> {
    match confirm::ask(app, herdr, action, mappings) {
        Ok(()) => Ok(true),
        Err(e) if e.kind == ErrorKind::Cancelled => Ok(false),
        Err(e) => Err(e),
    }
}

/// Deletes the sandboxes of `m` as the popup showed it (its revision must still match) and drops
/// the mapping; on failure the claim is released and the mapping kept.
pub fn delete_one(app: &App, sbx: &dyn SandboxBackend, m: &PaneMapping) -> Result<Deleted> {
    lifecycle::destroy(&app.store, sbx, &m.pane_id, Some(&m.revision))
        .and_then(|d| drop_mapping(app, &m.pane_id).map(|()| d))
        .inspect_err(|_| lifecycle::release_claim(&app.store, &m.pane_id))
}

/// The names a batch result lists as `deleted`: the removed ones, then `<name> (already gone)`.
pub fn deleted_names(d: &Deleted) -> Vec<String> {
    d.deleted
        .iter()
        .cloned()
        .chain(
            d.already_missing
                .iter()
                .map(|n| format!("{n} (already gone)")),
        )
        .collect()
}

/// A batch deletion's failure entry.
pub fn failure_json(m: &PaneMapping, e: &PluginError) -> Value {
    json!({"paneId": m.pane_id, "sandboxName": m.sandbox_name, "errorKind": e.kind.as_str(), "message": e.message})
}
