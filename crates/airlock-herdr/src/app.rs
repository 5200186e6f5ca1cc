//! What every action, the bridge and the hooks share: directories, config, the CLIs, the context.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::backend::SandboxBackend;
use crate::backend::airlock::AirlockCli;
use crate::backend::choose::choose;
use crate::backend::sbx::SbxCli;
use crate::config::{self, PluginConfig};
use crate::context::{self, InvocationContext, PLUGIN_ID};
use crate::error::{PluginError, Result};
use crate::herdr::HerdrCli;
use crate::store::{BackendKind, PaneMapping, Store};

/// Where the plugin's files are, plus the process environment herdr gave it.
#[derive(Debug, Clone)]
pub struct App {
    pub plugin_id: String,
    pub store: Store,
    pub config_dir: PathBuf,
    pub home: PathBuf,
    /// This airlock executable: what the pane command and popups run.
    pub self_exe: PathBuf,
    /// `HERDR_PANE_ID` of the invoking process.
    pub pane_env: Option<String>,
    pub workspace_env: Option<String>,
    context_raw: Option<String>,
}

/// An action's answer: result-line fields, then human lines printed after the result line.
#[derive(Debug, Default)]
pub struct Outcome {
    pub fields: Map<String, Value>,
    pub text: Vec<String>,
}

impl Outcome {
    pub fn field(mut self, key: &str, value: impl Into<Value>) -> Outcome {
        self.fields.insert(key.to_owned(), value.into());
        self
    }

    pub fn line(mut self, line: impl Into<String>) -> Outcome {
        self.text.push(line.into());
        self
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl App {
    /// Reads the environment. The state directory is airlock's host-trusted state
    /// (`$XDG_STATE_HOME/airlock/herdr`), never a directory a sandbox can write.
    pub fn from_env(state_dir: Option<&Path>, config_dir: Option<&Path>) -> Result<App> {
        let paths = airlock_config::XdgPaths::from_env().map_err(|e| {
            PluginError::startup(format!("{e}. herdr must start airlock with HOME set."))
        })?;
        let state = state_dir.map_or_else(|| paths.state_dir().join("herdr"), Path::to_owned);
        let config_dir = config_dir
            .map(Path::to_owned)
            .or_else(|| env("HERDR_PLUGIN_CONFIG_DIR").map(PathBuf::from))
            .unwrap_or_else(|| paths.config_home.join("airlock").join("herdr"));
        let self_exe = std::env::current_exe().map_err(|e| {
            PluginError::startup(format!("Could not locate the airlock executable: {e}."))
        })?;
        Ok(App {
            plugin_id: env("HERDR_PLUGIN_ID").unwrap_or_else(|| PLUGIN_ID.to_owned()),
            store: Store::new(state),
            config_dir,
            home: paths.home,
            self_exe,
            pane_env: env("HERDR_PANE_ID"),
            workspace_env: env("HERDR_WORKSPACE_ID"),
            context_raw: std::env::var("HERDR_PLUGIN_CONTEXT_JSON").ok(),
        })
    }

    pub fn config(&self) -> Result<PluginConfig> {
        config::load(&self.config_dir)
    }

    /// The sbx CLI itself (doctor reports its path and version).
    pub fn sbx(&self, config: &PluginConfig) -> Result<SbxCli> {
        SbxCli::resolve(config.sbx_bin.as_deref())
    }

    /// The backend new sandboxes get (config.json's `backend`, else the default rule).
    pub fn backend(&self, config: &PluginConfig) -> Result<Box<dyn SandboxBackend>> {
        self.backend_kind(config, choose(config).kind)
    }

    /// The backend that made `m`'s sandbox: the mapping's record wins over the config, so a
    /// config change never points a mapping at another backend's sandbox of the same name.
    pub fn backend_of(
        &self,
        config: &PluginConfig,
        m: &PaneMapping,
    ) -> Result<Box<dyn SandboxBackend>> {
        self.backend_kind(config, m.backend.unwrap_or(BackendKind::Sbx))
    }

    /// The backend for actions over many mappings: the one they (and new sandboxes) share, or both.
    pub fn backend_for_all(
        &self,
        config: &PluginConfig,
        mappings: &[PaneMapping],
    ) -> Result<Box<dyn SandboxBackend>> {
        let airlock = |m: &PaneMapping| m.backend == Some(BackendKind::Airlock);
        if mappings.is_empty() || mappings.iter().all(|m| !airlock(m)) {
            return self.backend(config);
        }
        if mappings.iter().all(airlock) {
            return self.backend_kind(config, BackendKind::Airlock);
        }
        Ok(Box::new(crate::backend::mixed::Mixed {
            sbx: self.backend_kind(config, BackendKind::Sbx)?,
            airlock: AirlockCli::new(&self.self_exe, self.store.root())?,
        }))
    }

    pub fn backend_kind(
        &self,
        config: &PluginConfig,
        kind: BackendKind,
    ) -> Result<Box<dyn SandboxBackend>> {
        Ok(match kind {
            BackendKind::Sbx => Box::new(self.sbx(config)?),
            BackendKind::Airlock => Box::new(AirlockCli::new(&self.self_exe, self.store.root())?),
        })
    }

    pub fn herdr(&self) -> Result<HerdrCli> {
        HerdrCli::resolve()
    }

    pub fn context(&self) -> Result<InvocationContext> {
        context::parse_context(self.context_raw.as_deref())
    }

    /// The pane an action targets: the focused pane of the context, else `HERDR_PANE_ID`.
    pub fn focused_pane(&self) -> Result<Option<String>> {
        Ok(self
            .context()?
            .focused_pane_id
            .or_else(|| self.pane_env.clone()))
    }

    pub fn workspace(&self) -> Result<Option<String>> {
        Ok(self
            .context()?
            .workspace_id
            .or_else(|| self.workspace_env.clone()))
    }

    /// The argv that runs `airlock herdr bridge <mode>` for `pane`. `sbx_bin` is the sbx this
    /// action resolved: a pane shell need not have `HERDR_SBX_BIN` or sbx on its PATH.
    pub fn bridge_argv(
        &self,
        mode: &str,
        pane: &str,
        launch_id: Option<&str>,
        sbx_bin: Option<&Path>,
    ) -> Vec<String> {
        let mut argv = vec![
            self.self_exe.display().to_string(),
            "herdr".to_owned(),
            "bridge".to_owned(),
            mode.to_owned(),
            "--pane-id".to_owned(),
            pane.to_owned(),
            "--state-dir".to_owned(),
            self.store.root().display().to_string(),
            "--config-dir".to_owned(),
            self.config_dir.display().to_string(),
        ];
        if let Some(bin) = sbx_bin {
            argv.extend(["--sbx-bin".to_owned(), bin.display().to_string()]);
        }
        if let Some(id) = launch_id {
            argv.extend(["--launch-id".to_owned(), id.to_owned()]);
        }
        argv
    }
}
