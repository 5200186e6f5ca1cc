//! aider: its config files (shielded) and `~/.aider` (caches, history; persistent).

use super::home;
use crate::host::HostView;
use crate::tool::{Category, MountDecl, Tool};

pub(crate) struct Aider;

impl Tool for Aider {
    fn name(&self) -> &'static str {
        "aider"
    }
    fn description(&self) -> &'static str {
        "aider AI pair programmer"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["aider"]
    }
    fn mounts(&self, host: &HostView) -> Vec<MountDecl> {
        vec![
            home(host, ".aider.conf.yml", Category::Config),
            home(host, ".aider.model.settings.yml", Category::Config),
            home(host, ".aider.model.metadata.json", Category::Config),
            home(host, ".aider", Category::Data),
        ]
    }
}
