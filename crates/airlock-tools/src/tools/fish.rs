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
    /// A plain `[sandbox]` marker before the prompt. It runs from `conf.d`, before `config.fish`
    /// defines the user's `fish_prompt`, so it goes in `fish_mode_prompt` (printed before it; the
    /// default one, vi mode's indicator, still runs after the marker), which themes that draw their
    /// own (starship) replace.
    fn shell_init(&self, shell: Shell) -> Option<&'static str> {
        (shell == Shell::Fish).then_some(
            "if set -q AIRLOCK; and not functions -q _airlock_mode_prompt; \
             functions -q fish_mode_prompt; and functions -c fish_mode_prompt _airlock_mode_prompt; \
             or function _airlock_mode_prompt; end; \
             function fish_mode_prompt; set_color red; printf '[sandbox] '; set_color normal; \
             _airlock_mode_prompt; end; end",
        )
    }
}
