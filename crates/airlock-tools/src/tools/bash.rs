//! bash: the rc files, read-only (changes made inside do not persist), when bash is `$SHELL`.

use airlock_sandbox::ToolMountMode;

use super::home;
use crate::host::HostView;
use crate::tool::{Category, MountDecl, Shell, Tool};

pub(crate) struct Bash;

impl Tool for Bash {
    fn name(&self) -> &'static str {
        "bash"
    }
    fn description(&self) -> &'static str {
        "Bash shell configuration (read-only)"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["bash"]
    }
    fn not_used_because(&self, host: &HostView) -> Option<String> {
        Shell::Bash.not_login_shell(host)
    }
    fn mounts(&self, host: &HostView) -> Vec<MountDecl> {
        [
            ".bashrc",
            ".bash_profile",
            ".bash_logout",
            ".profile",
            ".inputrc",
        ]
        .into_iter()
        .map(|f| home(host, f, Category::Config).fixed(ToolMountMode::Readonly))
        .collect()
    }
    /// A plain `[sandbox]` marker before the prompt; a prompt theme (starship, oh-my-posh) replaces it.
    fn shell_init(&self, shell: Shell) -> Option<&'static str> {
        (shell == Shell::Bash).then_some(r#"if [ -n "$AIRLOCK" ] && [ -z "$STARSHIP_SHELL$POSH_PID" ] && [[ $PS1 != *sandbox* ]]; then PS1="\[\e[31m\][sandbox]\[\e[0m\] $PS1"; fi"#)
    }
}
