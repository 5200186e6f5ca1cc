//! Powerlevel10k: the theme and `~/.p10k.zsh` read-only, gitstatus's download cache persistent,
//! and a `airlock` prompt segment added from the zsh init.

use airlock_sandbox::ToolMountMode;

use super::{Xdg, home, xdg};
use crate::host::HostView;
use crate::tool::{Category, MountDecl, Shell, Tool};

pub(crate) struct Powerlevel10k;

impl Tool for Powerlevel10k {
    fn name(&self) -> &'static str {
        "powerlevel10k"
    }
    fn description(&self) -> &'static str {
        "Powerlevel10k zsh theme"
    }
    fn mounts(&self, host: &HostView) -> Vec<MountDecl> {
        vec![
            home(host, ".p10k.zsh", Category::Config).fixed(ToolMountMode::Readonly),
            home(host, "powerlevel10k", Category::Data).fixed(ToolMountMode::Readonly),
            xdg(host, Xdg::Cache, "gitstatus", Category::Cache),
        ]
    }
    fn shell_init(&self, shell: Shell) -> Option<&'static str> {
        (shell == Shell::Zsh).then_some(
            "function prompt_airlock() { [[ -n $AIRLOCK ]] && p10k segment -f red -t '[sandbox]' }; \
             typeset -ga POWERLEVEL9K_LEFT_PROMPT_ELEMENTS=(airlock \"${POWERLEVEL9K_LEFT_PROMPT_ELEMENTS[@]}\")",
        )
    }
}
