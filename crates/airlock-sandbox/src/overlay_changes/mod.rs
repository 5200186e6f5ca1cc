//! What a sandbox's `overlay`-mode mounts kept, and bringing it back to the host on request
//! (`airlock overlay diff|apply`).
//!
//! An `overlay` mount's writes go to a persistent upper dir in the state root
//! (`overlay/<slot>/upper`); an overlay-mode file is a seeded copy (`files/<slot>`). [`Overlays`]
//! lists them from a planned spec, and [`Overlays::walk`] compares each with the host path it
//! shadows: added, modified and deleted entries (whiteouts, opaque directories). Applying copies
//! them onto the host and removes what it applied from the upper, so the overlay shows the host.
//!
//! Everything in an upper was written by the sandbox, so the walk trusts none of it: no symlink
//! is followed or copied, no FIFO, socket or device is made on the host, setuid/setgid files and
//! files of other owners stay where they are, writes go to new files renamed into place, and on
//! the host every lookup is beneath the (canonical) lower dir opened with no symlink on its way
//! (`fsops`). Holding the project's idle lock while applying is the caller's job.

mod entries;
mod fsops;
mod route;
mod seeded;
#[cfg(test)]
mod tests;
mod walk;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::contrib::{Contributions, ToolMountMode};
use crate::spec::{MountOp, PrepareStep, SandboxSpec, Upper};

/// One host path whose writes a sandbox keeps across runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    /// The tool whose mount it is; `None` for a `[[sandbox.mounts]]` entry.
    pub tool: Option<String>,
    /// Why it is mounted, as the spec's `mount_origins` says ("a tool mount", or the entry).
    pub origin: String,
    pub kind: LayerKind,
    /// The host path: the overlay's lower dir, or the file the copy was seeded from.
    pub host: PathBuf,
    /// Where it appears inside the sandbox (usually the same path).
    pub inside: PathBuf,
    /// Where the writes are: `<state>/overlay/<slot>/upper`, or the copy `<state>/files/<slot>`.
    pub kept: PathBuf,
}

/// Whether a layer is a directory (an overlay) or a file (a seeded copy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerKind {
    Dir,
    File,
}

/// How an entry inside differs from the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// Not on the host.
    Added,
    /// On the host with other content, mode or type.
    Modified,
    /// On the host, deleted inside (a whiteout, or missing from an opaque directory).
    Deleted,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Added => "added",
            ChangeKind::Modified => "modified",
            ChangeKind::Deleted => "deleted",
        }
    }
}

/// What the changed entry is: inside, or for a deletion on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryType {
    File,
    Dir,
    Symlink,
    /// A FIFO, socket or device.
    Special,
}

impl EntryType {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryType::File => "file",
            EntryType::Dir => "dir",
            EntryType::Symlink => "symlink",
            EntryType::Special => "special",
        }
    }
}

/// Why applying leaves an entry where it is (in the upper, so the sandbox still sees it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A symlink: it could point at any file of the user's, so it is never recreated.
    Symlink { to: PathBuf },
    /// A FIFO, socket or device: never created on the host.
    Special { what: &'static str },
    /// The setuid or setgid bit is set.
    SetId { mode: u32 },
    /// Owned by another uid than the one applying.
    NotYours { uid: u32 },
    /// The host's entry is someone else's: never replaced or deleted.
    HostNotYours { uid: u32 },
    /// The host has a symlink where the overlay has a directory: never written through.
    HostSymlink { to: PathBuf },
    /// Deeper than the walk goes.
    TooDeep,
    /// An operation failed; what it says is what was left.
    Failed { action: &'static str, error: String },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Symlink { to } => write!(
                f,
                "a symlink to {}: links are never copied out of a sandbox (one can point at any \
                 file of yours); if you trust it, make it yourself with `ln -s`",
                to.display()
            ),
            Refusal::Special { what } => write!(f, "a {what}: never created on the host"),
            Refusal::SetId { mode } => write!(
                f,
                "mode {mode:o} has the setuid or setgid bit: never copied to the host; copy it \
                 yourself without the bit if you want it"
            ),
            Refusal::NotYours { uid } => write!(
                f,
                "owned by uid {uid}, not by you: never copied to the host"
            ),
            Refusal::HostNotYours { uid } => write!(
                f,
                "the host's entry is owned by uid {uid}, not by you: airlock does not replace \
                 or delete it; change it yourself"
            ),
            Refusal::HostSymlink { to } => write!(
                f,
                "on the host it is a symlink (to {}): airlock does not write through links or \
                 replace them; put the real directory or file there and apply again, or copy \
                 what you want from the overlay yourself",
                to.display()
            ),
            Refusal::TooDeep => write!(
                f,
                "more than {} levels of directories: not walked",
                fsops::MAX_DEPTH
            ),
            Refusal::Failed { action, error } => write!(f, "cannot {action}: {error}"),
        }
    }
}

/// One difference between a layer and the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub kind: ChangeKind,
    pub entry: EntryType,
    /// The host path it is about.
    pub host: PathBuf,
    /// The same entry's path inside the sandbox.
    pub inside: PathBuf,
    /// Why applying leaves it (or, applying, why it was left); `None`: applied, or would be.
    pub refused: Option<Refusal>,
}

/// Look only, or bring the changes to the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Show,
    Apply,
}

/// What a walk of one layer found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Changes reported.
    pub changes: usize,
    /// Of those, the ones refused (or, applying, that failed).
    pub refused: usize,
}

/// The entries a walk looks at: all, or those at or below one path (a host path, or a path as
/// seen inside the sandbox: both are compared).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    under: Option<PathBuf>,
}

