//! Sandbox operations shared by the actions, the pane bridge and the worktree hook: prepare,
//! connect, shell, stop, destroy, and the guards that keep deletions and sessions apart.

use crate::agents::Agent;
use crate::backend::{CreateRequest, ExecRequest, SandboxBackend};
use crate::config::PluginConfig;
use crate::error::{ErrorKind, PluginError, Result};
use crate::herdr::{HerdrCli, PaneInfo};
use crate::naming::shell_quote;
use crate::proc;
use crate::store::{DeletionClaim, LifecycleState, PaneMapping, Store, WorkspaceMode};

/// The `--source` the plugin reports agents under.
pub const AGENT_REPORT_SOURCE: &str = "airlock.sandbox";

/// Where `sbx exec` runs: the recorded directory in mount mode; in clone mode sbx decides.
pub fn exec_workdir(m: &PaneMapping) -> Option<String> {
    (m.workspace_mode == WorkspaceMode::Mount).then(|| m.workdir.clone())
}

/// `sbx create` for a mapping, with the mapping's recorded mode winning over the current config.
pub fn create_request(config: &PluginConfig, m: &PaneMapping, agent: &Agent) -> CreateRequest {
    let mut paths = vec![m.local_path.clone()];
    paths.extend(config.extra_workspaces.iter().cloned());
    CreateRequest {
        name: m.sandbox_name.clone(),
        agent: agent.sbx_agent.clone(),
        paths,
        clone: m.workspace_mode == WorkspaceMode::Clone,
        template: config.template.clone(),
        kits: config.kits.clone(),
        kit_args: config.kit_args.clone(),
        env: config.env.clone(),
        env_files: config.env_files.clone(),
        publish: config.publish.clone(),
        cpus: config.cpus.as_ref().map(ToString::to_string),
        memory: config.memory.clone(),
        deny_network: config.deny_network.clone(),
    }
}

fn require_dir(path: &str) -> Result<()> {
    if !std::path::Path::new(path).is_dir() {
        return Err(PluginError::target(format!(
            "The workspace path {path} is not an existing directory. Was the worktree removed? Use forget-mapping."
        )));
    }
    Ok(())
}

fn fail(
    store: &Store,
    pane: &str,
    error: PluginError,
    state: Option<LifecycleState>,
) -> PluginError {
    let _ = store.modify(pane, |m| {
        if let Some(s) = state {
            m.lifecycle_state = s;
        }
        m.record_error(&error);
        Ok(())
    });
    error
}

/// Creates the mapping's sandbox unless it exists, runs a custom agent's setup script on first
/// preparation, and verifies the agent's program exists inside the sandbox.
pub fn prepare(
    store: &Store,
    config: &PluginConfig,
    backend: &dyn SandboxBackend,
    pane: &str,
    log: &mut dyn FnMut(&str),
) -> Result<()> {
    let m = store.require(pane)?;
    let agent = config.agent(&m.agent_kind)?;
    let mut reused = backend.find(&m.sandbox_name)?.is_some();
    if !reused || m.workspace_mode != WorkspaceMode::Clone {
        require_dir(&m.local_path)?;
    }
    if reused {
        log(&format!(
            "Sandbox {} already exists; reusing it.",
            m.sandbox_name
        ));
    } else {
        log(&format!(
            "Creating Docker Sandbox {} for {} (agent {}, {} mode)...",
            m.sandbox_name,
            m.local_path,
            agent.sbx_agent,
            m.workspace_mode.as_str()
        ));
        store.modify(pane, |m| {
            m.lifecycle_state = LifecycleState::Creating;
            m.last_error = None;
            Ok(())
        })?;
        match backend.create(&create_request(config, &m, &agent)) {
            Ok(out) if !out.output().trim().is_empty() => log(out.output().trim()),
            Ok(_) => {}
            // "conflict" also covers a taken host port: only a sandbox sbx lists is reused.
            Err(e)
                if e.kind == ErrorKind::Conflict
                    && backend.find(&m.sandbox_name).ok().flatten().is_some() =>
            {
                reused = true;
                log(&format!(
                    "sbx reports that {} already exists; reusing it.",
                    m.sandbox_name
                ));
            }
            Err(e) => return Err(fail(store, pane, e, Some(LifecycleState::Failed))),
        }
    }
    let still = store.load(pane)?;
    if !reused
        && still
            .as_ref()
            .is_none_or(|s| s.sandbox_name != m.sandbox_name)
    {
        // Forgotten while create ran for minutes: a sandbox nobody tracks must not stay behind.
        log(&format!(
            "The mapping for pane {pane} disappeared while {} was being created; deleting it again.",
            m.sandbox_name
        ));
        let _ = backend.remove(&m.sandbox_name);
        return Err(PluginError::conflict(format!(
            "The mapping for pane {pane} was removed while sandbox {} was being created; the sandbox was deleted again.",
            m.sandbox_name
        )));
    }
    let setup_ran = store.modify(pane, |cur| {
        // A sandbox recorded as deleted that exists (again) is a new VM: off the checkpoint, setup anew.
        let checkpointed = cur.deleted_sandbox_names.contains(&cur.sandbox_name);
        if !reused || checkpointed {
            let name = cur.sandbox_name.clone();
            cur.deleted_sandbox_names.retain(|n| *n != name);
            cur.setup_script_ran_at = None;
        }
        if !reused {
            cur.created_at = Some(proc::now_iso());
        }
        if !reused || checkpointed || !cur.lifecycle_state.connectable() {
            cur.lifecycle_state = LifecycleState::Created;
            cur.last_error = None;
        }
        Ok(cur.setup_script_ran_at.clone())
    })?;
    if let Some(script) = &agent.setup_script {
        if let Some(at) = setup_ran {
            log(&format!(
                "Setup script already ran in {} on {at}; skipping it.",
                m.sandbox_name
            ));
        } else {
            log(&format!(
                "Running the {} setup script inside {}...",
                agent.title, m.sandbox_name
            ));
            let request = ExecRequest {
                name: m.sandbox_name.clone(),
                workdir: exec_workdir(&m),
                env: Vec::new(),
                argv: vec![config.shell.clone(), "-lc".to_owned(), script.clone()],
            };
            let out = backend
                .exec(&request, true)
                .map_err(|e| fail(store, pane, e, Some(LifecycleState::Failed)))?;
            if !out.output().trim().is_empty() {
                log(out.output().trim());
            }
            if !out.success() {
                let e = PluginError::config(format!(
                    "The {} setup script failed inside {} (exit {}). Fix setupScript in config.json, then run reconnect.",
                    agent.title, m.sandbox_name, out.code.unwrap_or(-1)
                ))
                .with_output(out.output());
                return Err(fail(store, pane, e, Some(LifecycleState::Failed)));
            }
            store.modify(pane, |m| {
                m.setup_script_ran_at = Some(proc::now_iso());
                Ok(())
            })?;
        }
    }
    verify_agent(store, config, backend, &m, &agent)?;
    store.modify(pane, |m| {
        m.lifecycle_state = LifecycleState::Prepared;
        Ok(())
    })
}

