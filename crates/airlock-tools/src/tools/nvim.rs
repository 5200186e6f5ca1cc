//! Neovim: config, plugins and state, read-only.

use airlock_sandbox::ToolMountMode;

use super::{Xdg, xdg};
use crate::host::HostView;
use crate::tool::{Category, MountDecl, Tool};

pub(crate) struct Nvim;

impl Tool for Nvim {
    fn name(&self) -> &'static str {
        "nvim"
    }
    fn description(&self) -> &'static str {
        "Neovim editor configuration"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["nvim"]
    }
    fn mounts(&self, host: &HostView) -> Vec<MountDecl> {
        [
            (Xdg::Config, Category::Config),
            (Xdg::Data, Category::Data),
            (Xdg::State, Category::State),
        ]
        .into_iter()
        .map(|(base, cat)| xdg(host, base, "nvim", cat).fixed(ToolMountMode::Readonly))
        .collect()
    }
}
