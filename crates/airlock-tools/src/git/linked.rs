//! Where a project's repository lives: its own `.git` directory, or the git dir its `.git` file
//! names: the main repository's for a linked worktree (`git worktree add`), the superproject's
//! `.git/modules/<name>` for a submodule.
//!
//! A `.git` file is project content, and the project may come from anyone: taken at its word,
//! `gitdir: /home/you/other-project/.git` would have airlock mount another repository into the
//! sandbox. So a link is only believed when the git dir it names points back, in a file git keeps
//! there and the project cannot write: `<repo>/.git/worktrees/<name>/gitdir` holds the path of a
//! worktree's `.git` file, and a submodule's git dir has `core.worktree` naming its checkout.

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
    /// `<project>/.git` is a file naming a submodule's git dir whose `core.worktree` is this
    /// project, verified.
    Submodule(PathBuf),
    /// `<project>/.git` is a file that is not a verified worktree link (a submodule, a separate
    /// git dir, or a pointer that does not point back); the reason, for a warning.
    Unlinked(String),
}

impl Repository {
    /// Whether `<project>/.git` is a file (followed or not).
    pub fn is_git_file(&self) -> bool {
        !matches!(self, Repository::None | Repository::Dir(_))
    }

    /// The git dir holding the config, hooks, objects and refs, if one is mounted.
    pub fn common_dir(&self) -> Option<&Path> {
        match self {
            Repository::Dir(dir) => Some(dir),
            Repository::Worktree { common, .. } => Some(common),
            Repository::Submodule(dir) => Some(dir),
            Repository::None | Repository::Unlinked(_) => None,
        }
    }
}

/// Reads `<project>/.git` and, for a file, follows and verifies the link.
pub fn repository(project: &Path) -> Repository {
    let dot_git = project.join(".git");
    let Ok(meta) = std::fs::symlink_metadata(&dot_git) else {
        return Repository::None;
    };
    // A symlinked `.git` is not followed: it could name any directory of the user's, and airlock
    // would mount it (and, before, create `hooks/` in it).
    if meta.file_type().is_symlink() {
        return Repository::Unlinked(format!(
            "{} is a symlink; airlock does not follow it (replace it with the directory or a \
             `gitdir:` file)",
            dot_git.display()
        ));
    }
    if meta.is_dir() {
        return Repository::Dir(dot_git);
    }
    if !meta.is_file() {
        return Repository::Unlinked(format!(
            "{} is neither a directory nor a file; remove it",
            dot_git.display()
        ));
    }
    match follow(project, &dot_git) {
        Ok(repository) => repository,
        Err(reason) => Repository::Unlinked(reason),
    }
}

/// The verified repository a `.git` file names.
fn follow(project: &Path, dot_git: &Path) -> Result<Repository, String> {
    let base = dot_git.parent().unwrap_or(Path::new("/"));
    let text = read_small(dot_git, LINK_BYTES)?;
    let named = text
        .strip_prefix("gitdir:")
        .map(str::trim)
        .filter(|p| !p.is_empty() && !p.contains('\n'))
        .ok_or_else(|| format!("{} does not start with `gitdir: <path>`", dot_git.display()))?;
    let own = canonical(&base.join(named))?;
    if own.join("commondir").is_file() {
        worktree_link(dot_git, own)
    } else {
        submodule_link(project, own)
    }
}

/// A submodule's git dir, when its `core.worktree` is `project`.
fn submodule_link(project: &Path, dir: PathBuf) -> Result<Repository, String> {
    has_repository_layout(&dir)?;
    let config = read_small(&dir.join("config"), 64 * 1024)?;
    let worktree = core_worktree(&config).ok_or_else(|| {
        format!(
            "{} is neither a worktree's nor a submodule's git dir (no commondir, no core.worktree)",
            dir.display()
        )
    })?;
    if canonical(&dir.join(worktree))? != canonical(project)? {
        return Err(format!(
            "the core.worktree of {} does not point back to {}",
            dir.display(),
            project.display()
        ));
    }
    Ok(Repository::Submodule(dir))
}

/// `core.worktree` from a git config file's text; `None` when absent or not plainly written.
/// Read by hand rather than with git: a launch does not run git for this, and anything this
/// simple reader cannot follow (quotes, escapes, includes) means the link is not followed.
fn core_worktree(config: &str) -> Option<&str> {
    let mut in_core = false;
    let mut found = None;
    for line in config.lines().map(str::trim) {
        if line.starts_with('[') {
            in_core = line.eq_ignore_ascii_case("[core]");
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if in_core && key.trim().eq_ignore_ascii_case("worktree") {
            let value = value.trim();
            if value.is_empty() || value.contains(['"', '\\', ';', '#']) {
                return None;
            }
            found = Some(value);
        }
    }
    found
}

/// A git dir has `HEAD`, `objects` and `refs`.
fn has_repository_layout(dir: &Path) -> Result<(), String> {
    for needed in ["HEAD", "objects", "refs"] {
        if !dir.join(needed).exists() {
            return Err(format!("{} has no {needed}", dir.display()));
        }
    }
    Ok(())
}

/// The repository of a linked worktree's `.git` file, which names `own`.
fn worktree_link(dot_git: &Path, own: PathBuf) -> Result<Repository, String> {
    let commondir = own.join("commondir");
    let common = canonical(&own.join(read_small(&commondir, LINK_BYTES)?.trim()))?;
    if own.parent() != Some(common.join("worktrees").as_path()) {
        return Err(format!(
            "{} is not under {}/worktrees",
            own.display(),
            common.display()
        ));
    }
    has_repository_layout(&common)?;
    let back = read_small(&own.join("gitdir"), LINK_BYTES)?;
    let back = canonical(&own.join(back.trim()));
    if back.as_deref().ok() != Some(canonical(dot_git)?.as_path()) {
        return Err(format!(
            "{}/gitdir does not point back to {}",
            own.display(),
            dot_git.display()
        ));
    }
    Ok(Repository::Worktree { common, own })
}

/// A git link (a `.git` file, `commondir`, `gitdir`) is one short line.
const LINK_BYTES: usize = 4096;

/// A text file of at most `limit` bytes.
fn read_small(path: &Path, limit: usize) -> Result<String, String> {
    let bytes = airlock_config::hostfs::read_regular_following(path, limit as u64)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    String::from_utf8(bytes).map_err(|_| format!("{} is not UTF-8", path.display()))
}

fn canonical(path: &Path) -> Result<PathBuf, String> {
    airlock_config::canonicalize(path)
        .map_err(|e| format!("cannot resolve {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::core_worktree;

    #[test]
    fn core_worktree_is_read_only_when_plainly_written() {
        assert_eq!(
            core_worktree("[core]\n\trepositoryformatversion = 0\n\tworktree = ../../../sub\n"),
            Some("../../../sub")
        );
        assert_eq!(core_worktree("[Core]\nWorkTree = /a/b\n"), Some("/a/b"));
        assert_eq!(core_worktree("[remote \"o\"]\n\tworktree = /x\n"), None);
        assert_eq!(core_worktree("[core]\n\tworktree = \"/a b\"\n"), None);
        assert_eq!(core_worktree("[core]\n\tbare = false\n"), None);
    }
}
