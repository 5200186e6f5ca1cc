//! Which backend runs new sandboxes: config.json's `backend`, else sbx when it is installed and
//! answers signed in, else airlock's own sandbox. doctor prints the choice and the reason.

use super::SandboxBackend as _;
use super::sbx::SbxCli;
use crate::config::PluginConfig;
use crate::store::BackendKind;

/// The backend for new sandboxes, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub kind: BackendKind,
    pub reason: String,
}

/// `backend` from config wins; unset, sbx must resolve and pass its check (daemon up, signed in).
pub fn choose(config: &PluginConfig) -> Choice {
    if let Some(kind) = config.backend {
        return Choice {
            kind,
            reason: format!("config.json sets \"backend\": \"{}\"", kind.as_str()),
        };
    }
    let sbx = match SbxCli::resolve(config.sbx_bin.as_deref()) {
        Ok(sbx) => sbx,
        Err(_) => {
            return Choice {
                kind: BackendKind::Airlock,
                reason: "no \"backend\" in config.json and sbx is not installed (not on PATH, no sbxBin or HERDR_SBX_BIN)".to_owned(),
            };
        }
    };
    match sbx.check() {
        Ok(()) => Choice {
            kind: BackendKind::Sbx,
            reason: format!(
                "no \"backend\" in config.json; sbx at {} is installed and signed in",
                sbx.bin.display()
            ),
        },
        Err(e) => Choice {
            kind: BackendKind::Airlock,
            reason: format!(
                "no \"backend\" in config.json; sbx at {} does not answer signed in ({}: {})",
                sbx.bin.display(),
                e.kind,
                e.message
            ),
        },
    }
}
