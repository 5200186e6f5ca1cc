//! Claude Code: its home, desktop config and `~/.claude.json`, as persistent overlays: settings
//! and conversations persist per sandbox, never reach the host. `CLAUDE_CONFIG_DIR` honoured.

use airlock_sandbox::ToolMountMode;

use super::{Xdg, env_dir, home, xdg};
use crate::host::HostView;
use crate::tool::{Category, Extras, MountDecl, Tool, ToolContext};

pub(crate) struct Claude;

impl Tool for Claude {
    fn name(&self) -> &'static str {
        "claude"
    }
    fn description(&self) -> &'static str {
        "Claude Code AI assistant"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["claude"]
    }
    fn mounts(&self, host: &HostView) -> Vec<MountDecl> {
        let (dir, _) = env_dir(host, "CLAUDE_CONFIG_DIR", host.home_path(".claude"));
        vec![
            MountDecl::same(dir, Category::Data).fixed(ToolMountMode::Overlay),
            xdg(host, Xdg::Config, "Claude", Category::Config).fixed(ToolMountMode::Overlay),
            home(host, ".claude.json", Category::State).fixed(ToolMountMode::Overlay),
        ]
    }
    fn extras(&self, ctx: &ToolContext) -> Extras {
        let (_, env) = env_dir(ctx.host, "CLAUDE_CONFIG_DIR", ctx.host.home_path(".claude"));
        Extras {
            env: env.into_iter().collect(),
            ..Extras::default()
        }
    }
}
