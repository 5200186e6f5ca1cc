//! forget-mapping and replace-sandbox (popup, `sbx rm --force`, then drop or recreate), and the
//! batch deletion prune-mappings and the worktree hook share.

use serde_json::{Value, json};

use crate::app::{App, Outcome};
use crate::backend::SandboxBackend;
use crate::config::PluginConfig;
use crate::confirm;
use crate::error::{ErrorKind, PluginError, Result};
use crate::herdr::HerdrCli;
use crate::launch::{adopt_into_new_pane, launch_with_fallback};
use crate::lifecycle::{self, Deleted};
use crate::naming::sandbox_name;
use crate::store::{LifecycleState, PaneMapping};

/// Guards, popup, then the deletion; the mapping stays claimed until the caller is done with it.
fn confirmed_destroy(
    app: &App,
    herdr: &HerdrCli,
    sbx: &dyn SandboxBackend,
    m: &PaneMapping,
    action: &str,
) -> Result<Deleted> {
    let pane = herdr.get_pane(&m.pane_id)?;
    lifecycle::guard_idle(m, pane.as_ref(), true)?;
    confirm::ask(
        app,
        herdr,
        action,
        std::slice::from_ref(&m.pane_id),
        &m.deletion_targets(),
    )?;
    lifecycle::destroy(&app.store, sbx, &m.pane_id, Some(&m.revision))
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
    let m = super::target_mapping(app)?;
    let herdr = app.herdr()?;
    let backend = app.backend(&config)?;
    let sbx: &dyn SandboxBackend = backend.as_ref();
    let deleted = confirmed_destroy(app, &herdr, sbx, &m, "forget-mapping")?;
    drop_mapping(app, &m.pane_id)?;
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

pub fn replace(app: &App) -> Result<Outcome> {
    let config = app.config()?;
    let m = super::target_mapping(app)?;
    let herdr = app.herdr()?;
    let backend = app.backend(&config)?;
    let sbx: &dyn SandboxBackend = backend.as_ref();
    let agent = config.agent(&m.agent_kind)?;
    let deleted = confirmed_destroy(app, &herdr, sbx, &m, "replace-sandbox")?;
    let fresh_name = sandbox_name(
        &config.sandbox_name_prefix,
        &agent.kind,
        &m.local_path,
        &m.pane_id,
    );
    app.store.modify(&m.pane_id, |cur| {
        cur.sandbox_name = fresh_name.clone();
        cur.replaces_sandbox_names.clear();
        cur.deleted_sandbox_names.clear();
        cur.lifecycle_state = LifecycleState::Provisional;
        cur.setup_script_ran_at = None;
        cur.last_error = None;
        cur.deletion = None;
        cur.created_at = None;
        Ok(())
    })?;
    let mut pane = m.pane_id.clone();
    let mut adopted_from = None;
    if herdr.get_pane(&pane)?.is_none() {
        let fresh = adopt_into_new_pane(app, &herdr, &m)?;
        adopted_from = Some(pane);
        pane = fresh;
    }
    let launched = launch_with_fallback(app, &config, &herdr, &pane, "start")?;
    Ok(Outcome::default()
        .field("paneId", launched.pane_id.clone())
        .field("sandboxName", fresh_name.clone())
        .field("agentKind", m.agent_kind.clone())
        .field("deleted", deleted.deleted)
        .field("alreadyMissing", deleted.already_missing)
        .field("adoptedFrom", adopted_from)
        .field("movedTo", launched.moved_to)
        .line(format!(
            "Replaced {} with {fresh_name} in pane {}.",
            m.sandbox_name, launched.pane_id
        )))
}

/// The result of a batch deletion.
#[derive(Debug, Default)]
pub struct BatchDeletion {
    pub confirmed: bool,
    pub deleted: Vec<Value>,
    pub failures: Vec<Value>,
    pub declined: Vec<String>,
}

/// One popup for all of `mappings`, then each deletion; mappings whose deletion succeeded are
/// dropped. A declined or timed-out popup deletes nothing and is not an error.
pub fn delete_mappings(
    app: &App,
    _config: &PluginConfig,
    herdr: &HerdrCli,
    sbx: &dyn SandboxBackend,
    mappings: &[PaneMapping],
    action: &str,
) -> Result<BatchDeletion> {
    let mut out = BatchDeletion::default();
    if mappings.is_empty() {
        return Ok(out);
    }
    let panes: Vec<String> = mappings.iter().map(|m| m.pane_id.clone()).collect();
    let names: Vec<String> = mappings
        .iter()
        .flat_map(PaneMapping::deletion_targets)
        .collect();
    match confirm::ask(app, herdr, action, &panes, &names) {
        Ok(()) => out.confirmed = true,
        Err(e) if e.kind == ErrorKind::Cancelled => {
            out.declined = panes;
            return Ok(out);
        }
        Err(e) => return Err(e),
    }
    for m in mappings {
        match lifecycle::destroy(&app.store, sbx, &m.pane_id, Some(&m.revision)).and_then(|d| drop_mapping(app, &m.pane_id).map(|()| d)) {
            Ok(d) => out.deleted.push(json!({"paneId": m.pane_id, "sandboxName": m.sandbox_name, "deleted": d.deleted, "alreadyMissing": d.already_missing})),
            Err(e) => {
                lifecycle::release_claim(&app.store, &m.pane_id);
                out.failures.push(failure_json(m, &e));
            }
        }
    }
    Ok(out)
}

fn failure_json(m: &PaneMapping, e: &PluginError) -> Value {
    json!({"paneId": m.pane_id, "sandboxName": m.sandbox_name, "errorKind": e.kind.as_str(), "message": e.message})
}
