//! What the git tool does around one launch: before it, the checks a dead session left undone
//! and the layer ([`super::layer`]); after it, the commits brought back and the project checked
//! for git metadata written inside ([`super::quarantine`]).

use std::path::{Path, PathBuf};

use airlock_sandbox::{Contributions, MountOp, PrepareStep, SandboxSpec};

use super::layer::GitLayer;
use super::quarantine::{self, Marker, Since};

/// The git side of one session, from [`GitSession::begin`] to [`GitSession::finish`].
pub struct GitSession {
    project: PathBuf,
    git: Option<PathBuf>,
    home: PathBuf,
    layer: Option<GitLayer>,
    marker: Option<Marker>,
    protected: Vec<PathBuf>,
    hook_dirs: Vec<PathBuf>,
}

/// Where the markers of live sessions are kept: `<state root>/layers/sessions`.
fn markers_dir(state_root: &Path) -> PathBuf {
    state_root.join("layers").join("sessions")
}

/// Where the lists the markers name are kept: `<state root>/layers/session-lists/<sha256>`.
fn lists_dir(state_root: &Path) -> PathBuf {
    state_root.join("layers").join("session-lists")
}

/// Runs the check of every session of this project that ended without one (its marker is left
/// and unlocked). Call it before anything reads the project's `.git`.
pub fn recover(state_root: &Path, project: &Path) -> Vec<String> {
    let mut messages = Vec::new();
    for path in quarantine::orphaned_markers(&markers_dir(state_root)) {
        let Ok(since) = Since::of(&path) else {
            continue;
        };
        match read_marker(&lists_dir(state_root), &path) {
            Some((protected, hook_dirs)) => messages
                .extend(quarantine::check(project, since, &protected, &hook_dirs).messages()),
            // Without the list the check cannot tell airlock's own read-only `.git` from one
            // made inside; it is not guessed.
            None => messages.push(format!(
                "warning: the list of the session marker {} is gone; git metadata written in \
                 that session was not checked (look for a .git or hooks you did not make)",
                path.display()
            )),
        }
        let _ = std::fs::remove_file(&path);
    }
    messages
}

impl GitSession {
    /// Before the launch, after the state is prepared: takes the git layer, and leaves a marker
    /// that dates the session and lists what airlock protects in it.
    pub fn begin(
        spec: &mut SandboxSpec,
        contrib: &Contributions,
        git: Option<PathBuf>,
        home: &Path,
        messages: &mut Vec<String>,
    ) -> std::io::Result<GitSession> {
        let layer = GitLayer::open(spec, git.as_deref(), home, messages)?;
        let protected = protected_paths(spec);
        let hook_dirs = contrib.host_executed.clone();
        let list = write_list(
            &lists_dir(&spec.state_root),
            &marker_text(&protected, &hook_dirs),
        )?;
        let marker = Marker::create(&markers_dir(&spec.state_root), &list)?;
        Ok(GitSession {
            project: spec.project.clone(),
            git,
            home: home.to_path_buf(),
            layer,
            marker: Some(marker),
            protected,
            hook_dirs,
        })
    }

    /// After the sandbox is gone: the project checked, the commits brought back.
    pub fn finish(mut self) -> Vec<String> {
        let mut messages = Vec::new();
        if let Some(marker) = self.marker.take() {
            match marker.since() {
                Ok(since) => messages.extend(
                    quarantine::check(&self.project, since, &self.protected, &self.hook_dirs)
                        .messages(),
                ),
                Err(e) => messages.push(format!(
                    "warning: cannot read the session marker {} ({e}); git metadata written inside \
                     was not checked",
                    marker.path.display()
                )),
            }
            let _ = std::fs::remove_file(&marker.path);
        }
        if let Some(layer) = self.layer.take() {
            messages.extend(layer.finish(self.git.as_deref(), &self.home));
        }
        messages
    }
}

impl GitSession {
    /// A remote container's `.git`, unpacked as data into `staged`: its branch tips and object
    /// files only (as from the git layer, [`super::fetch`]) come into the project's repository
    /// as `airlock/<branch>`; nothing else of it (config, hooks, `info`, links) is read.
    pub fn bring_back_synced(&self, staged: &Path) -> Vec<String> {
        let git_dir = self.project.join(".git");
        if !std::fs::symlink_metadata(&git_dir).is_ok_and(|m| m.is_dir()) {
            return Vec::new();
        }
        let Some(git) = self.git.as_deref() else {
            return vec![
                "warning: commits made in the container were not brought back: no git \
                         on PATH (outside the project and temp dirs)"
                    .into(),
            ];
        };
        let scratch = staged.with_extension("fetch");
        match super::fetch::bring_back(git, &git_dir, staged, &self.home, &scratch) {
            Ok(updates) if updates.is_empty() => Vec::new(),
            Ok(updates) => {
                let moved = super::fetch::fast_forward_checked_out(
                    git,
                    &self.project,
                    &self.home,
                    &updates,
                );
                vec![super::layer::summary(
                    "the container",
                    &updates,
                    moved.as_deref(),
                )]
            }
            Err(e) => vec![format!(
                "warning: the commits made in the container could not be brought into {} ({e})",
                git_dir.display()
            )],
        }
    }
}

