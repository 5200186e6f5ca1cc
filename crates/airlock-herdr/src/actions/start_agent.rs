//! start-agent: a sandbox for the current worktree, a pane next to the focused one, the agent in it.

use crate::agents::Agent;
use crate::app::{App, Outcome};
use crate::backend::airlock::refuse_sbx_only;
use crate::backend::choose::choose;
use crate::config::{OpenIn, PaneDirection, PluginConfig};
use crate::context::{MountRoot, mount_root};
use crate::error::{PluginError, Result};
use crate::herdr::HerdrCli;
use crate::launch::bridge_command;
use crate::naming::{pane_command, pane_label, sandbox_name, shell_quote};
use crate::prepare::create_request;
use crate::proc;
use crate::store::{BackendKind, LifecycleState, MAPPING_VERSION, PaneMapping};

pub fn run(app: &App) -> Result<Outcome> {
    let config = app.config()?;
    let ctx = app.context()?;
    let root = mount_root(&ctx, &app.home)?;
    let agent = config.agent(&config.agent_kind)?;
    let kind = choose(&config).kind;
    if kind == BackendKind::Airlock {
        // Keys only sbx understands would silently not apply: refused before a pane opens.
        let probe = PaneMapping {
            local_path: root.local_path.clone(),
            ..new_mapping("", "probe-name", None, &agent, &root, &config, None)
        };
        refuse_sbx_only(&create_request(&config, &probe, &agent))?;
    }
    // Refuse a path the pane shell cannot quote before anything is created.
    let sbx_bin = match kind {
        BackendKind::Sbx => app.sbx(&config).ok().map(|s| s.bin),
        BackendKind::Airlock => None,
    };
    pane_command(
        &[],
        &app.bridge_argv("start", "probe", Some("0"), sbx_bin.as_deref()),
    )?;
    shell_quote(&root.local_path)?;
    // sbx must answer (daemon up, signed in) before a pane opens: otherwise the pane would only
    // show the failure, and the mapping would stay provisional.
    app.backend_kind(&config, kind)?.check()?;
    let herdr = app.herdr()?;
    let source = app.focused_pane()?;
    let workspace = app.workspace()?;
    let name = sandbox_name(
        &config.sandbox_name_prefix,
        &agent.kind,
        &root.local_path,
        source.as_deref().unwrap_or(""),
    );
    let label = pane_label(&agent.kind, &name);
    let pane = open_agent_pane(
        &herdr,
        &config,
        source.as_deref(),
        workspace.as_deref(),
        &root.workdir,
        &label,
    )?;
    // herdr may hand out a pane id the pane shell cannot take: refuse before any state exists.
    if let Err(e) = pane_command(&[], &app.bridge_argv("start", &pane, Some("0"), None)) {
        let _ = herdr.close_pane(&pane);
        return Err(e);
    }
    let mut fresh = new_mapping(
        &pane,
        &name,
        workspace,
        &agent,
        &root,
        &config,
        source.clone(),
    );
    fresh.backend = (kind == BackendKind::Airlock).then_some(kind);
    let previous = app.store.update(&pane, |slot| {
        let mut m = fresh;
        if let Some(stale) = slot.as_ref() {
            // A mapping still in use (a live bridge, shell or deletion) is never overwritten.
            if stale.bridge_running()
                || stale.deletion_in_progress()
                || !stale.live_shells().is_empty()
            {
                return Err(PluginError::conflict(format!(
                    "herdr handed out pane {pane}, whose mapping to {} is still in use (a bridge, an open-shell session or a deletion runs); nothing was started. Close that pane's session first.",
                    stale.sandbox_name
                )));
            }
            // herdr handed out a pane id that still has a mapping: carry its sandboxes and their
            // deletion history over, so a later forget-mapping or replace-sandbox deletes them too.
            m.replaces_sandbox_names = stale.tracked_names();
            m.deleted_sandbox_names = stale.deleted_sandbox_names.clone();
            eprintln!(
                "pane {pane} was previously mapped to {}; it stays deletable through the new mapping",
                stale.sandbox_name
            );
        }
        let previous = m.replaces_sandbox_names.clone();
        *slot = Some(m);
        Ok(previous)
    });
    let previous = match previous {
        Ok(p) => p,
        Err(e) => {
            let _ = herdr.close_pane(&pane);
            return Err(e);
        }
    };
    let _ = herdr.rename_pane(&pane, &label);
    let m = app.store.require(&pane)?;
    herdr.run_in_pane(
        &pane,
        &bridge_command(app, &config, &m, "start", &pane, &proc::random_hex(8))?,
    )?;
    herdr.notify(
        &format!("{} in a sandbox", agent.title),
        &format!("{name} for {}", root.local_path),
    );
    let open_in = match config.open_in {
        OpenIn::Split if source.is_some() => "split",
        _ => "tab",
    };
    Ok(Outcome::default()
        .field("paneId", pane.clone())
        .field("sourcePaneId", source)
        .field("sandboxName", name.clone())
        .field("agentKind", agent.kind.clone())
        .field("localPath", root.local_path.clone())
        .field("workdir", root.workdir.clone())
        .field("workspaceMode", config.workspace_mode.as_str())
        .field("openIn", open_in)
        .field("backend", kind.as_str())
        .field("previousSandboxNames", previous)
        .line(format!(
            "Starting {} in pane {pane}: sandbox {name} for {}.",
            agent.title, root.local_path
        )))
}

/// A split next to the focused pane (`paneDirection`, `paneRatio`), or a tab: for `openIn: tab`,
/// and when the context names no pane to split.
fn open_agent_pane(
    herdr: &HerdrCli,
    config: &PluginConfig,
    source: Option<&str>,
    workspace: Option<&str>,
    cwd: &str,
    label: &str,
) -> Result<String> {
    match (config.open_in, source) {
        (OpenIn::Split, Some(source)) => {
            let direction = match config.pane_direction {
                PaneDirection::Right => "right",
                PaneDirection::Down => "down",
            };
            herdr.split_pane(source, direction, config.pane_ratio, Some(cwd), true)
        }
        _ => herdr.create_tab(workspace, Some(cwd), Some(label)),
    }
}

fn new_mapping(
    pane: &str,
    name: &str,
    workspace: Option<String>,
    agent: &Agent,
    root: &MountRoot,
    config: &PluginConfig,
    source: Option<String>,
) -> PaneMapping {
    PaneMapping {
        version: MAPPING_VERSION,
        pane_id: pane.to_owned(),
        sandbox_name: name.to_owned(),
        workspace_id: workspace,
        agent_kind: agent.kind.clone(),
        sbx_agent: agent.sbx_agent.clone(),
        local_path: root.local_path.clone(),
        workdir: root.workdir.clone(),
        workspace_mode: config.workspace_mode,
        lifecycle_state: LifecycleState::Provisional,
        created_at: None,
        updated_at: String::new(),
        revision: String::new(),
        source_pane_id: source,
        replaces_sandbox_names: Vec::new(),
        deleted_sandbox_names: Vec::new(),
        last_error: None,
        setup_script_ran_at: None,
        last_connected_at: None,
        adopted_from: None,
        bridge: None,
        shells: Vec::new(),
        deletion: None,
        backend: None,
    }
}