/// How much of an entry a [`Scope`] selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cover {
    All,
    /// The scope's path lies below it: only the way there.
    Partly,
    No,
}

impl Scope {
    /// Everything.
    pub fn all() -> Scope {
        Scope::default()
    }

    /// `path` (absolute) and what is below it.
    pub fn under(path: PathBuf) -> Scope {
        Scope { under: Some(path) }
    }

    /// Whether the scope selects anything of `layer` (its path lies in the layer, or the layer
    /// below it), so that a `--path` outside every layer can be refused up front.
    pub fn touches(&self, layer: &Layer) -> bool {
        self.covers(&layer.host, &layer.inside) != Cover::No
    }

    fn covers(&self, host: &Path, inside: &Path) -> Cover {
        let Some(under) = &self.under else {
            return Cover::All;
        };
        if host.starts_with(under) || inside.starts_with(under) {
            Cover::All
        } else if under.starts_with(host) || under.starts_with(inside) {
            Cover::Partly
        } else {
            Cover::No
        }
    }
}

/// Why a layer could not be walked at all.
#[derive(Debug, thiserror::Error)]
pub enum OverlayError {
    #[error(
        "cannot open the overlay's upper dir {path}: {source}; check that it is yours \
         (`ls -ld {path}`)"
    )]
    Upper {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "cannot open {path} on the host without following a symlink ({source}); it changed \
         since airlock planned the sandbox: check it, and copy what you want from {kept} yourself"
    )]
    Host {
        path: PathBuf,
        kept: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the way to {path} on the host goes through the symlink {link}, which lies where the \
         sandbox can write (it may have planted it): airlock does not apply this overlay; check \
         the link, and copy what you want from {kept} yourself"
    )]
    PlantedLink {
        path: PathBuf,
        link: PathBuf,
        kept: PathBuf,
    },
}

/// The persistent layers of one planned sandbox, and what is needed to walk them safely.
#[derive(Debug, Clone)]
pub struct Overlays {
    pub layers: Vec<Layer>,
    state_root: PathBuf,
    /// Host trees the sandbox writes (writable binds, the state root), canonical.
    writable: Vec<PathBuf>,
    uid: u32,
}

impl Overlays {
    /// The layers of `spec` (as `airlock run --print-spec` plans it) with persistent writes: its
    /// overlays with a persistent upper, and its seeded overlay-mode files; `contrib` names the
    /// tool of each.
    pub fn of(spec: &SandboxSpec, contrib: &Contributions) -> Overlays {
        let seeded: HashMap<&Path, &Path> = spec
            .prepare
            .iter()
            .filter_map(|step| match step {
                PrepareStep::SeedFile { from, to } => Some((to.as_path(), from.as_path())),
                _ => None,
            })
            .collect();
        let mut layers = Vec::new();
        let mut writable = vec![spec.state_root.clone()];
        for op in &spec.mounts {
            let (kind, host, inside, kept) = match op {
                MountOp::Overlay {
                    lower,
                    target,
                    upper: Upper::Persistent { dir },
                } => (LayerKind::Dir, lower.clone(), target, dir.join("upper")),
                MountOp::Bind {
                    source,
                    target,
                    writable: true,
                } => {
                    writable.push(source.clone());
                    let Some(from) = seeded.get(source.as_path()) else {
                        continue;
                    };
                    (LayerKind::File, from.to_path_buf(), target, source.clone())
                }
                _ => continue,
            };
            layers.push(Layer {
                tool: tool_of(contrib, inside, &kept, kind),
                origin: spec.mount_origins.get(inside).cloned().unwrap_or_default(),
                kind,
                host,
                inside: inside.clone(),
                kept,
            });
        }
        let writable = writable
            .into_iter()
            .map(|p| airlock_config::canonicalize(&p).unwrap_or(p))
            .collect();
        Overlays {
            layers,
            state_root: spec.state_root.clone(),
            writable,
            // SAFETY: geteuid cannot fail.
            uid: unsafe { libc::geteuid() },
        }
    }

    /// Compares `layer` with the host within `scope`, calling `visit` with each change as it is
    /// found (nothing is collected, so a huge upper costs no memory); with [`Action::Apply`]
    /// each change is made first and `visit` sees what happened. An upper that does not exist yet
    /// has no changes.
    pub fn walk(
        &self,
        layer: &Layer,
        scope: &Scope,
        action: Action,
        visit: &mut dyn FnMut(&Change),
    ) -> Result<Summary, OverlayError> {
        for path in [&layer.inside, &layer.host] {
            if let Some(link) = route::planted_link(path, &self.writable) {
                return Err(OverlayError::PlantedLink {
                    path: path.clone(),
                    link,
                    kept: layer.kept.clone(),
                });
            }
        }
        walk::walk(self, layer, scope, action, visit)
    }
}

/// The tool whose overlay-mode mount `inside` is: its upper (or copy) is named `<tool>-…`.
fn tool_of(contrib: &Contributions, inside: &Path, kept: &Path, kind: LayerKind) -> Option<String> {
    let slot = match kind {
        LayerKind::Dir => kept.parent()?.file_name()?,
        LayerKind::File => kept.file_name()?,
    };
    let slot = slot.to_str()?;
    contrib
        .mounts
        .iter()
        .find(|m| {
            m.mode == ToolMountMode::Overlay
                && m.target == inside
                && m.is_dir == (kind == LayerKind::Dir)
                && slot.starts_with(&format!("{}-", m.tool))
        })
        .map(|m| m.tool.clone())
}
