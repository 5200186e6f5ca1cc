//! Typing the bridge command into a pane, and what to do when the pane swallows it or is gone.

use std::time::{Duration, Instant};

use crate::app::App;
use crate::config::PluginConfig;
use crate::error::{PluginError, Result};
use crate::herdr::HerdrCli;
use crate::naming::{pane_command, pane_label};
use crate::proc;
use crate::store::PaneMapping;

/// How long reconnect and replace-sandbox wait for the bridge to acknowledge a launch before
/// moving to a fresh pane (`HERDR_SBX_BRIDGE_START_TIMEOUT_MS`, or `HERDR_SBX_ACK_TIMEOUT_MS`).
pub const ACK_TIMEOUT: Duration = Duration::from_secs(4);

/// The command typed into `pane` for `mode`, with `HERDR_AGENT` on the host-visible process.
pub fn bridge_command(
    app: &App,
    config: &PluginConfig,
    m: &PaneMapping,
    mode: &str,
    pane: &str,
    launch_id: &str,
) -> Result<String> {
    let agent = config.agent(&m.agent_kind)?;
    let label = agent.herdr_detection_kind.clone();
    let env: Vec<(&str, &str)> = label
        .as_deref()
        .map(|l| ("HERDR_AGENT", l))
        .into_iter()
        .collect();
    // The sbx this action resolved, for an sbx mapping; an airlock mapping runs this binary.
    let sbx = match m.backend {
        Some(crate::store::BackendKind::Airlock) => None,
        _ => app.sbx(config).ok().map(|s| s.bin),
    };
    pane_command(
        &env,
        &app.bridge_argv(mode, pane, Some(launch_id), sbx.as_deref()),
    )
}

/// Where a launch ended up.
#[derive(Debug, Clone)]
pub struct Launched {
    pub pane_id: String,
    pub moved_to: Option<String>,
}

fn acked(app: &App, pane: &str, launch_id: &str) -> bool {
    app.store
        .load(pane)
        .ok()
        .flatten()
        .and_then(|m| m.bridge)
        .is_some_and(|b| b.launch_id.as_deref() == Some(launch_id))
}

/// Types the bridge into the mapping's pane and waits for its acknowledgement. A pane that swallows
/// the command (not at a shell prompt) gets a fresh pane next to it; the old one is relabelled.
pub fn launch_with_fallback(
    app: &App,
    config: &PluginConfig,
    herdr: &HerdrCli,
    pane: &str,
    mode: &str,
) -> Result<Launched> {
    let m = app.store.require(pane)?;
    let launch_id = proc::random_hex(8);
    herdr.run_in_pane(
        pane,
        &bridge_command(app, config, &m, mode, pane, &launch_id)?,
    )?;
    let wait = proc::env_duration(
        "HERDR_SBX_BRIDGE_START_TIMEOUT_MS",
        proc::env_duration("HERDR_SBX_ACK_TIMEOUT_MS", ACK_TIMEOUT),
    );
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        if acked(app, pane, &launch_id) {
            return Ok(Launched {
                pane_id: pane.to_owned(),
                moved_to: None,
            });
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    // The fresh pane opens next to the user, who may be working elsewhere.
    let source = app.focused_pane()?.unwrap_or_else(|| pane.to_owned());
    let cwd = entry_cwd(&m);
    let fresh = herdr.split_pane(&source, "right", 0.5, cwd.as_deref(), true)?;
    let adoption = Adoption {
        from: pane.to_owned(),
        workspace: app.workspace()?.or_else(|| m.workspace_id.clone()),
        source: Some(source),
    };
    // The bridge may have started while the split ran: then the fresh pane is not needed.
    let moved = (|| {
        let _lock = app.store.lock(pane)?;
        if acked(app, pane, &launch_id) {
            return Ok(false);
        }
        move_mapping(app, pane, &fresh, Some(&adoption)).map(|_| true)
    })();
    let moved = match moved {
        Ok(moved) => moved,
        Err(e) => {
            let _ = herdr.close_pane(&fresh);
            return Err(e);
        }
    };
    if !moved {
        let _ = herdr.close_pane(&fresh);
        return Ok(Launched {
            pane_id: pane.to_owned(),
            moved_to: None,
        });
    }
    let label = pane_label(&m.agent_kind, &m.sandbox_name);
    if let Err(e) = herdr.rename_pane(pane, &format!("{label} (moved to {fresh})")) {
        eprintln!("could not relabel pane {pane}: {e}");
    }
    let m = app.store.require(&fresh)?;
    let launch_id = proc::random_hex(8);
    herdr.run_in_pane(
        &fresh,
        &bridge_command(app, config, &m, "start", &fresh, &launch_id)?,
    )?;
    Ok(Launched {
        pane_id: fresh.clone(),
        moved_to: Some(fresh),
    })
}

/// The directory a pane for `m` opens in: its recorded working directory, else the mounted path,
/// else none (both are gone, e.g. the worktree was removed).
pub fn entry_cwd(m: &PaneMapping) -> Option<String> {
    [&m.workdir, &m.local_path]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_dir())
        .cloned()
}

