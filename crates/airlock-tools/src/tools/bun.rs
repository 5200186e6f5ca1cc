//! Bun: its install dir (`$BUN_INSTALL`, default `~/.bun`: the binary, global packages and their
//! links, the package cache) as an overlay, so the host's bun runs and what the sandbox installs
//! globally (`bun add -g`) stays in the sandbox.

use airlock_sandbox::ToolMountMode;

use super::env_dir;
use crate::host::HostView;
use crate::tool::{Category, Extras, MountDecl, Tool, ToolContext};

pub(crate) struct Bun;

fn install_dir(host: &HostView) -> (std::path::PathBuf, Option<(String, String)>) {
    env_dir(host, "BUN_INSTALL", host.home_path(".bun"))
}

impl Tool for Bun {
    fn name(&self) -> &'static str {
        "bun"
    }
    fn description(&self) -> &'static str {
        "Bun (its install dir as an overlay: global installs stay in the sandbox)"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["bun"]
    }
    fn mounts(&self, host: &HostView) -> Vec<MountDecl> {
        let (dir, _) = install_dir(host);
        vec![MountDecl::same(dir, Category::Data).fixed(ToolMountMode::Overlay)]
    }
    fn extras(&self, ctx: &ToolContext) -> Extras {
        Extras {
            env: install_dir(ctx.host).1.into_iter().collect(),
            ..Extras::default()
        }
    }
}
