//! Codex CLI: `CODEX_HOME` (default `~/.codex`) behind a tmpoverlay, so `auth.json` and
//! `config.toml` cannot be changed from inside, and its `sessions/` as a persistent overlay, so
//! `codex resume <id>` finds sessions of earlier runs of this sandbox. Its `tmp/` (the `arg0`
//! helper dirs codex makes and cleans up at every start) starts empty: the host run's leftovers
//! are not the sandbox's to clean, and an overlay could not rename them.

use airlock_sandbox::ToolMountMode;

use super::{ensure_sessions_dir, env_dir};
use crate::host::HostView;
use crate::tool::{Category, Extras, MountDecl, Tool, ToolContext};

pub(crate) struct Codex;

impl Tool for Codex {
    fn name(&self) -> &'static str {
        "codex"
    }
    fn description(&self) -> &'static str {
        "OpenAI Codex CLI"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["codex"]
    }
    fn mounts(&self, host: &HostView) -> Vec<MountDecl> {
        let (dir, _) = env_dir(host, "CODEX_HOME", host.home_path(".codex"));
        vec![
            MountDecl::same(dir.clone(), Category::Config).fixed(ToolMountMode::Tmpoverlay),
            MountDecl::same(dir.join("sessions"), Category::Data).fixed(ToolMountMode::Overlay),
            MountDecl::same(dir.join("tmp"), Category::Cache).locked(ToolMountMode::Scratch),
        ]
    }
    fn prepare_host(&self, host: &HostView) -> bool {
        let (dir, _) = env_dir(host, "CODEX_HOME", host.home_path(".codex"));
        ensure_sessions_dir(host, &dir)
    }
    fn extras(&self, ctx: &ToolContext) -> Extras {
        let (_, env) = env_dir(ctx.host, "CODEX_HOME", ctx.host.home_path(".codex"));
        Extras {
            env: env.into_iter().collect(),
            ..Extras::default()
        }
    }
}
