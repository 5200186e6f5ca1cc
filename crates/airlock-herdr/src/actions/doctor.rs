//! doctor: which backend runs new sandboxes and why, that backend's version and health (sbx:
//! `sbx version` and `sbx daemon status`), and the plugin's directories. Creates nothing.

use crate::app::{App, Outcome};
use crate::backend::SandboxBackend as _;
use crate::backend::choose::choose;
use crate::error::Result;
use crate::store::BackendKind;

pub fn run(app: &App) -> Result<Outcome> {
    let config = app.config()?;
    let choice = choose(&config);
    let sbx = app.sbx(&config);
    let status = match choice.kind {
        BackendKind::Sbx => sbx.clone()?.status()?,
        BackendKind::Airlock => app.backend_kind(&config, BackendKind::Airlock)?.status()?,
    };
    let sbx_bin = sbx.as_ref().ok().map(|s| s.bin.display().to_string());
    let plugin_root = std::env::var("HERDR_PLUGIN_ROOT").ok();
    let mut out = Outcome::default()
        .field("backend", choice.kind.as_str())
        .field("backendReason", choice.reason.clone())
        .field("sbxBin", sbx_bin.clone())
        .field("airlock", app.self_exe.display().to_string())
        .field("pluginRoot", plugin_root)
        .field("stateDir", app.store.root().display().to_string())
        .field("configDir", app.config_dir.display().to_string())
        .field("version", status.version.clone())
        .field("versionWarning", status.version_warning.clone())
        .field("daemon", status.daemon)
        .field("agentKind", config.agent_kind.clone())
        .field("workspaceMode", config.workspace_mode.as_str())
        .field("template", config.template.clone());
    let version = status
        .client_version
        .as_deref()
        .unwrap_or("(unknown version)");
    out = out
        .line(format!(
            "backend: {} ({})",
            choice.kind.as_str(),
            choice.reason
        ))
        .line(match choice.kind {
            BackendKind::Sbx => format!("sbx {version} at {}", sbx_bin.unwrap_or_default()),
            BackendKind::Airlock => format!("{version} at {}", app.self_exe.display()),
        })
        .line(format!("state:  {}", app.store.root().display()))
        .line(format!(
            "config: {}",
            app.config_dir.join("config.json").display()
        ));
    if let Some(w) = status.version_warning {
        out = out.line(format!("warning: {w}"));
    }
    Ok(out)
}