/// What a mapping adopted into another pane records about where it came from.
#[derive(Debug, Clone, Default)]
pub struct Adoption {
    /// The pane it lost (`adoptedFrom`).
    pub from: String,
    /// The workspace and pane the adopting action ran in.
    pub workspace: Option<String>,
    pub source: Option<String>,
}

/// Gives an orphaned mapping a new pane next to the focused one (a tab when there is none), in the
/// focused workspace, and moves the mapping there. When the move fails (its lock stays held, it
/// changed meanwhile), the new pane is closed again and the mapping stays where it was.
pub fn rehome(app: &App, herdr: &HerdrCli, m: &PaneMapping) -> Result<String> {
    let source = app.focused_pane()?.filter(|p| *p != m.pane_id);
    let workspace = app.workspace()?.or_else(|| m.workspace_id.clone());
    let label = pane_label(&m.agent_kind, &m.sandbox_name);
    let cwd = entry_cwd(m);
    let fresh = herdr.open_pane(
        source.as_deref(),
        workspace.as_deref(),
        cwd.as_deref(),
        Some(&label),
    )?;
    let adoption = Adoption {
        from: m.pane_id.clone(),
        workspace,
        source,
    };
    if let Err(e) = move_mapping(app, &m.pane_id, &fresh, Some(&adoption)) {
        if fresh != m.pane_id {
            let _ = herdr.close_pane(&fresh);
        }
        return Err(e);
    }
    if let Err(e) = herdr.rename_pane(&fresh, &label) {
        eprintln!("could not relabel pane {fresh}: {e}");
    }
    Ok(fresh)
}

/// Moves the mapping of `from` to pane `to`. A mapping `to` still had (herdr reused the id) passes
/// its sandboxes and deletion history on, so a later deletion removes them too. herdr may also hand
/// out `from` itself again: then the mapping stays, updated in place. Open-shell records travel
/// along: a shell opened under the old pane still protects the sandbox.
pub fn move_mapping(
    app: &App,
    from: &str,
    to: &str,
    adoption: Option<&Adoption>,
) -> Result<PaneMapping> {
    let store = &app.store;
    let _a = store.lock(from)?;
    let _b = store.lock(to)?;
    let mut m = store.require(from)?;
    let before = m.revision.clone();
    if to != from
        && let Some(displaced) = store.load(to)?
    {
        for name in displaced.tracked_names() {
            if !m.replaces_sandbox_names.contains(&name) && name != m.sandbox_name {
                m.replaces_sandbox_names.push(name);
            }
        }
        for name in displaced.deleted_sandbox_names {
            if !m.deleted_sandbox_names.contains(&name) {
                m.deleted_sandbox_names.push(name);
            }
        }
        eprintln!(
            "pane {to} was mapped to {}; it stays deletable through the moved mapping",
            displaced.sandbox_name
        );
    }
    m.pane_id = to.to_owned();
    if let Some(a) = adoption {
        m.adopted_from = Some(a.from.clone());
        m.workspace_id = a.workspace.clone().or(m.workspace_id);
        m.source_pane_id = a.source.clone();
    }
    m.bridge = None;
    store.save(&mut m)?;
    if to != from && !store.delete_if_revision(from, &before)? {
        return Err(PluginError::conflict(format!(
            "The mapping of pane {from} changed while it was being moved."
        )));
    }
    Ok(m)
}
