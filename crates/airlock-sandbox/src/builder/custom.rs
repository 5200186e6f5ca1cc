//! Custom mounts from `[[sandbox.mounts]]`: paths and pattern matches, which entry wins a target,
//! validation and conflicts. The rule (docs/tools.md, "Custom mounts"):
//!
//! 1. Entries are read in file order, the global file first.
//! 2. For one target, an exact `path` wins over any pattern's match; of two patterns' matches the
//!    later entry wins; two `path` entries with different modes are an error.
//! 3. A pattern's match inside a `hidden` directory is dropped: it is hidden already, and an empty
//!    read-only directory cannot hold mount points. A `path` entry there is an error.
//! 4. A mount inside another is mounted after it (parents first), so the inner mode applies there.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound::{Excluded, Unbounded};
use std::path::{Component, Path, PathBuf};

use airlock_config::{MountMode, MountSelector, Profile, ProfileMount};

use super::MountPlan;
use crate::host::{HostFacts, MountSource, PathKind};
use crate::mount_patterns::{MAX_MATCHES, PatternMatches, WALK_DEADLINE};
use crate::spec::{MountOp, PrepareStep, Upper};

/// Why the custom mounts cannot be planned. `entry` names the `[[sandbox.mounts]]` entry: its
/// file, number, path or pattern, and mode.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MountError {
    #[error("{entry}: mount path {path:?} must be absolute or start with ~/")]
    NotAbsolute { path: String, entry: String },
    #[error("{entry}: mount path {path} does not exist; create it or remove the entry")]
    Missing { path: PathBuf, entry: String },
    #[error("{entry}: mount path {path} is not a file or directory")]
    NotFileOrDir { path: PathBuf, entry: String },
    #[error(
        "mount path {path} is listed twice with different modes, by {first} and by {second}; \
         keep one entry"
    )]
    Duplicate {
        path: PathBuf,
        first: String,
        second: String,
    },
    #[error("{entry}: {path} is one of airlock's own mounts ({what}); mount a path inside it")]
    Conflict {
        path: PathBuf,
        entry: String,
        what: String,
    },
    #[error("{entry}: mode {mode} at {path} would hide {covered}; choose a narrower path")]
    Hides {
        path: PathBuf,
        entry: String,
        mode: &'static str,
        covered: PathBuf,
    },
    #[error(
        "{entry}: mode {mode} needs a directory, but {path} is a file; use mode = \"hidden\" or \
         \"readonly\" for a file (a pattern ending in / matches directories only)"
    )]
    NeedsDirectory {
        path: PathBuf,
        entry: String,
        mode: &'static str,
    },
    #[error(
        "{entry} matches {count} paths under {base}, more than the {max} one pattern may mount; \
         nothing was mounted or created. Narrow the pattern (name the directory the matches are \
         in), or hide their directory as a whole"
    )]
    TooManyMatches {
        entry: String,
        count: usize,
        base: PathBuf,
        max: usize,
    },
    #[error(
        "{entry}: the walk of {base} did not finish within {secs} s ({seen} entries seen), so \
         what it matches is unknown; narrow the pattern (name the directory the matches are in)"
    )]
    WalkTimedOut {
        entry: String,
        base: PathBuf,
        seen: usize,
        secs: u64,
    },
}

/// What the custom mounts add: operations with the rule that produced each, prepare steps
/// (persistent overlay dirs) and warnings (a pattern that matched nothing).
#[derive(Default)]
pub(super) struct CustomPlan {
    pub ops: Vec<(MountOp, String)>,
    pub prepare: Vec<PrepareStep>,
    pub warnings: Vec<String>,
}

/// Whether `op` hides everything below its target (so a mask there is redundant).
pub(super) fn covers(op: &MountOp, path: &Path) -> bool {
    matches!(op, MountOp::Tmpfs { .. }) && path.starts_with(op.target()) && path != op.target()
}

/// `path` without `.`/`..` components and trailing slashes, or None when it is not absolute or has `..`.
pub(super) fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(name) => out.push(name),
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    path.is_absolute().then_some(out)
}

/// One target an entry asks for, and what is there on the host.
struct Wanted<'a> {
    mount: &'a ProfileMount,
    source: &'a MountSource,
}

