//! doctor: sbx version and daemon status, and the plugin's directories. Creates nothing.

use crate::app::{App, Outcome};
use crate::backend::SandboxBackend as _;
use crate::error::Result;

pub fn run(app: &App) -> Result<Outcome> {
    let config = app.config()?;
    let sbx = app.sbx(&config)?;
    let status = sbx.status()?;
    let plugin_root = std::env::var("HERDR_PLUGIN_ROOT").ok();
    let mut out = Outcome::default()
        .field("sbxBin", sbx.bin.display().to_string())
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
    out = out
        .line(format!(
            "sbx {} at {}",
            status
                .client_version
                .as_deref()
                .unwrap_or("(unknown version)"),
            sbx.bin.display()
        ))
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
