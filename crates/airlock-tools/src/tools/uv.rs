//! uv: its data dir (`~/.local/share/uv`: managed Pythons and `uv tool` installs; `$UV_PYTHON_INSTALL_DIR`
//! and `$UV_TOOL_DIR` when set) and its cache (`$UV_CACHE_DIR`, default `~/.cache/uv`) as overlays,
//! so the host's Pythons run, packages it has cached install offline, and what the sandbox adds
//! stays in the sandbox. `uv` itself (usually `~/.local/bin/uv`) is found like any binary in the
//! home. Its config (`~/.config/uv/uv.toml`) is not mounted: an index URL there may carry
//! credentials.

use airlock_sandbox::ToolMountMode;

use super::env_dir;
use crate::host::HostView;
use crate::tool::{Category, Extras, MountDecl, Tool, ToolContext};

pub(crate) struct Uv;

/// One of uv's directories: where it is, the variable to pass in when the host set it, and what
/// it holds.
struct Dir {
    path: std::path::PathBuf,
    env: Option<(String, String)>,
    category: Category,
}

fn dirs(host: &HostView) -> Vec<Dir> {
    let data = host.xdg_data().join("uv");
    let dir = |var: &str, fallback: std::path::PathBuf, category| {
        let (path, env) = env_dir(host, var, fallback);
        Dir {
            path,
            env,
            category,
        }
    };
    vec![
        Dir {
            path: data.clone(),
            env: None,
            category: Category::Data,
        },
        dir("UV_PYTHON_INSTALL_DIR", data.join("python"), Category::Data),
        dir("UV_TOOL_DIR", data.join("tools"), Category::Data),
        dir("UV_CACHE_DIR", host.xdg_cache().join("uv"), Category::Cache),
    ]
}

impl Tool for Uv {
    fn name(&self) -> &'static str {
        "uv"
    }
    fn description(&self) -> &'static str {
        "uv (managed Pythons, tools and its cache as overlays)"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["uv", "uvx"]
    }
    fn mounts(&self, host: &HostView) -> Vec<MountDecl> {
        let data = host.xdg_data().join("uv");
        dirs(host)
            .into_iter()
            .enumerate()
            // The default Python and tool dirs are inside the data dir's own mount.
            .filter(|(i, d)| *i == 0 || !d.path.starts_with(&data))
            .map(|(_, d)| MountDecl::same(d.path, d.category).fixed(ToolMountMode::Overlay))
            .collect()
    }
    fn extras(&self, ctx: &ToolContext) -> Extras {
        Extras {
            env: dirs(ctx.host).into_iter().filter_map(|d| d.env).collect(),
            ..Extras::default()
        }
    }
}
