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
    sbx_bin: Option<&Path>,
) -> i32 {
    let mut log = |line: &str| println!("{line}");
    let paths = Paths {
        state_dir,
        config_dir,
        sbx_bin,
    };
    match run_inner(mode, pane, &paths, launch_id, &mut log) {
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

/// Where the bridge's state, config and sbx are (from its command line).
struct Paths<'a> {
    state_dir: &'a Path,
    config_dir: &'a Path,
    /// The sbx the typing action resolved; wins over config and environment.
    sbx_bin: Option<&'a Path>,
}

fn run_inner(
    mode: BridgeMode,
    pane: &str,
    paths: &Paths,
    launch_id: Option<&str>,
    log: &mut dyn FnMut(&str),
) -> Result<i32> {
    let app = App::from_env(Some(paths.state_dir), Some(paths.config_dir))?;
    let store = &app.store;
    let setup = (|| {
        let mut config = app.config()?;
        if let Some(bin) = paths.sbx_bin {
            config.sbx_bin = Some(bin.display().to_string());
        }
        let backend = match store.load(pane)? {
            Some(m) => app.backend_of(&config, &m)?,
            None => app.backend(&config)?,
        };
        Ok((config, backend))
    })();
    let (config, backend) = match setup {
        Ok(v) => v,
        // A bridge that cannot even start says so on the mapping, not only in the pane.
        Err(e) if mode != BridgeMode::Shell => return Err(record_startup_failure(store, pane, e)),
        Err(e) => return Err(e),
    };
    let sbx: &dyn SandboxBackend = backend.as_ref();
    let herdr = app.herdr().ok();
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

/// Records `e` as the mapping's last error; a mapping that never got a sandbox becomes `failed`.
fn record_startup_failure(store: &crate::store::Store, pane: &str, e: PluginError) -> PluginError {
    let _ = store.update(pane, |slot| {
        if let Some(m) = slot {
            if m.lifecycle_state == crate::store::LifecycleState::Provisional {
                m.lifecycle_state = crate::store::LifecycleState::Failed;
            }
            m.record_error(&e);
        }
        Ok(())
    });
    e
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
        // The recorded directory may be gone: then the worktree (mount mode); clone mode: sbx's.
        workdir: lifecycle::exec_workdir(&m).map(|w| {
            if Path::new(&w).is_dir() {
                w
            } else {
                m.local_path.clone()
            }
        }),
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
