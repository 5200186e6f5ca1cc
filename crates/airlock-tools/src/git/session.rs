//! What the git tool does around one launch: before it, the checks a dead session left undone
//! and the layer ([`super::layer`]); after it, the commits brought back and the project checked
//! for git metadata written inside ([`super::quarantine`]).

use std::path::{Path, PathBuf};

use airlock_sandbox::{Contributions, MountOp, SandboxSpec};

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

/// Runs the check of every session of this project that ended without one (its marker is left
/// and unlocked). Call it before anything reads the project's `.git`.
pub fn recover(state_root: &Path, project: &Path) -> Vec<String> {
    let mut messages = Vec::new();
    for path in quarantine::orphaned_markers(&markers_dir(state_root)) {
        let Ok(since) = Since::of(&path) else {
            continue;
        };
        let (protected, hook_dirs) = read_marker(&path);
        messages.extend(quarantine::check(project, since, &protected, &hook_dirs).messages());
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
        let marker = Marker::create(&markers_dir(&spec.state_root))?;
        write_marker(&marker.path, &protected, &hook_dirs)?;
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

/// The marker's content: protected paths, a blank line, hook dirs; one path per line.
fn write_marker(path: &Path, protected: &[PathBuf], hook_dirs: &[PathBuf]) -> std::io::Result<()> {
    let line = |p: &PathBuf| format!("{}\n", p.display());
    let text: String = protected.iter().map(line).collect::<String>()
        + "\n"
        + &hook_dirs.iter().map(line).collect::<String>();
    std::fs::write(path, text)
}

fn read_marker(path: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let text = airlock_config::hostfs::read_regular(path, 1 << 20)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let (protected, hooks) = text.split_once("\n\n").unwrap_or((&text, ""));
    let paths = |s: &str| {
        s.lines()
            .filter(|l| !l.is_empty())
            .map(PathBuf::from)
            .collect()
    };
    (paths(protected), paths(hooks))
}
