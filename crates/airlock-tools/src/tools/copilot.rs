//! GitHub Copilot: the standalone CLI's `~/.copilot` (config, MCP servers, sessions, auth) as a
//! persistent overlay, and the `gh copilot` extension's config and cache dirs.

use airlock_sandbox::ToolMountMode;

use super::{Xdg, home, xdg};
use crate::host::HostView;
use crate::tool::{Category, MountDecl, Tool};

pub(crate) struct Copilot;

impl Tool for Copilot {
    fn name(&self) -> &'static str {
        "copilot"
    }
    fn description(&self) -> &'static str {
        "GitHub Copilot integration"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["copilot"]
    }
    fn mounts(&self, host: &HostView) -> Vec<MountDecl> {
        vec![
            home(host, ".copilot", Category::Data).fixed(ToolMountMode::Overlay),
            xdg(host, Xdg::Config, "github-copilot", Category::Config),
            xdg(host, Xdg::Cache, "github-copilot", Category::Cache),
        ]
    }
}
