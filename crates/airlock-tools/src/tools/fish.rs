//! fish: `~/.config/fish`, read-only, when fish is `$SHELL`.

use airlock_sandbox::ToolMountMode;

use super::{Xdg, xdg};
use crate::host::HostView;
use crate::tool::{Category, MountDecl, Shell, Tool};

pub(crate) struct Fish;

impl Tool for Fish {
    fn name(&self) -> &'static str {
        "fish"
    }
    fn description(&self) -> &'static str {
        "Fish shell configuration (read-only)"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["fish"]
    }
    fn not_used_because(&self, host: &HostView) -> Option<String> {
        Shell::Fish.not_login_shell(host)
    }
    fn mounts(&self, host: &HostView) -> Vec<MountDecl> {
        vec![xdg(host, Xdg::Config, "fish", Category::Config).fixed(ToolMountMode::Readonly)]
    }
}
