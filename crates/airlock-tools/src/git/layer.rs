//! The git layer: `.git` as an overlay whose writes stay in the sandbox's state
//! (`layers/git/upper`), in `readwrite` and `disabled` mode.
//!
//! One session at a time owns it, through `layers/git.lock`. The owner starts from a clean upper
//! holding only the sanitised `config`, and when it ends, [`super::fetch`] brings its branches
//! into the host repository and the upper is cleared, so the next session starts from the host
//! repository as it is then. A session that finds the lock taken gets `.git` read-only instead
//! (and says so); a session that died leaves its upper, which the next owner brings back first.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};

use airlock_sandbox::SandboxSpec;

use super::fetch::{self, BranchUpdate, REMOTE_PREFIX};

/// A session's hold on the git layer.
pub struct GitLayer {
    dir: PathBuf,
    project: PathBuf,
    git_dir: PathBuf,
    _lock: File,
}

impl GitLayer {
    /// Takes the layer of `spec`, if it has one. Messages (a recovered session's commits, a
    /// read-only fallback) go to `messages`. `git` and `home` are the host's git and home, for
    /// bringing back what a dead session left.
    pub fn open(
        spec: &mut SandboxSpec,
        git: Option<&Path>,
        home: &Path,
        messages: &mut Vec<String>,
    ) -> io::Result<Option<GitLayer>> {
        let Some((git_dir, _target, dir)) = spec.owned_layer() else {
            return Ok(None);
        };
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.with_extension("lock"))?;
        // SAFETY: valid fd.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let copy = readonly_config_copy(spec, &git_dir);
            spec.owned_layer_readonly(copy);
            messages.push(format!(
                "another session of this project is committing in {}: it is read-only in this \
                 one (git commit fails here; use that session, or wait for it to end)",
                git_dir.display()
            ));
            return Ok(None);
        }
        let layer = GitLayer {
            dir,
            project: spec.project.clone(),
            git_dir,
            _lock: lock,
        };
        let upper = layer.dir.join("upper");
        if has_entries(&upper) {
            messages.extend(layer.bring_back(git, home, "a session that ended early"));
        }
        airlock_sandbox::state::remove_tree(&upper)?;
        create_private_dir(&upper)?;
        if let Some(config) = super::sanitized_config(&layer.git_dir) {
            std::fs::write(upper.join("config"), config)?;
        }
        Ok(Some(layer))
    }

    /// Brings the session's commits back and clears the layer.
    pub fn finish(self, git: Option<&Path>, home: &Path) -> Vec<String> {
        self.bring_back(git, home, "the sandbox")
    }

    /// Fetches the upper's branches into the host repository, then clears the upper; when that
    /// fails the upper is kept aside (`layers/git.unfetched-<n>`) and the user told where.
    fn bring_back(&self, git: Option<&Path>, home: &Path, from: &str) -> Vec<String> {
        let upper = self.dir.join("upper");
        let result = match git {
            Some(git) => fetch::bring_back(
                git,
                &self.git_dir,
                &upper,
                home,
                &fetch::scratch_dir(&self.dir),
            ),
            None => Err("no git on PATH (outside the project and temp dirs)".into()),
        };
        let mut messages = Vec::new();
        match result {
            Ok(updates) => {
                if !updates.is_empty() {
                    let moved = git.and_then(|git| {
                        fetch::fast_forward_checked_out(git, &self.project, home, &updates)
                    });
                    messages.push(summary(from, &updates, moved.as_deref()));
                }
                if let Err(e) = airlock_sandbox::state::remove_tree(&upper) {
                    messages.push(format!("warning: cannot clear {}: {e}", upper.display()));
                }
            }
            Err(problem) => {
                let kept = set_aside(&self.dir);
                messages.push(format!(
                    "warning: the commits made in {from} could not be brought into {} ({problem}); \
                     what it wrote to .git is kept in {}",
                    self.git_dir.display(),
                    kept.map_or_else(
                        |e| format!("{} ({e})", upper.display()),
                        |p| p.display().to_string()
                    )
                ));
            }
        }
        let _ = airlock_sandbox::state::remove_tree(&self.dir.join("work"));
        messages
    }
}

/// `commits from the sandbox: airlock/main (new), airlock/x (1a2b3c4..5d6e7f8)`.
pub(super) fn summary(from: &str, updates: &[BranchUpdate], moved: Option<&str>) -> String {
    let short = |oid: &str| oid.chars().take(7).collect::<String>();
    let names: Vec<String> = updates
        .iter()
        .map(|u| {
            let name = format!("airlock/{}", u.branch);
            match &u.old {
                None => format!("{name} (new, {})", short(&u.new)),
                Some(old) => format!("{name} ({}..{})", short(old), short(&u.new)),
            }
        })
        .collect();
    let first = &updates[0].branch;
    let next = match moved {
        Some(branch) => format!("; {branch} fast-forwarded to it, your files unchanged"),
        None => format!(
            "; see them with `git log airlock/{first}`, take them with `git merge airlock/{first}`"
        ),
    };
    format!(
        "commits from {from}: {} (in {REMOTE_PREFIX}){next}",
        names.join(", ")
    )
}

/// The sanitised config written for a read-only fallback, bound over `<git dir>/config`.
fn readonly_config_copy(spec: &SandboxSpec, git_dir: &Path) -> Option<PathBuf> {
    let content = super::sanitized_config(git_dir)?;
    let path = spec
        .state_root
        .join("generated")
        .join("git-config-readonly");
    std::fs::create_dir_all(path.parent()?).ok()?;
    std::fs::write(&path, content).ok()?;
    Some(path)
}

fn has_entries(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some())
}

fn create_private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new().mode(0o700).create(dir)
}

/// Moves the upper out of the way, so the next session starts clean and nothing is lost.
fn set_aside(dir: &Path) -> io::Result<PathBuf> {
    for n in 1..1000 {
        let to = dir.with_extension(format!("unfetched-{n}"));
        if std::fs::symlink_metadata(&to).is_ok() {
            continue;
        }
        std::fs::rename(dir.join("upper"), &to)?;
        return Ok(to);
    }
    Err(io::Error::from(io::ErrorKind::AlreadyExists))
}
