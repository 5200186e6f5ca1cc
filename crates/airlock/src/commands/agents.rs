//! `airlock agent-wrappers` and `airlock run-agent`: agents sandboxed by default.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};

use airlock_tools::wrappers::{self, AGENTS, WrapperShell};

use super::run;
use crate::cli::RunArgs;

/// The help after `airlock agent-wrappers --help`: the line to paste, per shell.
pub fn wrappers_help() -> String {
    let mut text = String::from(
        "Add the line for your shell to its startup file (for herdr, the shell it opens panes with):\n",
    );
    for name in WrapperShell::NAMES {
        let shell = WrapperShell::parse(name).expect("a known shell");
        text.push_str(&format!(
            "\n  {} ({}):\n    {}\n",
            shell.name(),
            shell.startup_file(),
            wrappers::activation_line(shell)
        ));
    }
    text.push_str(
        "\nThen `claude` runs `airlock run-agent claude` (sandboxed, in the current directory); \
         `claude-no-airlock` or `command claude` run the real one. bash and zsh read the line in \
         interactive shells only; fish also for `fish -c`. Remove the line to undo.",
    );
    text
}

#[derive(Debug, Subcommand)]
pub enum AgentWrappersCommand {
    /// Print shell functions that run the installed agents through airlock (evaluate them from
    /// your shell's startup file; nothing is written)
    Activate {
        /// bash, zsh or fish (default: the file name of $SHELL)
        #[arg(value_name = "SHELL")]
        shell: Option<String>,
    },
}

#[derive(Debug, Args)]
pub struct RunAgentArgs {
    /// The agent: claude, codex, pi, opencode, copilot, gemini, cursor-agent or aider
    #[arg(value_name = "AGENT")]
    pub agent: String,
    /// Its arguments, passed through untouched
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    pub args: Vec<String>,
}

pub fn agent_wrappers(command: AgentWrappersCommand) -> anyhow::Result<i32> {
    let AgentWrappersCommand::Activate { shell } = command;
    let name = match shell {
        Some(name) => name,
        None => std::env::var("SHELL").context(
            "$SHELL is not set: name the shell (airlock agent-wrappers activate bash|zsh|fish)",
        )?,
    };
    let Some(shell) = WrapperShell::parse(&name) else {
        bail!(
            "no wrappers for the shell {name:?}: name one of {}",
            WrapperShell::NAMES.join(", ")
        );
    };
    let exe = std::env::current_exe().context("cannot find airlock's own path")?;
    let exe = airlock_config::canonicalize(&exe).unwrap_or(exe);
    let view = airlock_tools::HostView::from_env(&home());
    let installed = |agent: &str| view.find_binary(agent).is_some();
    print!("{}", wrappers::activate(shell, &exe, &installed));
    Ok(0)
}

fn home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default()
}

pub fn run_agent(args: RunAgentArgs) -> anyhow::Result<i32> {
    if !AGENTS.contains(&args.agent.as_str()) {
        bail!(
            "unknown agent {:?}: name one of {}",
            args.agent,
            AGENTS.join(", ")
        );
    }
    let inside = std::env::var_os("AIRLOCK").is_some_and(|v| v == "1");
    if !inside && let Ok(pane_id) = std::env::var("HERDR_PANE_ID") {
        // herdr types a resume command into a restored pane: it must reach the sandbox the
        // session lives in.
        let paths = airlock_config::XdgPaths::from_env()?;
        let (project, state_root) = run::project_here(&paths)?;
        let dir = airlock_herdr::restore::records_dir(&paths.state_dir());
        if let airlock_herdr::restore::Guard::Refuse(why) = airlock_herdr::restore::guard(
            &dir,
            &pane_id,
            &args.agent,
            &args.args,
            &project,
            &state_root,
        ) {
            bail!("{why}");
        }
    }
    if !inside {
        let mut command = vec![args.agent];
        command.extend(args.args);
        return run::run(
            RunArgs {
                command,
                ..RunArgs::default()
            },
            None,
        );
    }
    // Inside: the real agent from PATH (never this binary under another name).
    let me = std::env::current_exe()
        .ok()
        .and_then(|p| airlock_config::canonicalize(p).ok());
    let path = std::env::var_os("PATH").unwrap_or_default();
    let real = std::env::split_paths(&path)
        .map(|dir| dir.join(&args.agent))
        .find(|p| p.is_file() && airlock_config::canonicalize(p).ok() != me);
    let Some(real) = real else {
        eprintln!("airlock: {} is not on this sandbox's PATH", args.agent);
        return Ok(127);
    };
    use std::os::unix::process::CommandExt as _;
    let e = std::process::Command::new(&real)
        .arg0(&args.agent)
        .args(&args.args)
        .exec();
    bail!("cannot run {}: {e}", real.display())
}
