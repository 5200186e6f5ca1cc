//! Oh My Posh: its config (shielded) and cache (persistent); `$AIRLOCK` is there for a segment.

use super::{Xdg, xdg};
use crate::host::HostView;
use crate::tool::{Category, MountDecl, Shell, Tool};

pub(crate) struct OhMyPosh;

impl Tool for OhMyPosh {
    fn name(&self) -> &'static str {
        "oh-my-posh"
    }
    fn description(&self) -> &'static str {
        "Oh My Posh prompt with sandbox indicator"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["oh-my-posh"]
    }
    fn mounts(&self, host: &HostView) -> Vec<MountDecl> {
        vec![
            xdg(host, Xdg::Config, "oh-my-posh", Category::Config),
            xdg(host, Xdg::Cache, "oh-my-posh", Category::Cache),
        ]
    }
    fn shell_init(&self, shell: Shell) -> Option<&'static str> {
        Some(match shell {
            Shell::Bash => r#"eval "$(oh-my-posh init bash)""#,
            Shell::Zsh => r#"eval "$(oh-my-posh init zsh)""#,
            Shell::Fish => "oh-my-posh init fish | source",
        })
    }
}
