//! Where a project's repository lives: its own `.git` directory, or, for a linked worktree
//! (`git worktree add`), the main repository's git dir that its `.git` file names.
//!
//! A `.git` file is project content, and the project may come from anyone: taken at its word,
//! `gitdir: /home/you/other-project/.git` would have airlock mount another repository into the
//! sandbox. So a linked worktree is only believed when the git dir it names points back: git keeps
//! `<git dir>/worktrees/<name>/gitdir` holding the path of the worktree's `.git` file, and that
//! file lives in the main repository, which the project cannot write.

use std::path::{Path, PathBuf};

/// The repository of a project, as the git tool mounts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repository {
    /// No `.git` at all.
    None,
    /// `<project>/.git` is a directory.
    Dir(PathBuf),
    /// `<project>/.git` is a file naming `own` (`<common>/worktrees/<name>`), verified.
    Worktree { common: PathBuf, own: PathBuf },
    /// `<project>/.git` is a file that is not a verified worktree link (a submodule, a separate
    /// git dir, or a pointer that does not point back); the reason, for a warning.
    Unlinked(String),
}

impl Repository {
    /// The git dir holding the config, hooks, objects and refs, if one is mounted.
    pub fn common_dir(&self) -> Option<&Path> {
        match self {
            Repository::Dir(dir) => Some(dir),
            Repository::Worktree { common, .. } => Some(common),
            Repository::None | Repository::Unlinked(_) => None,
        }
    }
}

/// Reads `<project>/.git` and, for a file, follows and verifies the link.
pub fn repository(project: &Path) -> Repository {
    let dot_git = project.join(".git");
    if std::fs::metadata(&dot_git).is_ok_and(|m| m.is_dir()) {
        return Repository::Dir(dot_git);
    }
    // A symlinked `.git` file is left alone: a mount onto a symlink is refused.
    if !std::fs::symlink_metadata(&dot_git).is_ok_and(|m| m.is_file()) {
        return Repository::None;
    }
    match worktree_link(&dot_git) {
        Ok((common, own)) => Repository::Worktree { common, own },
        Err(reason) => Repository::Unlinked(reason),
    }
}

/// `(common git dir, the worktree's own git dir)` for a `.git` file of a linked worktree.
fn worktree_link(dot_git: &Path) -> Result<(PathBuf, PathBuf), String> {
    let base = dot_git.parent().unwrap_or(Path::new("/"));
    let text = read_small(dot_git)?;
    let named = text
        .strip_prefix("gitdir:")
        .map(str::trim)
        .filter(|p| !p.is_empty() && !p.contains('\n'))
        .ok_or_else(|| format!("{} does not start with `gitdir: <path>`", dot_git.display()))?;
    let own = canonical(&base.join(named))?;
    let commondir = own.join("commondir");
    if !commondir.is_file() {
        return Err(format!(
            "{} is not a worktree's git dir (no commondir file; a submodule or a separate git dir)",
            own.display()
        ));
    }
    let common = canonical(&own.join(read_small(&commondir)?.trim()))?;
    if own.parent() != Some(common.join("worktrees").as_path()) {
        return Err(format!(
            "{} is not under {}/worktrees",
            own.display(),
            common.display()
        ));
    }
    for needed in ["HEAD", "objects", "refs"] {
        if !common.join(needed).exists() {
            return Err(format!("{} has no {needed}", common.display()));
        }
    }
    let back = read_small(&own.join("gitdir"))?;
    let back = canonical(&own.join(back.trim()));
    if back.as_deref().ok() != Some(canonical(dot_git)?.as_path()) {
        return Err(format!(
            "{}/gitdir does not point back to {}",
            own.display(),
            dot_git.display()
        ));
    }
    Ok((common, own))
}

/// A small text file (a `.git` file, `commondir`, `gitdir`): at most 4 KiB.
fn read_small(path: &Path) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if bytes.len() > 4096 {
        return Err(format!("{} is too large to be a git link", path.display()));
    }
    String::from_utf8(bytes).map_err(|_| format!("{} is not UTF-8", path.display()))
}

fn canonical(path: &Path) -> Result<PathBuf, String> {
    std::fs::canonicalize(path).map_err(|e| format!("cannot resolve {}: {e}", path.display()))
}
