//! The command line: every subcommand, flag and its help text.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::commands::{doctor::DoctorArgs, sandboxes::ListArgs, sandboxes::PruneArgs};

/// `airlock --version`: `0.1.0 (abc123def456 2026-12-01)`, the commit and build date from build.rs.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("AIRLOCK_GIT_COMMIT"),
    " ",
    env!("AIRLOCK_BUILD_DATE"),
    ")"
);

/// Run AI coding agents and dev tools with full autonomy in a sandbox that keeps your secrets and
/// your machine out of reach. `airlock [RUN OPTIONS] CMD...` is short for `airlock run [RUN OPTIONS]
/// -- CMD...`.
#[derive(Debug, Parser)]
#[command(name = "airlock", version = VERSION, allow_external_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command (default: your $SHELL) in this project's sandbox
    Run(RunArgs),
    /// List or prune per-project sandboxes
    #[command(subcommand)]
    Sandboxes(SandboxesCommand),
    /// Trust a project's .airlock.toml so that it is loaded
    #[command(subcommand)]
    Trust(TrustCommand),
    /// Show, locate or create the configuration
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Check what this machine supports
    Doctor(DoctorArgs),
    /// The host bridge: browser, editor, git credentials and sounds for sandboxes
    #[command(subcommand)]
    Bridge(crate::commands::bridge::BridgeCommand),
    /// The herdr plugin's entry points (run by herdr-plugin.toml; see docs/herdr-plugin.md)
    #[command(subcommand)]
    Herdr(crate::commands::herdr::HerdrCommand),
    /// Forward a host port into a running session: the host's 127.0.0.1:HOST reaches
    /// 127.0.0.1:SANDBOX inside until that session ends (--remove HOST closes it, --list shows
    /// the session's forwards)
    Forward(crate::commands::forward::ForwardArgs),
    /// List running sessions: sandbox, project, supervisor pid, network mode, forwarded ports
    Sessions(crate::commands::sessions::SessionsArgs),
    /// Show a sandbox's logs: the egress proxy's decisions (`logs network`), the socket filters'
    /// (`logs internal`)
    #[command(subcommand)]
    Logs(crate::commands::logs::LogsCommand),
    /// The tool catalog: which tools this machine has and what they bring into the sandbox
    #[command(subcommand)]
    Tools(crate::commands::tools::ToolsCommand),
    /// The egress policy: which rule allows or denies a host (`network explain HOST`), answers to
    /// ask mode (`network monitor`), the rules a sandbox's log asks for (`network suggest`)
    #[command(subcommand)]
    Network(NetworkCommand),
    /// Shell functions that run your agents in airlock by default (`agent-wrappers activate`)
    #[command(subcommand, after_long_help = crate::commands::agents::wrappers_help())]
    AgentWrappers(crate::commands::agents::AgentWrappersCommand),
    /// Run an agent sandboxed: in this directory's sandbox, or as itself when already inside one
    RunAgent(crate::commands::agents::RunAgentArgs),
    /// Print a shell completion script for airlock (bash, zsh or fish) on stdout
    #[command(after_long_help = crate::commands::completion::INSTALL_HELP)]
    Completion {
        /// The shell the script is for
        #[arg(value_enum)]
        shell: CompletionShell,
    },
    /// An empty managed workspace for throwaway work: `scratchpad [NAME] [-- CMD]`, `list`, `rm`
    /// (no project config is ever loaded there)
    Scratchpad(crate::commands::scratchpad::ScratchpadArgs),
    /// What overlay-mode tool directories kept in this project's sandbox: `diff`, or `apply` it
    /// to your files
    #[command(subcommand)]
    Overlay(crate::commands::overlay_changes::OverlayCommand),
    /// Hand an overlay's output to the shared temp directory (run by airlock's launch scripts)
    #[command(hide = true)]
    OverlayHandoff(crate::commands::overlay::HandoffArgs),
    #[command(external_subcommand)]
    External(Vec<String>),
}

