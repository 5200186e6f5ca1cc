//! zsh: the startup files, read-only, when zsh is `$SHELL`; `$ZDOTDIR` honoured.

use airlock_sandbox::ToolMountMode;

use super::env_dir;
use crate::host::HostView;
use crate::tool::{Category, Extras, MountDecl, Shell, Tool, ToolContext};

pub(crate) struct Zsh;

impl Tool for Zsh {
    fn name(&self) -> &'static str {
        "zsh"
    }
    fn description(&self) -> &'static str {
        "Zsh shell configuration (read-only)"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["zsh"]
    }
    fn not_used_because(&self, host: &HostView) -> Option<String> {
        Shell::Zsh.not_login_shell(host)
    }
    fn mounts(&self, host: &HostView) -> Vec<MountDecl> {
        let (dir, _) = env_dir(host, "ZDOTDIR", host.home.clone());
        [".zshenv", ".zprofile", ".zshrc", ".zlogin"]
            .into_iter()
            .map(|f| MountDecl::same(dir.join(f), Category::Config).fixed(ToolMountMode::Readonly))
            .collect()
    }
    fn extras(&self, ctx: &ToolContext) -> Extras {
        let (_, env) = env_dir(ctx.host, "ZDOTDIR", ctx.host.home.clone());
        Extras {
            env: env.into_iter().collect(),
            ..Extras::default()
        }
    }
    /// A plain `[sandbox]` marker before the prompt, unless a theme's marker (starship, oh-my-posh,
    /// powerlevel10k, oh-my-zsh: their init lines run first) is there.
    fn shell_init(&self, shell: Shell) -> Option<&'static str> {
        (shell == Shell::Zsh).then_some(r#"[[ -n $AIRLOCK && -z $STARSHIP_SHELL$POSH_PID$POWERLEVEL9K_LEFT_PROMPT_ELEMENTS && $PROMPT != *sandbox* ]] && PROMPT="%F{red}[sandbox]%f $PROMPT""#)
    }
}
