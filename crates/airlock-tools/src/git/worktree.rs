//! `airlock run --worktree`: a linked worktree of the project's repository kept in the sandbox's
//! state (`<state root>/worktrees/<branch>`), made, checked and removed by the host's git.
//!
//! The worktree's files are the sandbox's to write, so before the host's git runs in it (to see
//! whether it is clean), its `.git` file is checked again to be the verified link of this
//! repository ([`super::linked`]); git always runs from `/` with `-C`, as [`super::fetch`] does.

use std::path::{Path, PathBuf};

use super::fetch::host_git;
use super::linked::{self, Repository};

/// Why a worktree could not be made, checked or removed. Each says what to do.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WorktreeError {
    #[error(
        "--worktree: {project} is not a git repository (no .git found); run airlock in a git \
         checkout, pass --project DIR, or `git init` there"
    )]
    NotARepository { project: PathBuf },
    #[error("--worktree: {reason}; --worktree needs the project's own repository")]
    Unlinked { reason: String },
    #[error(
        "--worktree={branch}: not a valid branch name; pick another (e.g. --worktree=airlock/topic)"
    )]
    BadBranch { branch: String },
    #[error(
        "--worktree: {path} exists but is not a worktree of {project}; move it away or remove it"
    )]
    NotOurs { path: PathBuf, project: PathBuf },
    #[error("--worktree: no host git found on PATH (outside the project, temp and state dirs)")]
    NoGit,
    #[error("--worktree: {what} failed: {message}")]
    Git { what: String, message: String },
}

/// A worktree of `project`'s repository at `path`, checked out on `branch`.
#[derive(Debug, Clone)]
pub struct Worktree {
    /// `<state root>/worktrees/<branch>`.
    pub path: PathBuf,
    /// The branch checked out there.
    pub branch: String,
    /// The project whose repository it belongs to.
    pub project: PathBuf,
    common: PathBuf,
    git: PathBuf,
    home: PathBuf,
}

/// What [`Worktree::remove`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removal {
    Removed,
    /// Uncommitted changes (`git status --porcelain` lines) and no `force`: left in place.
    KeptDirty(Vec<String>),
}

/// Where the worktree of `branch` lives: `<state root>/worktrees/<branch>`.
pub fn path_of(state_root: &Path, branch: &str) -> PathBuf {
    state_root.join("worktrees").join(branch)
}

/// Opens the worktree of `branch` at `path`, creating it (`git worktree add`, a new branch from
/// HEAD when `branch` does not exist) unless it exists already or `create` is false.
pub fn open(
    git: Option<&Path>,
    home: &Path,
    project: &Path,
    branch: &str,
    path: &Path,
    create: bool,
) -> Result<Worktree, WorktreeError> {
    let common = match linked::repository(project) {
        Repository::None => {
            return Err(WorktreeError::NotARepository {
                project: project.to_path_buf(),
            });
        }
        Repository::Unlinked(reason) => return Err(WorktreeError::Unlinked { reason }),
        repository => repository
            .common_dir()
            .map(Path::to_path_buf)
            .unwrap_or_default(),
    };
    let git = git.ok_or(WorktreeError::NoGit)?.to_path_buf();
    let worktree = Worktree {
        path: path.to_path_buf(),
        branch: branch.to_owned(),
        project: project.to_path_buf(),
        common,
        git,
        home: home.to_path_buf(),
    };
    worktree.check_branch()?;
    if std::fs::symlink_metadata(path).is_ok() {
        worktree.verify()?;
        return Ok(worktree);
    }
    if create {
        worktree.add()?;
    }
    Ok(worktree)
}

impl Worktree {
    fn git(&self, dir: &Path) -> std::process::Command {
        let mut cmd = host_git(&self.git, &self.home);
        // The tree is the sandbox's writing: no helper program git would start for it.
        cmd.args(["-c", "core.fsmonitor=false", "-C"]).arg(dir);
        cmd
    }

    /// `git check-ref-format --branch`, and no leading `-` (it would read as an option).
    fn check_branch(&self) -> Result<(), WorktreeError> {
        let bad = || WorktreeError::BadBranch {
            branch: self.branch.clone(),
        };
        if self.branch.is_empty() || self.branch.starts_with('-') {
            return Err(bad());
        }
        let mut cmd = self.git(&self.project);
        cmd.args(["check-ref-format", "--branch", &self.branch]);
        run(cmd, "git check-ref-format").map_err(|_| bad())?;
        Ok(())
    }

    /// The worktree's `.git` file is still the verified link into this repository.
    fn verify(&self) -> Result<(), WorktreeError> {
        match linked::repository(&self.path) {
            Repository::Worktree { common, .. } if common == self.common => Ok(()),
            _ => Err(WorktreeError::NotOurs {
                path: self.path.clone(),
                project: self.project.clone(),
            }),
        }
    }

    fn add(&self) -> Result<(), WorktreeError> {
        let exists = {
            let mut cmd = self.git(&self.project);
            cmd.args(["rev-parse", "--verify", "--quiet"])
                .arg(format!("refs/heads/{}", self.branch));
            run(cmd, "git rev-parse").is_ok()
        };
        if let Some(parent) = self.path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| WorktreeError::Git {
                what: format!("creating {}", parent.display()),
                message: e.to_string(),
            })?;
        }
        let mut cmd = self.git(&self.project);
        // The project's hooks are not run for a checkout airlock makes (a hook dir inside the
        // project may be the sandbox's writing).
        cmd.args([
            "-c",
            "core.hooksPath=/dev/null",
            "worktree",
            "add",
            "--quiet",
        ]);
        if exists {
            cmd.arg(&self.path).arg(&self.branch);
        } else {
            cmd.args(["-b", &self.branch]).arg(&self.path).arg("HEAD");
        }
        run(cmd, "git worktree add")?;
        self.verify()
    }

    /// `git status --porcelain` of the worktree: its uncommitted changes, untracked files included.
    pub fn changes(&self) -> Result<Vec<String>, WorktreeError> {
        self.verify()?;
        let mut cmd = self.git(&self.path);
        cmd.args(["status", "--porcelain", "--untracked-files=all"]);
        let out = run(cmd, "git status")?;
        Ok(String::from_utf8_lossy(&out)
            .lines()
            .map(str::to_owned)
            .collect())
    }

    /// `git worktree remove`, unless it has uncommitted changes and `force` is not set.
    pub fn remove(&self, force: bool) -> Result<Removal, WorktreeError> {
        let changes = self.changes()?;
        if !changes.is_empty() && !force {
            return Ok(Removal::KeptDirty(changes));
        }
        let mut cmd = self.git(&self.project);
        cmd.args(["worktree", "remove"]);
        if force {
            cmd.arg("--force");
        }
        cmd.arg(&self.path);
        run(cmd, "git worktree remove")?;
        Ok(Removal::Removed)
    }
}

fn run(mut cmd: std::process::Command, what: &str) -> Result<Vec<u8>, WorktreeError> {
    let out = cmd.output().map_err(|e| WorktreeError::Git {
        what: what.to_owned(),
        message: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(WorktreeError::Git {
            what: what.to_owned(),
            message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(out.stdout)
}
