//! The pane-side process start-agent types into a pane: `airlock herdr bridge start|connect|shell
//! --pane-id P --state-dir DIR --config-dir DIR [--launch-id ID]`. It creates or reuses the
//! sandbox, then attaches the agent (or a login shell) in the pane's terminal.

use std::path::Path;

use crate::app::App;
use crate::backend::SandboxBackend;
use crate::error::{PluginError, Result};
use crate::lifecycle;
use crate::proc;
use crate::store::ShellOwner;

/// What the bridge does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BridgeMode {
    /// Prepare the sandbox, then attach the agent.
    Start,
    /// Attach the agent again.
    Connect,
    /// Attach a login shell (open-shell).
    Shell,
}

impl BridgeMode {
    pub fn as_str(self) -> &'static str {
        match self {
            BridgeMode::Start => "start",
            BridgeMode::Connect => "connect",
            BridgeMode::Shell => "shell",
        }
    }
}

/// Runs the bridge; returns the exit code for the pane (the agent's own, or 1 on failure).
pub fn run(
    mode: BridgeMode,
    pane: &str,
    state_dir: &Path,
    config_dir: &Path,
    launch_id: Option<&str>,
) -> i32 {
    let mut log = |line: &str| println!("{line}");
    match run_inner(mode, pane, state_dir, config_dir, launch_id, &mut log) {
        Ok(code) => {
            if code != 0 {
                println!("The session ended with exit code {code}.");
            }
            code
        }
        Err(e) => {
            println!("error: {} ({})", e.message, e.kind);
            if let Some(out) = e.output.as_deref().map(str::trim).filter(|o| !o.is_empty()) {
                println!("{out}");
            }
            1
        }
    }
}

fn run_inner(
    mode: BridgeMode,
    pane: &str,
    state_dir: &Path,
    config_dir: &Path,
    launch_id: Option<&str>,
    log: &mut dyn FnMut(&str),
) -> Result<i32> {
    let app = App::from_env(Some(state_dir), Some(config_dir))?;
    let config = app.config()?;
    let backend = app.backend(&config)?;
    let sbx: &dyn SandboxBackend = backend.as_ref();
    let herdr = app.herdr().ok();
    let store = &app.store;
    if mode == BridgeMode::Shell {
        return shell(&app, &config, sbx, pane);
    }
    lifecycle::acknowledge_bridge(store, pane, launch_id)?;
    let result = (|| {
        if mode == BridgeMode::Start {
            lifecycle::prepare(store, &config, sbx, pane, log)?;
        }
        lifecycle::connect(store, &config, sbx, herdr.as_ref(), pane, log)
    })();
    lifecycle::release_bridge(store, pane);
    result
}

fn shell(
    app: &App,
    config: &crate::config::PluginConfig,
    sbx: &dyn crate::backend::SandboxBackend,
    pane: &str,
) -> Result<i32> {
    let store = &app.store;
    let own = std::process::id();
    let m = store.modify(pane, |m| {
        if m.deletion_in_progress() {
            return Err(PluginError::conflict(format!(
                "Another action is deleting the sandboxes of pane {pane} right now."
            )));
        }
        if m.lifecycle_state.without_sandbox() {
            return Err(PluginError::target(format!(
                "Pane {pane}'s sandbox {} does not exist (state {}). Run reconnect first.",
                m.sandbox_name,
                m.lifecycle_state.as_str()
            )));
        }
        m.shells.retain(|s| s.pid != own);
        m.shells.push(ShellOwner {
            pid: own,
            token: proc::own_token(),
            since: proc::now_iso(),
            pane_id: pane.to_owned(),
        });
        Ok(m.clone())
    })?;
    let request = crate::backend::ExecRequest {
        name: m.sandbox_name.clone(),
        workdir: lifecycle::exec_workdir(&m),
        env: Vec::new(),
        argv: vec![config.shell.clone(), "-l".to_owned()],
    };
    let code = sbx.attach(&request, &[]);
    let _ = store.update(pane, |slot| {
        if let Some(m) = slot {
            m.shells.retain(|s| s.pid != own);
        }
        Ok(())
    });
    code
}
