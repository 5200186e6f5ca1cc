//! Preparing a mapping's sandbox: create it (or reuse the one sbx lists), run a custom agent's
//! setup script the first time, verify the agent's program exists inside. The bridge runs this in
//! the pane, so progress goes to the pane through `log`.

use crate::agents::Agent;
use crate::backend::{CreateRequest, ExecRequest, SandboxBackend};
use crate::config::PluginConfig;
use crate::error::{ErrorKind, PluginError, Result};
use crate::lifecycle::exec_workdir;
use crate::naming::shell_quote;
use crate::proc;
use crate::store::{LifecycleState, PaneMapping, Store, WorkspaceMode};

/// `sbx create` for a mapping, with the mapping's recorded mode winning over the current config:
/// a recreated sandbox keeps the isolation its mapping promises.
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

/// Records `error` on the mapping (and `state`, if given) and hands it back.
pub(crate) fn fail(
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
    let reused = create_or_reuse(store, config, backend, &m, &agent, log)?;
    let setup_ran = record_prepared_sandbox(store, pane, reused)?;
    if let Some(script) = &agent.setup_script {
        match setup_ran {
            Some(at) => log(&format!(
                "Setup script already ran in {} on {at}; skipping it.",
                m.sandbox_name
            )),
            None => run_setup(store, config, backend, &m, &agent, script, log)?,
        }
    }
    if backend.probes_agent() {
        verify_agent(store, config, backend, &m, &agent)?;
    }
    store.modify(pane, |m| {
        m.lifecycle_state = LifecycleState::Prepared;
        Ok(())
    })
}

/// Creates the sandbox, or reuses the one sbx lists; `Ok(true)` when reused.
fn create_or_reuse(
    store: &Store,
    config: &PluginConfig,
    backend: &dyn SandboxBackend,
    m: &PaneMapping,
    agent: &Agent,
    log: &mut dyn FnMut(&str),
) -> Result<bool> {
    let pane = &m.pane_id;
    let listed = backend.find(&m.sandbox_name)?.is_some();
    // An existing clone-mode sandbox carries its own checkout; otherwise the host directory is needed.
    if !listed || m.workspace_mode != WorkspaceMode::Clone {
        require_dir(&m.local_path)?;
    }
    if listed {
        log(&format!(
            "Sandbox {} already exists; reusing it.",
            m.sandbox_name
        ));
        return Ok(true);
    }
    let what = match backend.kind() {
        crate::store::BackendKind::Sbx => "Docker Sandbox",
        crate::store::BackendKind::Airlock => "airlock sandbox",
    };
    log(&format!(
        "Creating {what} {} for {} (agent {}, {} mode)...",
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
    match backend.create(&create_request(config, m, agent)) {
        Ok(out) => {
            if !out.output().trim().is_empty() {
                log(out.output().trim());
            }
        }
        // "conflict" also covers a taken host port: only a sandbox sbx lists is reused.
        Err(e)
            if e.kind == ErrorKind::Conflict
                && backend.find(&m.sandbox_name).ok().flatten().is_some() =>
        {
            log(&format!(
                "sbx reports that {} already exists; reusing it.",
                m.sandbox_name
            ));
            return Ok(true);
        }
        Err(e) => return Err(fail(store, pane, e, Some(LifecycleState::Failed))),
    }
    if store
        .load(pane)?
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
    Ok(false)
}

/// Updates the mapping for a created or reused sandbox; returns when its setup script last ran.
fn record_prepared_sandbox(store: &Store, pane: &str, reused: bool) -> Result<Option<String>> {
    store.modify(pane, |cur| {
        // A sandbox recorded as deleted that exists (again) is a new VM: off the checkpoint, so a
        // later deletion removes it, and its setup runs anew.
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
    })
}

fn run_setup(
    store: &Store,
    config: &PluginConfig,
    backend: &dyn SandboxBackend,
    m: &PaneMapping,
    agent: &Agent,
    script: &str,
    log: &mut dyn FnMut(&str),
) -> Result<()> {
    let pane = &m.pane_id;
    log(&format!(
        "Running the {} setup script inside {}...",
        agent.title, m.sandbox_name
    ));
    let request = ExecRequest {
        name: m.sandbox_name.clone(),
        workdir: exec_workdir(m),
        env: Vec::new(),
        argv: vec![config.shell.clone(), "-lc".to_owned(), script.to_owned()],
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
            agent.title,
            m.sandbox_name,
            out.code.unwrap_or(-1)
        ))
        .with_output(out.output());
        return Err(fail(store, pane, e, Some(LifecycleState::Failed)));
    }
    store.modify(pane, |m| {
        m.setup_script_ran_at = Some(proc::now_iso());
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
#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::sbx::create_args;
    use crate::lifecycle::exec_workdir;

    #[test]
    fn every_create_key_reaches_the_sbx_argv() {
        let config = crate::config::parse(
            r#"{"template":"img:1","kits":["k1","k2"],"kitArgs":["a=b"],"env":["CI=1","TERM"],"envFiles":["/e"],
                "publish":["8080:3000"],"cpus":2,"memory":"8g","denyNetwork":["evil.example"],
                "extraWorkspaces":["/data:ro"],"workspaceMode":"clone"}"#,
        )
        .expect("valid");
        let m = PaneMapping {
            workspace_id: None,
            workdir: "/repo/sub".into(),
            workspace_mode: WorkspaceMode::Clone,
            ..crate::mapping::sample("w1:p2")
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
