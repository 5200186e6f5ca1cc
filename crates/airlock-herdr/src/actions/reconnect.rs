//! reconnect: the mapped agent again in its sandbox (creating it first if it was never prepared);
//! a mapping whose pane is gone, in any workspace, is adopted by a new pane next to the invoking one.

use super::target;
use crate::app::{App, Outcome};
use crate::error::Result;
use crate::launch::{launch_with_fallback, rehome};
use crate::lifecycle;

pub fn run(app: &App) -> Result<Outcome> {
    let config = app.config()?;
    let herdr = app.herdr()?;
    let target = target::resolve(app, &herdr)?;
    target::refuse_focused_agent(app, &target, "reconnect")?;
    let m = &target.mapping;
    let pane = if target.orphan {
        None
    } else {
        herdr.get_pane(&m.pane_id)?
    };
    lifecycle::guard_idle(m, pane.as_ref(), false)?;
    config.agent(&m.agent_kind)?;
    let orphan = pane.is_none();
    let target_pane = if orphan {
        rehome(app, &herdr, m)?
    } else {
        m.pane_id.clone()
    };
    let adopted_from = orphan.then(|| m.pane_id.clone());
    // Re-homed or never-prepared mappings go through prepare, so a deleted sandbox is recreated.
    let mode = if m.lifecycle_state.connectable() && !orphan {
        "connect"
    } else {
        "start"
    };
    let launched = launch_with_fallback(app, &config, &herdr, &target_pane, mode)?;
    // A bridge moved to a fresh pane always prepares, whatever was planned.
    let mode = if launched.moved_to.is_some() {
        "start"
    } else {
        mode
    };
    Ok(Outcome::default()
        .field("paneId", launched.pane_id.clone())
        .field("sandboxName", m.sandbox_name.clone())
        .field("agentKind", m.agent_kind.clone())
        .field("mode", mode)
        .field("adoptedFrom", adopted_from)
        .field("movedTo", launched.moved_to)
        .line(format!(
            "Reconnecting {} in pane {}.",
            m.sandbox_name, launched.pane_id
        )))
}
