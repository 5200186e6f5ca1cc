//! Sandbox operations shared by the actions, the pane bridge and the worktree hook: connect, the
//! bridge's acknowledgement, destroy, and the guards that keep deletions and sessions apart
//! (preparing a sandbox is in [`crate::prepare`]).

use crate::backend::{ExecRequest, SandboxBackend};
use crate::config::PluginConfig;
use crate::error::{ErrorKind, PluginError, Result};
use crate::herdr::{HerdrCli, PaneInfo};
pub use crate::prepare::{create_request, prepare};
use crate::proc;
use crate::store::{DeletionClaim, LifecycleState, PaneMapping, Store, WorkspaceMode};

/// The `--source` the plugin reports agents under.
pub const AGENT_REPORT_SOURCE: &str = "airlock.sandbox";

/// Where `sbx exec` runs: the recorded directory in mount mode; in clone mode sbx decides.
pub fn exec_workdir(m: &PaneMapping) -> Option<String> {
    (m.workspace_mode == WorkspaceMode::Mount).then(|| m.workdir.clone())
}

/// Marks the mapping missing when the backend positively no longer lists its sandbox. An
/// unreadable listing is never "gone": the error is returned instead.
pub fn confirm_missing(
    store: &Store,
    backend: &dyn SandboxBackend,
    m: &PaneMapping,
) -> Result<bool> {
    if backend.find(&m.sandbox_name)?.is_some() {
        return Ok(false);
    }
    store.modify(&m.pane_id, |cur| {
        cur.lifecycle_state = LifecycleState::Missing;
        Ok(())
    })?;
    Ok(true)
}

/// Attaches the agent in this process's terminal; returns its exit code.
pub fn connect(
    store: &Store,
    config: &PluginConfig,
    backend: &dyn SandboxBackend,
    herdr: Option<&HerdrCli>,
    pane: &str,
    log: &mut dyn FnMut(&str),
) -> Result<i32> {
    let m = store.require(pane)?;
    let agent = config.agent(&m.agent_kind)?;
    if confirm_missing(store, backend, &m)? {
        return Err(PluginError::new(
            ErrorKind::NotFound,
            format!(
                "Sandbox {} no longer exists. Run replace-sandbox for a fresh one, or forget-mapping.",
                m.sandbox_name
            ),
        ));
    }
    store.modify(pane, |m| {
        m.lifecycle_state = LifecycleState::Ready;
        m.last_connected_at = Some(proc::now_iso());
        Ok(())
    })?;
    // Agents herdr cannot detect are announced while they run, so herdr and our guards see them.
    let reported = match (
        &agent.herdr_detection_kind,
        herdr,
        config.report_agent_status,
    ) {
        (None, Some(h), true) => h
            .report_agent(pane, AGENT_REPORT_SOURCE, &agent.kind, "working")
            .map_err(|e| log(&format!("could not report the agent: {e}")))
            .is_ok(),
        _ => false,
    };
    let host_env: Vec<(String, String)> = agent
        .herdr_detection_kind
        .iter()
        .map(|k| ("HERDR_AGENT".to_owned(), k.clone()))
        .collect();
    let request = ExecRequest {
        name: m.sandbox_name.clone(),
        workdir: exec_workdir(&m),
        env: config.agent_env.clone(),
        argv: agent.command.clone(),
    };
    let code = backend.attach(&request, &host_env);
    if reported && let Some(h) = herdr {
        let _ = h.release_agent(pane, AGENT_REPORT_SOURCE, &agent.kind);
    }
    let code = code?;
    if code != 0 && confirm_missing(store, backend, &m).unwrap_or(false) {
        return Err(PluginError::new(
            ErrorKind::NotFound,
            format!("Sandbox {} disappeared while attached.", m.sandbox_name),
        ));
    }
    Ok(code)
}

