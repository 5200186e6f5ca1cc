//! Typing the bridge command into a pane, and what to do when the pane swallows it or is gone.

use std::time::{Duration, Instant};

use crate::app::App;
use crate::config::PluginConfig;
use crate::error::{PluginError, Result};
use crate::herdr::HerdrCli;
use crate::naming::pane_command;
use crate::proc;
use crate::store::PaneMapping;

/// How long reconnect and replace-sandbox wait for the bridge to acknowledge a launch before
/// moving to a fresh pane (`HERDR_SBX_ACK_TIMEOUT_MS`).
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
    pane_command(&env, &app.bridge_argv(mode, pane, Some(launch_id)))
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
    let deadline = Instant::now() + proc::env_duration("HERDR_SBX_ACK_TIMEOUT_MS", ACK_TIMEOUT);
    while Instant::now() < deadline {
        if acked(app, pane, &launch_id) {
            return Ok(Launched {
                pane_id: pane.to_owned(),
                moved_to: None,
            });
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    let fresh = herdr.split_pane(pane, "right", 0.5, Some(&m.workdir), true)?;
    // The bridge may have started while the split ran: then the fresh pane is not needed.
    let moved = {
        let _lock = app.store.lock(pane)?;
        if acked(app, pane, &launch_id) {
            false
        } else {
            move_mapping(app, pane, &fresh, None)?;
            true
        }
    };
    if !moved {
        let _ = herdr.close_pane(&fresh);
        return Ok(Launched {
            pane_id: pane.to_owned(),
            moved_to: None,
        });
    }
    let _ = herdr.rename_pane(pane, &format!("moved to {fresh}"));
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

/// Moves the mapping of `from` to pane `to`. A mapping `to` still had (herdr reused the id) passes
/// its sandboxes on, so a later deletion removes them too. `adopted` records `adoptedFrom`.
/// After a herdr restart the mapped pane is gone: opens a pane next to the focused one (or a tab
/// in the mapping's workspace), moves the mapping there and returns the new pane id.
pub fn adopt_into_new_pane(app: &App, herdr: &HerdrCli, m: &PaneMapping) -> Result<String> {
    let source = app.focused_pane()?.filter(|p| *p != m.pane_id);
    let workspace = m.workspace_id.clone().or(app.workspace()?);
    let fresh = herdr.open_pane(
        source.as_deref(),
        workspace.as_deref(),
        Some(&m.workdir),
        None,
    )?;
    move_mapping(app, &m.pane_id, &fresh, Some(&m.pane_id))?;
    Ok(fresh)
}

pub fn move_mapping(app: &App, from: &str, to: &str, adopted: Option<&str>) -> Result<PaneMapping> {
    let store = &app.store;
    let _a = store.lock(from)?;
    let _b = store.lock(to)?;
    let mut m = store.require(from)?;
    if let Some(previous) = store.load(to)? {
        for name in previous.deletion_targets() {
            if !m.replaces_sandbox_names.contains(&name) && name != m.sandbox_name {
                m.replaces_sandbox_names.push(name);
            }
        }
    }
    m.pane_id = to.to_owned();
    if let Some(old) = adopted {
        m.adopted_from = Some(old.to_owned());
    }
    m.bridge = None;
    m.shells.clear();
    store.save(&mut m)?;
    let old = store.require(from)?;
    if !store.delete_if_revision(from, &old.revision)? {
        return Err(PluginError::conflict(format!(
            "The mapping of pane {from} changed while it was being moved."
        )));
    }
    Ok(m)
}
