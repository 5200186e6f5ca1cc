//! Oh My Zsh: `$ZSH` (default `~/.oh-my-zsh`) as a persistent overlay (it writes its cache and
//! update stamps there), and a `[sandbox]` marker prepended to the prompt.

use super::env_dir;
use crate::host::HostView;
use crate::tool::{Category, Extras, MountDecl, Shell, Tool, ToolContext};

pub(crate) struct OhMyZsh;

impl Tool for OhMyZsh {
    fn name(&self) -> &'static str {
        "oh-my-zsh"
    }
    fn description(&self) -> &'static str {
        "Oh My Zsh framework with sandbox indicator"
    }
    fn mounts(&self, host: &HostView) -> Vec<MountDecl> {
        let (dir, _) = env_dir(host, "ZSH", host.home_path(".oh-my-zsh"));
        vec![MountDecl::same(dir, Category::Data)]
    }
    fn extras(&self, ctx: &ToolContext) -> Extras {
        let (_, env) = env_dir(ctx.host, "ZSH", ctx.host.home_path(".oh-my-zsh"));
        Extras {
            env: env.into_iter().collect(),
            ..Extras::default()
        }
    }
    fn shell_init(&self, shell: Shell) -> Option<&'static str> {
        (shell == Shell::Zsh)
            .then_some(r#"[[ -n $AIRLOCK ]] && PROMPT="%F{red}[sandbox]%f $PROMPT""#)
    }
}
