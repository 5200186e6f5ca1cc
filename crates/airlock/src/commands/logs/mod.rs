//! `airlock logs network|internal`: a sandbox's logs under `<sandboxes_dir>/<name>/logs/`: the
//! egress proxy's decisions (`network.jsonl`) and the socket filters' and the proxy's own lines
//! (`internal/*.log`).

mod internal;
mod network;

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use airlock_config::XdgPaths;
use anyhow::{Context, bail};

pub use internal::InternalLogArgs;
pub use network::NetworkLogArgs;

#[derive(Debug, clap::Subcommand)]
pub enum LogsCommand {
    /// Show the egress proxy's decisions: one line per request (network = "proxy")
    Network(NetworkLogArgs),
    /// Show the socket filters' decisions and the egress proxy's own diagnostics
    Internal(InternalLogArgs),
}

/// How often `--follow` looks for new lines.
const FOLLOW_INTERVAL: Duration = Duration::from_millis(250);

pub fn run(paths: &XdgPaths, command: &LogsCommand) -> anyhow::Result<i32> {
    match command {
        LogsCommand::Network(args) => network::run(paths, args),
        LogsCommand::Internal(args) => internal::run(paths, args),
    }
}

/// The sandbox's name and state root: `--sandbox NAME`, else the current project's.
pub(crate) fn sandbox_root(
    paths: &XdgPaths,
    name: Option<&str>,
) -> anyhow::Result<(String, PathBuf)> {
    let name = match name {
        Some(name) => {
            let mut parts = Path::new(name).components();
            if !matches!(
                (parts.next(), parts.next()),
                (Some(Component::Normal(_)), None)
            ) {
                bail!(
                    "--sandbox {name:?} is not a sandbox name; use a NAME column value from `airlock sandboxes list`"
                );
            }
            name.to_owned()
        }
        None => {
            let cwd = std::env::current_dir().context("cannot read the current directory")?;
            let cwd = airlock_config::canonicalize(&cwd).unwrap_or(cwd);
            let home =
                airlock_config::canonicalize(&paths.home).unwrap_or_else(|_| paths.home.clone());
            let project = airlock_sandbox::host::project_root(&cwd, &home);
            airlock_sandbox::state::sandbox_name(&project)
        }
    };
    let root = paths.sandboxes_dir().join(&name);
    if !root.is_dir() {
        bail!(
            "there is no sandbox {name:?} (no {}); run `airlock sandboxes list` to see the sandboxes, or pass --sandbox NAME",
            root.display()
        );
    }
    Ok((name, root))
}

/// Says once on stderr how many lines of `log` could not be read, if any.
pub(crate) fn report_unreadable(count: usize, log: &Path) {
    match count {
        0 => {}
        1 => eprintln!("airlock: skipped 1 unreadable line in {}", log.display()),
        n => eprintln!("airlock: skipped {n} unreadable lines in {}", log.display()),
    }
}