impl Wanted<'_> {
    fn is_pattern_match(&self) -> bool {
        matches!(self.mount.selector, MountSelector::Pattern(_))
    }
}

/// Plans the profile's `[[sandbox.mounts]]` beside what airlock mounts already (`plan`), by the
/// rule in the module doc.
pub(super) fn custom_mounts(
    profile: &Profile,
    host: &HostFacts,
    plan: &MountPlan,
    state_root: &Path,
) -> Result<CustomPlan, MountError> {
    let mut out = CustomPlan::default();
    let mut chosen: BTreeMap<PathBuf, Wanted> = BTreeMap::new();
    for mount in &profile.mounts {
        let entry = || mount.label().to_string();
        match &mount.selector {
            MountSelector::Path(path) => {
                let not_absolute = || MountError::NotAbsolute {
                    path: path.clone(),
                    entry: entry(),
                };
                let source = host.mount_sources.get(path).ok_or_else(not_absolute)?;
                let target = normalize(&source.path).ok_or_else(not_absolute)?;
                choose(&mut chosen, plan, target, Wanted { mount, source })?;
            }
            MountSelector::Pattern(pattern) => {
                // No facts (a hand-built HostFacts): it matched nothing.
                let found = host.mount_patterns.get(pattern);
                let none = PatternMatches::default();
                check_matches(found.unwrap_or(&none), &entry, &mut out.warnings)?;
                for source in found.iter().flat_map(|f| &f.matches) {
                    let Some(target) = normalize(&source.path) else {
                        continue;
                    };
                    choose(&mut chosen, plan, target, Wanted { mount, source })?;
                }
            }
        }
    }
    drop_below_hidden(&mut chosen);
    for (target, wanted) in &chosen {
        let op = mount_op(target, wanted, state_root, &mut out.prepare)?;
        check_hides(&op, wanted, plan, &chosen)?;
        out.ops.push((op, wanted.mount.label().to_string()));
    }
    Ok(out)
}

/// Refuses a pattern that matched too much or whose walk did not finish; warns about one that
/// matched nothing and about matches that cannot be mounted.
fn check_matches(
    found: &PatternMatches,
    entry: &dyn Fn() -> String,
    warnings: &mut Vec<String>,
) -> Result<(), MountError> {
    if found.count > MAX_MATCHES {
        return Err(MountError::TooManyMatches {
            entry: entry(),
            count: found.count,
            base: found.base.clone(),
            max: MAX_MATCHES,
        });
    }
    if found.timed_out {
        return Err(MountError::WalkTimedOut {
            entry: entry(),
            base: found.base.clone(),
            seen: found.seen,
            secs: WALK_DEADLINE.as_secs(),
        });
    }
    if found.count == 0 && found.skipped == 0 && found.holding_airlock.is_empty() {
        warnings.push(format!(
            "{} matched nothing under {}; nothing is mounted for it",
            entry(),
            found.base.display()
        ));
    }
    if found.skipped > 0 {
        let named: Vec<String> = found
            .skipped_paths
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        let more = found.skipped.saturating_sub(named.len());
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        warnings.push(format!(
            "{}: not mounted, as a pattern never mounts symlinks, sockets, fifos or devices: {}{more}",
            entry(),
            named.join(", ")
        ));
    }
    if !found.holding_airlock.is_empty() {
        let named: Vec<String> = found
            .holding_airlock
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        warnings.push(format!(
            "{}: not mounted, as they hold airlock's own config, sandboxes or state: {}; name \
             what you need inside them",
            entry(),
            named.join(", ")
        ));
    }
    Ok(())
}

/// Records that `wanted` asks for `target`, by rule 2 of the module doc.
fn choose<'a>(
    chosen: &mut BTreeMap<PathBuf, Wanted<'a>>,
    plan: &MountPlan,
    target: PathBuf,
    wanted: Wanted<'a>,
) -> Result<(), MountError> {
    if let Some(first) = chosen.get(&target)
        && !first.is_pattern_match()
    {
        if wanted.is_pattern_match() || first.mount.mode == wanted.mount.mode {
            return Ok(());
        }
        return Err(MountError::Duplicate {
            path: target,
            first: first.mount.label().to_string(),
            second: wanted.mount.label().to_string(),
        });
    }
    if let Some(what) = plan.owner_of(&target) {
        return Err(MountError::Conflict {
            path: target,
            entry: wanted.mount.label().to_string(),
            what: what.to_owned(),
        });
    }
    chosen.insert(target, wanted);
    Ok(())
}