/// Git paths the spec mounts read-only or as a layer inside the project (`.git`, a submodule's
/// `.git`, the host's hook dir): the sandbox cannot change them, so the check skips them.
fn protected_paths(spec: &SandboxSpec) -> Vec<PathBuf> {
    spec.mounts
        .iter()
        .filter_map(|op| match op {
            MountOp::Bind {
                target,
                writable: false,
                ..
            }
            | MountOp::Overlay { target, .. } => Some(target),
            _ => None,
        })
        .filter(|target| target.starts_with(&spec.project) && target.as_path() != spec.project)
        .cloned()
        .collect()
}

/// What a marker lists: protected paths, a blank line, hook dirs; one path per line.
fn marker_text(protected: &[PathBuf], hook_dirs: &[PathBuf]) -> String {
    let line = |p: &PathBuf| format!("{}\n", p.display());
    protected.iter().map(line).collect::<String>()
        + "\n"
        + &hook_dirs.iter().map(line).collect::<String>()
}

/// Keeps `text` in `dir` under its SHA-256 (written once, atomically, by the state's own
/// `WriteFile` step: a file there with other bytes is replaced) and returns that name, which the
/// marker carries. The marker itself stays empty: removing an empty file at the session's end
/// frees no data block, which costs ext4 ~0.3 ms of every launch's exit (docs/benchmarks.md). A
/// project has a list per set of protected paths and hook dirs it has launched with; they stay
/// with its state.
fn write_list(dir: &Path, text: &str) -> std::io::Result<String> {
    let name = airlock_config::sha256_hex(text.as_bytes());
    let step = PrepareStep::WriteFile {
        path: dir.join(&name),
        content: text.to_owned(),
    };
    airlock_sandbox::state::prepare(std::slice::from_ref(&step)).map_err(std::io::Error::other)?;
    Ok(name)
}

/// The lists of a marker: in `lists` under the name after the marker's last `-`, or, for a
/// marker an earlier airlock left, its own content; `None` when the list cannot be read.
fn read_marker(lists: &Path, path: &Path) -> Option<(Vec<PathBuf>, Vec<PathBuf>)> {
    use airlock_config::hostfs::read_regular;
    let own = read_regular(path, 1 << 20).ok().filter(|b| !b.is_empty());
    let bytes = match own {
        Some(bytes) => bytes,
        None => {
            let name = path.file_name()?.to_str()?.rsplit_once('-')?.1;
            if name.len() != 64 || !name.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            read_regular(&lists.join(name), 1 << 20).ok()?
        }
    };
    let text = String::from_utf8_lossy(&bytes);
    let (protected, hooks) = text.split_once("\n\n").unwrap_or((&text, ""));
    let paths = |s: &str| {
        s.lines()
            .filter(|l| !l.is_empty())
            .map(PathBuf::from)
            .collect()
    };
    Some((paths(protected), paths(hooks)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session that died after its marker: the next launch reads the marker's list, leaves
    /// the `.git` airlock protected alone and quarantines the one made inside; an earlier
    /// airlock's marker (its list inside) reads the same.
    #[test]
    fn a_dead_sessions_list_guides_the_check_at_the_next_launch() {
        let state = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        let p = project.path();
        let protected = vec![p.join(".git")];
        let text = marker_text(&protected, &[]);
        let list = write_list(&lists_dir(state.path()), &text).unwrap();
        assert_eq!(write_list(&lists_dir(state.path()), &text).unwrap(), list);
        drop(Marker::create(&markers_dir(state.path()), &list).unwrap());
        std::fs::create_dir_all(p.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(p.join("sub/.git/hooks")).unwrap();
        let messages = recover(state.path(), p).join("\n");
        assert!(p.join(".git").is_dir(), "{messages}");
        assert!(!p.join("sub/.git").exists(), "{messages}");
        assert!(messages.contains("quarantined"), "{messages}");
        assert!(quarantine::orphaned_markers(&markers_dir(state.path())).is_empty());
        let dir = markers_dir(state.path());
        let old = dir.join("1.0");
        std::fs::write(&old, &text).unwrap();
        assert_eq!(
            read_marker(&lists_dir(state.path()), &old),
            Some((protected, vec![]))
        );
    }

    /// A marker whose list is gone (or whose name names none) is not checked by guess: the
    /// next launch says so, touches nothing, and removes the marker.
    #[test]
    fn a_marker_without_its_list_is_named_and_nothing_is_moved() {
        let state = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        let p = project.path();
        let list = write_list(
            &lists_dir(state.path()),
            &marker_text(&[p.join(".git")], &[]),
        )
        .unwrap();
        drop(Marker::create(&markers_dir(state.path()), &list).unwrap());
        std::fs::write(markers_dir(state.path()).join("7.0-not-a-list"), "").unwrap();
        std::fs::remove_file(lists_dir(state.path()).join(&list)).unwrap();
        std::fs::create_dir_all(p.join(".git/hooks")).unwrap();
        let messages = recover(state.path(), p);
        assert!(p.join(".git").is_dir(), "{messages:?}");
        let named = |m: &&String| m.contains("is gone") && m.contains("was not checked");
        assert_eq!(messages.iter().filter(named).count(), 2, "{messages:?}");
        assert!(quarantine::orphaned_markers(&markers_dir(state.path())).is_empty());
    }
}
