//! reconnect: the mapped agent again in its sandbox (creating it first if it was never prepared);
//! a mapping whose pane is gone is adopted by a new pane next to the invoking one.

use crate::app::{App, Outcome};
use crate::error::Result;
use crate::launch::{adopt_into_new_pane, launch_with_fallback};
use crate::lifecycle;

pub fn run(app: &App) -> Result<Outcome> {
    let config = app.config()?;
    let m = super::target_mapping(app)?;
    let herdr = app.herdr()?;
    let pane = herdr.get_pane(&m.pane_id)?;
    lifecycle::guard_idle(&m, pane.as_ref(), false)?;
    config.agent(&m.agent_kind)?;
    let mut adopted_from = None;
    let mut target = m.pane_id.clone();
    if pane.is_none() {
        let fresh = adopt_into_new_pane(app, &herdr, &m)?;
        adopted_from = Some(m.pane_id.clone());
        target = fresh;
    }
    let mode = if m.lifecycle_state.connectable() && adopted_from.is_none() {
        "connect"
    } else {
        "start"
    };
    let launched = launch_with_fallback(app, &config, &herdr, &target, mode)?;
    let mode = if launched.moved_to.is_some() || adopted_from.is_some() || mode == "start" {
        "start"
    } else {
        "connect"
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
