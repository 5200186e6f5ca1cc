//! Custom mounts from `[[sandbox.mounts]]`: expansion, validation, duplicates and conflicts.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use airlock_config::{MountMode, Profile, ProfileMount};

use super::{MountPlan, SpecError};
use crate::host::{HostFacts, MountSource, PathKind};
use crate::spec::MountOp;

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

pub(super) fn custom_mounts(
    profile: &Profile,
    host: &HostFacts,
    plan: &MountPlan,
) -> Result<Vec<(MountOp, &'static str)>, SpecError> {
    // One entry per path: an exact repeat is dropped, a repeat with another mode is an error.
    let mut chosen: BTreeMap<PathBuf, (&ProfileMount, &MountSource)> = BTreeMap::new();
    for mount in &profile.mounts {
        let not_absolute = || SpecError::MountNotAbsolute {
            path: mount.path.clone(),
            origin: mount.origin.clone(),
        };
        let source = host
            .mount_sources
            .get(&mount.path)
            .ok_or_else(not_absolute)?;
        let target = normalize(&source.path).ok_or_else(not_absolute)?;
        if let Some((first, ..)) = chosen.get(&target) {
            if first.mode == mount.mode {
                continue;
            }
            return Err(SpecError::MountDuplicate {
                path: target,
                first: first.mode.as_str(),
                first_origin: first.origin.clone(),
                second: mount.mode.as_str(),
                second_origin: mount.origin.clone(),
            });
        }
        if let Some(what) = plan.owner_of(&target) {
            return Err(SpecError::MountConflict {
                path: target,
                origin: mount.origin.clone(),
                what,
            });
        }
        chosen.insert(target, (mount, source));
    }

    let mut ops = Vec::new();
    for (target, (mount, source)) in &chosen {
        let origin = || mount.origin.clone();
        let resolved = source
            .resolved
            .clone()
            .unwrap_or_else(|| source.path.clone());
        let (source, is_dir) = match source.kind {
            PathKind::Dir => (resolved, true),
            PathKind::File => (resolved, false),
            PathKind::Missing | PathKind::Symlink { .. } => {
                return Err(SpecError::MountMissing {
                    path: target.clone(),
                    origin: origin(),
                });
            }
            PathKind::Other => {
                return Err(SpecError::MountNotFileOrDir {
                    path: target.clone(),
                    origin: origin(),
                });
            }
        };
        let op = match mount.mode {
            MountMode::Readonly | MountMode::Readwrite => MountOp::Bind {
                source,
                target: target.clone(),
                writable: mount.mode == MountMode::Readwrite,
            },
            MountMode::Hidden if is_dir => MountOp::Tmpfs {
                target: target.clone(),
                writable: false,
            },
            MountMode::Hidden => MountOp::MaskFile {
                target: target.clone(),
            },
            MountMode::Tmpfs if is_dir => MountOp::Tmpfs {
                target: target.clone(),
                writable: true,
            },
            MountMode::Tmpfs => {
                return Err(SpecError::TmpfsOnFile {
                    path: target.clone(),
                    origin: origin(),
                });
            }
        };
        // An empty read-only directory cannot hold the mount points of what lies below it.
        if let MountOp::Tmpfs {
            writable: false, ..
        } = op
        {
            let below = plan
                .ops
                .iter()
                .map(|(op, _)| op.target())
                .chain(chosen.keys().map(PathBuf::as_path))
                .find(|t| t.starts_with(target) && *t != target.as_path());
            if let Some(covered) = below {
                return Err(SpecError::MountHides {
                    path: target.clone(),
                    origin: origin(),
                    mode: mount.mode.as_str(),
                    covered: covered.to_owned(),
                });
            }
        }
        ops.push((op, "a custom mount"));
    }
    Ok(ops)
}
