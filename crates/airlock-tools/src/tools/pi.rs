//! Pi coding agent: `PI_CODING_AGENT_DIR` (default `~/.pi/agent`) behind a tmpoverlay, shielding
//! `settings.json` and `auth.json`; its `sessions/` as a persistent overlay.

use airlock_sandbox::ToolMountMode;

use super::{ensure_sessions_dir, env_dir};
use crate::host::HostView;
use crate::tool::{Category, Extras, MountDecl, Tool, ToolContext};

pub(crate) struct Pi;

impl Tool for Pi {
    fn name(&self) -> &'static str {
        "pi"
    }
    fn description(&self) -> &'static str {
        "Pi coding agent AI assistant"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["pi"]
    }
    fn mounts(&self, host: &HostView) -> Vec<MountDecl> {
        let (dir, _) = env_dir(host, "PI_CODING_AGENT_DIR", host.home_path(".pi/agent"));
        vec![
            MountDecl::same(dir.clone(), Category::Config).fixed(ToolMountMode::Tmpoverlay),
            MountDecl::same(dir.join("sessions"), Category::Data).fixed(ToolMountMode::Overlay),
        ]
    }
    fn prepare_host(&self, host: &HostView) -> bool {
        let (dir, _) = env_dir(host, "PI_CODING_AGENT_DIR", host.home_path(".pi/agent"));
        ensure_sessions_dir(host, &dir)
    }
    fn extras(&self, ctx: &ToolContext) -> Extras {
        let (_, env) = env_dir(
            ctx.host,
            "PI_CODING_AGENT_DIR",
            ctx.host.home_path(".pi/agent"),
        );
        Extras {
            env: env.into_iter().collect(),
            ..Extras::default()
        }
    }
}