#[derive(Debug, Args, Default)]
pub struct RunArgs {
    /// Network access: proxy (only allowlisted hosts, through airlock's egress proxy), none (loopback
    /// only) or host (the host's network, unfiltered)
    #[arg(long, value_enum, value_name = "MODE")]
    pub network: Option<NetworkArg>,
    /// Also allow HOST through the egress proxy (HOST, *.SUFFIX, optionally :PORT; repeatable)
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_hosts: Vec<String>,
    /// Deny HOST through the egress proxy, whatever else allows it (repeatable)
    #[arg(long = "deny-host", value_name = "HOST")]
    pub deny_hosts: Vec<String>,
    /// Open a sandbox server on the host: the host's 127.0.0.1:HOST reaches 127.0.0.1:SANDBOX
    /// inside (SANDBOX defaults to HOST; repeatable; a host port in use is an error; not with
    /// --network host, where the sandbox's servers are on the host's loopback already)
    #[arg(long = "publish", value_name = "HOST[:SANDBOX]", value_parser = parse_port_mapping)]
    pub publish: Vec<(u16, u16)>,
    /// Remove this project's sandbox state when the command ends (kept if another session uses it)
    #[arg(long)]
    pub rm: bool,
    /// [tools.git] mode for this run, over the config: readonly (.git read-only), readwrite
    /// (commits come back as airlock/<branch>) or disabled (no git config)
    #[arg(long, value_enum, value_name = "MODE")]
    pub git_mode: Option<GitModeArg>,
    /// Show the project's .env, .env.*, .envrc and .airlock.toml for this run (as [sandbox]
    /// hide_env_files = false); [sandbox] hide globs still apply
    #[arg(long)]
    pub no_hide_env: bool,
    /// What launches the sandbox: native (airlock's own namespaces), bwrap (bubblewrap builds
    /// them from the same spec), container (podman or docker, [sandbox.container]) or sbx (a
    /// Docker Sandboxes microVM; see docs/backends.md for what it refuses); over [sandbox]
    /// backend and $AIRLOCK_BACKEND
    #[arg(long, value_enum, value_name = "BACKEND")]
    pub backend: Option<BackendArg>,
    /// Print the sandbox spec as JSON and exit without running anything
    #[arg(long)]
    pub print_spec: bool,
    /// With --print-spec: print the command line the backend runs instead (bwrap's or the
    /// container engine's argv, sbx's create, exec and rm; native runs none)
    #[arg(long, requires = "print_spec")]
    pub render: bool,
    /// Print what the sandbox would be (project, state, network, tools, hidden paths, mounts,
    /// variable names) and exit without running anything
    #[arg(long, conflicts_with = "print_spec")]
    pub explain: bool,
    /// The project directory (default: the git toplevel of the current directory, else the directory)
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Say what airlock does on stderr
    #[arg(short, long)]
    pub verbose: bool,
    /// Run in a git worktree of the project on BRANCH (default airlock/<sandbox name>; a new
    /// branch from HEAD when missing), kept in the sandbox state as worktrees/<BRANCH>
    #[arg(long, value_name = "BRANCH", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub worktree: Option<String>,
    /// With --rm --worktree: remove the worktree even when it has uncommitted changes
    #[arg(long, requires_all = ["rm", "worktree"])]
    pub force: bool,
    /// The command and its arguments (after `--` when the command itself starts with `-`)
    #[arg(trailing_var_arg = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `airlock run ...` parsed with `run`'s arguments alone: clap then builds one command instead of
/// the whole tree (~0.4 ms of a launch here). `None` for any other command line and for anything
/// clap answers with text (`--help`, an error): [`Cli`]'s full parse answers those as always. A
/// test holds the two parses equal on what both accept.
pub fn parse_run(argv: &[std::ffi::OsString]) -> Option<RunArgs> {
    use clap::FromArgMatches;
    if argv.get(1).is_none_or(|a| a != "run") {
        return None;
    }
    let command = RunArgs::augment_args(clap::Command::new("run"));
    let matches = command.try_get_matches_from(&argv[1..]).ok()?;
    RunArgs::from_arg_matches(&matches).ok()
}

/// Whether `arg` is one of the long options `names`, alone or as `--name=value`.
pub fn is_one_of(arg: &std::ffi::OsStr, names: &[&str]) -> bool {
    arg.to_str().is_some_and(|a| {
        let name = a.split_once('=').map_or(a, |(name, _)| name);
        names.contains(&name)
    })
}

/// `airlock [run options] CMD...` is `airlock run [run options] CMD...`: the shorthand takes run's
/// options before the command (`airlock -v --rm --network none claude`).
pub fn shorthand(mut argv: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    const RUN_OPTIONS: &[&str] = &[
        "-v",
        "--verbose",
        "--rm",
        "--print-spec",
        "--render",
        "--backend",
        "--explain",
        "--no-hide-env",
        "--git-mode",
        "--network",
        "--allow-host",
        "--deny-host",
        "--publish",
        "--project",
        "--worktree",
        "--force",
    ];
    let is_run_option = |arg: &std::ffi::OsString| is_one_of(arg, RUN_OPTIONS);
    if argv.get(1).is_some_and(is_run_option) {
        argv.insert(1, "run".into());
    }
    argv
}

/// `HOST[:SANDBOX]` of `--publish` and `airlock forward`.
pub fn parse_port_mapping(text: &str) -> Result<(u16, u16), String> {
    airlock_config::ports::parse_mapping(text)
        .map_err(|e| format!("{e} (the form is HOST[:SANDBOX], e.g. 3000 or 8080:3000)"))
}

impl RunArgs {
    /// `--print-spec` or `--explain`: plan the sandbox, start nothing, touch nothing on the host.
    pub fn plan_only(&self) -> bool {
        self.print_spec || self.explain
    }
}

/// `--backend`: the values of `[sandbox] backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    Native,
    Bwrap,
    Container,
    Sbx,
}

