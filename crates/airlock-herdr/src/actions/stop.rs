//! stop: `sbx stop`; the filesystem is kept. Refused while an agent is attached (it would be killed).

use crate::app::{App, Outcome};
use crate::backend::SandboxBackend;
use crate::error::{ErrorKind, PluginError, Result};
use crate::lifecycle;
use crate::store::LifecycleState;

pub fn run(app: &App) -> Result<Outcome> {
    let config = app.config()?;
    let herdr = app.herdr()?;
    let target = super::target::resolve(app, &herdr)?;
    super::target::refuse_focused_agent(app, &target, "stop the sandbox")?;
    let m = target.mapping.clone();
    let pane = if target.orphan {
        None
    } else {
        herdr.get_pane(&m.pane_id)?
    };
    lifecycle::guard_idle(&m, pane.as_ref(), true)?;
    let backend = app.backend_of(&config, &m)?;
    let sbx: &dyn SandboxBackend = backend.as_ref();
    match sbx.stop(&m.sandbox_name) {
        Ok(()) => {}
        Err(e) if e.kind == ErrorKind::NotFound => {
            app.store.modify(&m.pane_id, |cur| {
                cur.lifecycle_state = LifecycleState::Missing;
                cur.record_error(&e);
                Ok(())
            })?;
            return Err(e);
        }
        // sbx refuses while a session is attached that the guards could not see.
        Err(e) if e.kind == ErrorKind::Conflict => {
            return Err(PluginError {
                message: format!(
                    "{} Exit the agent and any open-shell pane attached to {} first.",
                    e.message, m.sandbox_name
                ),
                ..e
            });
        }
        Err(e) => return Err(e),
    }
    app.store.modify(&m.pane_id, |cur| {
        cur.lifecycle_state = LifecycleState::Stopped;
        Ok(())
    })?;
    herdr.notify("Docker Sandbox stopped", &m.sandbox_name);
    Ok(Outcome::default()
        .field("paneId", m.pane_id.clone())
        .field("sandboxName", m.sandbox_name.clone())
        .line(format!(
            "Stopped {}. reconnect starts it again.",
            m.sandbox_name
        )))
}