/// Rule 3: pattern matches inside a hidden directory go.
fn drop_below_hidden(chosen: &mut BTreeMap<PathBuf, Wanted>) {
    let hidden: BTreeSet<PathBuf> = chosen
        .iter()
        .filter(|(_, w)| w.mount.mode == MountMode::Hidden && w.source.kind == PathKind::Dir)
        .map(|(t, _)| t.clone())
        .collect();
    chosen.retain(|target, wanted| {
        !wanted.is_pattern_match() || !target.ancestors().skip(1).any(|a| hidden.contains(a))
    });
}

/// The operation that mounts `wanted` at `target`.
fn mount_op(
    target: &Path,
    wanted: &Wanted,
    state_root: &Path,
    prepare: &mut Vec<PrepareStep>,
) -> Result<MountOp, MountError> {
    let entry = || wanted.mount.label().to_string();
    let source = wanted.source;
    let resolved = source
        .resolved
        .clone()
        .unwrap_or_else(|| source.path.clone());
    let (source, is_dir) = match source.kind {
        PathKind::Dir => (resolved, true),
        PathKind::File => (resolved, false),
        PathKind::Missing | PathKind::Symlink { .. } => {
            return Err(MountError::Missing {
                path: target.to_owned(),
                entry: entry(),
            });
        }
        PathKind::Other => {
            return Err(MountError::NotFileOrDir {
                path: target.to_owned(),
                entry: entry(),
            });
        }
    };
    let mode = wanted.mount.mode;
    let target = target.to_owned();
    if !is_dir
        && matches!(
            mode,
            MountMode::Tmpfs | MountMode::Overlay | MountMode::Tmpoverlay
        )
    {
        return Err(MountError::NeedsDirectory {
            path: target,
            entry: entry(),
            mode: mode.as_str(),
        });
    }
    Ok(match mode {
        MountMode::Readonly | MountMode::Readwrite => MountOp::Bind {
            source,
            target,
            writable: mode == MountMode::Readwrite,
        },
        MountMode::Hidden if is_dir => MountOp::Tmpfs {
            target,
            writable: false,
        },
        MountMode::Hidden => MountOp::MaskFile { target },
        MountMode::Tmpfs => MountOp::Tmpfs {
            target,
            writable: true,
        },
        MountMode::Overlay => {
            // Named after the target, like a tool's: the same directory keeps its writes across
            // runs whichever entry (or pattern) mounts it.
            let dir = state_root
                .join("overlay")
                .join(super::tools::slot("mount", &target));
            prepare.push(PrepareStep::OverlayDirs { dir: dir.clone() });
            MountOp::Overlay {
                lower: source,
                target,
                upper: Upper::Persistent { dir },
            }
        }
        MountMode::Tmpoverlay => MountOp::Overlay {
            lower: source,
            target,
            upper: Upper::Throwaway,
        },
    })
}

/// An empty read-only directory cannot hold the mount points of what lies below it.
fn check_hides(
    op: &MountOp,
    wanted: &Wanted,
    plan: &MountPlan,
    chosen: &BTreeMap<PathBuf, Wanted>,
) -> Result<(), MountError> {
    let MountOp::Tmpfs {
        writable: false,
        target,
    } = op
    else {
        return Ok(());
    };
    // Paths order by component, so whatever lies below `target` comes right after it.
    let next_chosen = chosen
        .range::<Path, _>((Excluded(target.as_path()), Unbounded))
        .next()
        .map(|(t, _)| t.as_path());
    let below = plan
        .ops
        .iter()
        .map(|(op, _)| op.target())
        .chain(next_chosen)
        .find(|t| t.starts_with(target) && *t != target.as_path());
    match below {
        Some(covered) => Err(MountError::Hides {
            path: target.clone(),
            entry: wanted.mount.label().to_string(),
            mode: wanted.mount.mode.as_str(),
            covered: covered.to_owned(),
        }),
        None => Ok(()),
    }
}