/// Probes for the agent's program the way the launch runs it: same directory, same agentEnv.
fn verify_agent(
    store: &Store,
    config: &PluginConfig,
    backend: &dyn SandboxBackend,
    m: &PaneMapping,
    agent: &Agent,
) -> Result<()> {
    let program = &agent.command[0];
    let probe = ExecRequest {
        name: m.sandbox_name.clone(),
        workdir: exec_workdir(m),
        env: config.agent_env.clone(),
        argv: vec![
            "sh".to_owned(),
            "-c".to_owned(),
            format!("command -v {}", shell_quote(program)?),
        ],
    };
    let out = backend.exec(&probe, false)?;
    if out.success() {
        return Ok(());
    }
    // A missing command is a silent non-zero exit; anything sbx prints is sbx failing.
    let error = if out.output().trim().is_empty() {
        PluginError::config(format!(
            "{program} is not available inside sandbox {}. Set template, add a setupScript, or pick another agentKind.",
            m.sandbox_name
        ))
    } else {
        PluginError::new(
            crate::classify::classify(&out.output()),
            format!(
                "Could not check for {program} inside sandbox {}; sbx exec failed.",
                m.sandbox_name
            ),
        )
        .with_output(out.output())
    };
    Err(fail(store, &m.pane_id, error, Some(LifecycleState::Failed)))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::sbx::create_args;
    use crate::store::{LifecycleState, MAPPING_VERSION};

    #[test]
    fn every_create_key_reaches_the_sbx_argv() {
        let config = crate::config::parse(
            r#"{"template":"img:1","kits":["k1","k2"],"kitArgs":["a=b"],"env":["CI=1","TERM"],"envFiles":["/e"],
                "publish":["8080:3000"],"cpus":2,"memory":"8g","denyNetwork":["evil.example"],
                "extraWorkspaces":["/data:ro"],"workspaceMode":"clone"}"#,
        )
        .expect("valid");
        let m = PaneMapping {
            version: MAPPING_VERSION,
            pane_id: "w1:p2".into(),
            sandbox_name: "herdr-claude-code-0123456789ab".into(),
            workspace_id: None,
            agent_kind: "claude-code".into(),
            sbx_agent: "claude".into(),
            local_path: "/repo".into(),
            workdir: "/repo/sub".into(),
            workspace_mode: WorkspaceMode::Clone,
            lifecycle_state: LifecycleState::Provisional,
            created_at: None,
            updated_at: String::new(),
            revision: String::new(),
            source_pane_id: None,
            replaces_sandbox_names: vec![],
            deleted_sandbox_names: vec![],
            last_error: None,
            setup_script_ran_at: None,
            last_connected_at: None,
            adopted_from: None,
            bridge: None,
            shells: vec![],
            deletion: None,
        };
        let agent = config.agent("claude-code").expect("agent");
        let argv = create_args(&create_request(&config, &m, &agent));
        assert_eq!(
            argv,
            [
                "create",
                "--name",
                "herdr-claude-code-0123456789ab",
                "--template",
                "img:1",
                "--kit",
                "k1",
                "--kit",
                "k2",
                "--kit-arg",
                "a=b",
                "--env",
                "CI=1",
                "--env",
                "TERM",
                "--env-file",
                "/e",
                "--publish",
                "8080:3000",
                "--cpus",
                "2",
                "--memory",
                "8g",
                "--deny-network",
                "evil.example",
                "--clone",
                "claude",
                "/repo",
                "/data:ro",
            ]
        );
        assert_eq!(
            exec_workdir(&m),
            None,
            "clone mode passes no working directory"
        );
    }
}
