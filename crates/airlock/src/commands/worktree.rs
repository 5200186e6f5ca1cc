//! `airlock run --worktree[=BRANCH]`: the run happens in a git worktree of the project kept in the
//! project's sandbox state, and `--rm` removes it again (never with uncommitted changes unless
//! `--force`).

use std::path::Path;

use airlock_config::XdgPaths;
use airlock_sandbox::state;
use airlock_tools::git::worktree::{self, Removal, Worktree};

use crate::cli::RunArgs;

/// A worktree in use, and the session on its project's state that keeps `sandboxes prune` from
/// removing it meanwhile (the project is listed as running while a worktree of it runs).
pub struct Entered {
    pub worktree: Worktree,
    _project_session: Option<state::Session>,
}

/// The worktree `--worktree` names for `project`, created on first use; `None` without the flag.
pub fn enter(paths: &XdgPaths, project: &Path, args: &RunArgs) -> anyhow::Result<Option<Entered>> {
    let Some(flag) = &args.worktree else {
        return Ok(None);
    };
    // The project's own state root holds the worktree: recorded (`sandbox.json`) and held first.
    let project_session = match args.plan_only() {
        true => None,
        false => Some(state::open_session(
            &paths.sandboxes_dir(),
            &paths.locks_dir(),
            project,
        )?),
    };
    let name = state::sandbox_name(project);
    let branch = if flag.is_empty() {
        format!("airlock/{name}")
    } else {
        flag.clone()
    };
    let path = worktree::path_of(&paths.sandboxes_dir().join(&name), &branch);
    let view = airlock_tools::HostView::from_env(&paths.home);
    let git = view.find_host_program("git", project);
    let opened = worktree::open(
        git.as_deref(),
        &view.home,
        project,
        &branch,
        &path,
        !args.plan_only(),
    )?;
    if !opened.path.exists() {
        anyhow::bail!(
            "--worktree={branch}: {} does not exist yet and --print-spec/--explain create nothing; \
             run once without them to create it",
            opened.path.display()
        );
    }
    if args.verbose {
        eprintln!(
            "airlock: worktree {} on branch {branch}",
            opened.path.display()
        );
    }
    Ok(Some(Entered {
        worktree: opened,
        _project_session: project_session,
    }))
}

/// After the run: with `--rm`, removes the worktree unless it has uncommitted changes and
/// `--force` was not given (then says where it is and what to do).
pub fn finish(worktree: &Worktree, args: &RunArgs) {
    if !args.rm {
        return;
    }
    let path = worktree.path.display();
    match worktree.remove(args.force) {
        Ok(Removal::Removed) => {
            if args.verbose {
                eprintln!("airlock: removed the worktree {path}");
            }
        }
        Ok(Removal::KeptDirty(changes)) => eprintln!(
            "airlock: kept the worktree {path}: it has {} uncommitted change(s) (`git -C {path} \
             status`); commit them (`airlock run --worktree={} --git-mode readwrite`), or discard \
             them with --rm --force (or `git -C {} worktree remove --force {path}`)",
            changes.len(),
            worktree.branch,
            worktree.project.display()
        ),
        Err(e) => eprintln!("airlock: warning: the worktree {path} was not removed: {e}"),
    }
}