impl BackendArg {
    pub fn kind(self) -> airlock_config::BackendKind {
        match self {
            BackendArg::Native => airlock_config::BackendKind::Native,
            BackendArg::Bwrap => airlock_config::BackendKind::Bwrap,
            BackendArg::Container => airlock_config::BackendKind::Container,
            BackendArg::Sbx => airlock_config::BackendKind::Sbx,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum NetworkArg {
    Proxy,
    None,
    Host,
}

/// `--git-mode`: the values of `[tools.git] mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GitModeArg {
    Readonly,
    Readwrite,
    Disabled,
}

impl GitModeArg {
    /// The spelling `[tools.git] mode` uses.
    pub fn as_str(self) -> &'static str {
        match self {
            GitModeArg::Readonly => "readonly",
            GitModeArg::Readwrite => "readwrite",
            GitModeArg::Disabled => "disabled",
        }
    }
}

/// `airlock completion SHELL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Subcommand)]
pub enum SandboxesCommand {
    /// List sandboxes with their project, status, size, last use and live sessions
    List(ListArgs),
    /// Remove sandboxes that match a filter (never one in use)
    Prune(PruneArgs),
}

#[derive(Debug, Subcommand)]
pub enum TrustCommand {
    /// Trust DIR/.airlock.toml as it is now (default: the current project)
    Add { dir: Option<PathBuf> },
    /// List trusted projects and whether their file changed since
    List {
        #[arg(long)]
        json: bool,
    },
    /// Stop trusting DIR/.airlock.toml (default: the current project)
    Remove { dir: Option<PathBuf> },
}

#[derive(Debug, Subcommand)]
pub enum NetworkCommand {
    /// Say whether this project's egress policy allows HOST[:PORT] (default port 443), and by which rule
    Explain {
        #[arg(value_name = "HOST[:PORT]")]
        host: String,
    },
    /// Answer the questions of sandboxes in ask mode ([network] unmatched = "ask"): allow a host
    /// once, for the session, always (written to the project's config) or deny
    Monitor(crate::commands::monitor::MonitorArgs),
    /// Print allow rules for the hosts a sandbox's network log names, as TOML for [network]
    Suggest(crate::commands::suggest::SuggestArgs),
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the effective configuration for the current project
    Show,
    /// Print where the config files are and whether the project file is trusted
    Path,
    /// Write a commented default config to ~/.config/airlock/config.toml
    Init {
        /// Overwrite an existing file
        #[arg(long)]
        force: bool,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(args: &[&str]) -> Vec<std::ffi::OsString> {
        std::iter::once("airlock")
            .chain(args.iter().copied())
            .map(Into::into)
            .collect()
    }

    /// What the full parse makes of `args` (`airlock run ...`), as text.
    fn full(args: &[&str]) -> Option<String> {
        match Cli::try_parse_from(argv(args)).ok()?.command {
            Some(Command::Run(run)) => Some(format!("{run:?}")),
            _ => None,
        }
    }

    #[test]
    fn run_parsed_alone_is_run_parsed_in_the_tree() {
        let lines: &[&[&str]] = &[
            &["run"],
            &["run", "--", "true"],
            &["run", "true"],
            &["run", "bash", "-c", "echo --rm"],
            &[
                "run",
                "-v",
                "--rm",
                "--network",
                "none",
                "--",
                "claude",
                "--resume",
            ],
            &["run", "--network=host", "ls", "-la"],
            &[
                "run",
                "--allow-host",
                "a.example",
                "--allow-host=*.b.example:8443",
                "x",
            ],
            &[
                "run",
                "--deny-host",
                "c.example",
                "--publish",
                "8080",
                "--publish=3000:80",
            ],
            &[
                "run",
                "--git-mode",
                "readwrite",
                "--no-hide-env",
                "--backend",
                "bwrap",
            ],
            &["run", "--print-spec", "--render", "--backend", "container"],
            &["run", "--explain", "--project", "/tmp/p"],
            &["run", "--worktree", "--rm", "--force", "--", "sh"],
            &["run", "--worktree=feature/x", "--", "sh"],
            &["run", "--", "--not-an-option", "-v"],
        ];
        for args in lines {
            let fast = parse_run(&argv(args)).map(|run| format!("{run:?}"));
            assert!(fast.is_some(), "{args:?}: the run-only parse declined it");
            assert_eq!(fast, full(args), "{args:?}");
        }
    }

    #[test]
    fn what_run_alone_declines_the_tree_answers() {
        let lines: &[&[&str]] = &[
            &["run", "--help"],
            &["run", "-h"],
            &["run", "--version"],
            &["run", "--network", "sideways"],
            &["run", "--render"],
            &["run", "--force", "--", "sh"],
            &["run", "--explain", "--print-spec"],
            &["run", "--publish", "0"],
            &["run", "--bogus"],
        ];
        for args in lines {
            assert!(parse_run(&argv(args)).is_none(), "{args:?}");
            assert!(full(args).is_none(), "{args:?}: the full parse accepted it");
        }
        // Not `run` at all.
        assert!(parse_run(&argv(&["sandboxes", "list"])).is_none());
        assert!(parse_run(&argv(&["claude"])).is_none());
        assert!(parse_run(&argv(&[])).is_none());
    }
}
