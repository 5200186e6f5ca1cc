//! `airlock completion bash|zsh|fish`: the shell completion script, generated from the clap
//! definition in `cli.rs` so it always knows every subcommand, flag and value.

use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::{Cli, CompletionShell};

/// Where each shell looks for the script (`airlock completion --help`).
pub const INSTALL_HELP: &str = "\
Install:
  bash:  airlock completion bash > ~/.local/share/bash-completion/completions/airlock
  zsh:   airlock completion zsh > ~/.zfunc/_airlock   (with fpath+=(~/.zfunc) before compinit)
  fish:  airlock completion fish > ~/.config/fish/completions/airlock.fish";

/// The command line as completion offers it: without the hidden subcommands airlock's own
/// scripts call (clap_complete would list them).
fn completed_command() -> clap::Command {
    let full = Cli::command();
    let mut cmd = clap::Command::new("airlock")
        .version(crate::cli::VERSION)
        .allow_external_subcommands(true);
    for sub in full.get_subcommands().filter(|s| !s.is_hide_set()) {
        cmd = cmd.subcommand(sub.clone());
    }
    cmd
}

/// Writes the script for `shell` to stdout.
pub fn run(shell: CompletionShell) -> anyhow::Result<i32> {
    let shell = match shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
    };
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut completed_command(), "airlock", &mut out);
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (`airlock completion bash | head`) is not airlock's failure.
    match stdout.write_all(&out).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::anyhow!("cannot write the completion script: {e}"))
        }
        _ => Ok(0),
    }
}
