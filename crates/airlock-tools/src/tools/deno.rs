//! Deno: its install dir (`$DENO_INSTALL`, default `~/.deno`: the binary and `deno install -g`
//! scripts) and its module cache (`$DENO_DIR`, default `~/.cache/deno`) as overlays: the host's
//! deno runs, modules it has cached resolve offline, new ones and global installs stay in the
//! sandbox.

use airlock_sandbox::ToolMountMode;

use super::env_dir;
use crate::host::HostView;
use crate::tool::{Category, Extras, MountDecl, Tool, ToolContext};

pub(crate) struct Deno;

fn dirs(host: &HostView) -> [(std::path::PathBuf, Option<(String, String)>); 2] {
    [
        env_dir(host, "DENO_INSTALL", host.home_path(".deno")),
        env_dir(host, "DENO_DIR", host.xdg_cache().join("deno")),
    ]
}

impl Tool for Deno {
    fn name(&self) -> &'static str {
        "deno"
    }
    fn description(&self) -> &'static str {
        "Deno (its install dir and module cache as overlays)"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["deno"]
    }
    fn mounts(&self, host: &HostView) -> Vec<MountDecl> {
        let [(install, _), (cache, _)] = dirs(host);
        vec![
            MountDecl::same(install, Category::Data).fixed(ToolMountMode::Overlay),
            MountDecl::same(cache, Category::Cache).fixed(ToolMountMode::Overlay),
        ]
    }
    fn extras(&self, ctx: &ToolContext) -> Extras {
        Extras {
            env: dirs(ctx.host)
                .into_iter()
                .filter_map(|(_, env)| env)
                .collect(),
            ..Extras::default()
        }
    }
}