/// Records this process as the mapping's bridge; refuses while another bridge or a deletion runs.
pub fn acknowledge_bridge(store: &Store, pane: &str, launch_id: Option<&str>) -> Result<()> {
    store.modify(pane, |m| {
        if m.deletion_in_progress() {
            return Err(PluginError::conflict(format!(
                "Another action is deleting the sandboxes of pane {pane} right now."
            )));
        }
        if m.bridge
            .as_ref()
            .and_then(|b| b.pid)
            .is_some_and(|p| p != std::process::id())
            && m.bridge_running()
        {
            return Err(PluginError::conflict(format!(
                "A bridge for pane {pane} is already running (pid {}). Use that pane.",
                m.bridge.as_ref().and_then(|b| b.pid).unwrap_or(0)
            )));
        }
        m.bridge = Some(crate::store::BridgeOwner {
            pid: Some(std::process::id()),
            token: Some(proc::own_token()),
            launch_id: launch_id.map(str::to_owned),
            started_at: Some(proc::now_iso()),
            exited_at: None,
        });
        Ok(())
    })
}

/// Gives the bridge record back on the way out (only when it still names this process).
pub fn release_bridge(store: &Store, pane: &str) {
    let _ = store.update(pane, |slot| {
        if let Some(m) = slot
            && let Some(b) = &mut m.bridge
            && b.pid == Some(std::process::id())
        {
            b.pid = None;
            b.token = None;
            b.exited_at = Some(proc::now_iso());
        }
        Ok(())
    });
}

/// Refuses while anything runs in the mapping's sandbox: a bridge, herdr's view of an agent in the
/// pane, or (with `shells`) an open-shell session; and while another process deletes it.
pub fn guard_idle(m: &PaneMapping, pane: Option<&PaneInfo>, shells: bool) -> Result<()> {
    if m.deletion_in_progress() {
        return Err(PluginError::conflict(format!(
            "Another action is deleting the sandboxes of pane {} right now; wait for it to finish.",
            m.pane_id
        )));
    }
    if m.bridge_running() {
        return Err(PluginError::conflict(format!(
            "The bridge for pane {} is still running (pid {}): it is preparing {} or has the agent attached. Leave the agent first.",
            m.pane_id,
            m.bridge.as_ref().and_then(|b| b.pid).unwrap_or(0),
            m.sandbox_name
        )));
    }
    if let Some(p) = pane
        && p.has_agent()
    {
        return Err(PluginError::conflict(format!(
            "herdr still detects {} in pane {}. Leave the agent first, then retry.",
            p.agent.as_deref().unwrap_or("an agent"),
            m.pane_id
        )));
    }
    if shells && let Some(s) = m.live_shells().first() {
        return Err(PluginError::conflict(format!(
            "An open-shell session (pid {} in pane {}) is attached to {}. Exit it first.",
            s.pid, s.pane_id, m.sandbox_name
        )));
    }
    Ok(())
}

/// What a deletion removed.
#[derive(Debug, Default, Clone)]
pub struct Deleted {
    pub deleted: Vec<String>,
    pub already_missing: Vec<String>,
}

/// Claims the mapping, then removes every sandbox it owns (checkpointing each one), never under a
/// live session. `revision`, when given, must still match (the popup showed that state).
pub fn destroy(
    store: &Store,
    backend: &dyn SandboxBackend,
    pane: &str,
    revision: Option<&str>,
) -> Result<Deleted> {
    let targets = store.modify(pane, |m| {
        if let Some(r) = revision
            && m.revision != r
        {
            return Err(PluginError::conflict(format!(
                "The mapping of pane {pane} changed while the confirmation popup was open; nothing was deleted. Run the action again."
            )));
        }
        guard_idle(m, None, true)?;
        m.deletion = Some(DeletionClaim { pid: std::process::id(), token: proc::own_token(), since: proc::now_iso() });
        Ok(m.deletion_targets())
    })?;
    let mut report = Deleted::default();
    for name in targets {
        match backend.remove(&name) {
            Ok(()) => report.deleted.push(name.clone()),
            Err(e) if e.kind == ErrorKind::NotFound => report.already_missing.push(name.clone()),
            Err(e) => {
                let _ = store.modify(pane, |m| {
                    m.deletion = None;
                    m.record_error(&e);
                    Ok(())
                });
                return Err(e);
            }
        }
        store.modify(pane, |m| {
            m.deleted_sandbox_names.push(name.clone());
            Ok(())
        })?;
    }
    Ok(report)
}

/// Drops the deletion claim of this process.
pub fn release_claim(store: &Store, pane: &str) {
    let _ = store.update(pane, |slot| {
        if let Some(m) = slot
            && m.deletion
                .as_ref()
                .is_some_and(|d| d.pid == std::process::id())
        {
            m.deletion = None;
        }
        Ok(())
    });
}
