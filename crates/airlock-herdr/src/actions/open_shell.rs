//! open-shell: a pane below the current one with a login shell inside the sandbox.

use crate::app::{App, Outcome};
use crate::error::{PluginError, Result};
use crate::launch::entry_cwd;
use crate::naming::pane_command;

pub fn run(app: &App) -> Result<Outcome> {
    let config = app.config()?;
    let herdr = app.herdr()?;
    let m = super::target::resolve(app, &herdr)?.mapping;
    if m.lifecycle_state.without_sandbox() {
        return Err(PluginError::target(format!(
            "Sandbox {} does not exist yet (state {}). Run reconnect first.",
            m.sandbox_name,
            m.lifecycle_state.as_str()
        )));
    }
    if m.deletion_in_progress() {
        return Err(PluginError::conflict(format!(
            "Another action is deleting {} right now.",
            m.sandbox_name
        )));
    }
    // Below the pane the user is in, wherever the sandbox's pane lives; in a directory that still
    // exists (the recorded one may be gone).
    let source = app.focused_pane()?;
    let cwd = entry_cwd(&m);
    let pane = herdr.split_pane(
        source.as_deref().unwrap_or(&m.pane_id),
        "down",
        0.5,
        cwd.as_deref(),
        true,
    )?;
    let _ = herdr.rename_pane(&pane, &format!("airlock shell {}", &m.sandbox_name));
    let sbx = match m.backend {
        Some(crate::store::BackendKind::Airlock) => None,
        _ => app.sbx(&config).ok().map(|s| s.bin),
    };
    // The shell records the mapping's pane on its command line; it registers itself when it starts.
    herdr.run_in_pane(
        &pane,
        &pane_command(
            &[],
            &app.bridge_argv("shell", &m.pane_id, None, sbx.as_deref()),
        )?,
    )?;
    Ok(Outcome::default()
        .field("paneId", pane.clone())
        .field("mappedPaneId", m.pane_id.clone())
        .field("sandboxName", m.sandbox_name.clone())
        .line(format!(
            "Opening a shell in {} (pane {pane}).",
            m.sandbox_name
        )))
}
