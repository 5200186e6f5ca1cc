//! The keeper's rules for one launch: what is hidden in the project, and which read-only file binds
//! over project files are held in place when the host replaces the file.

use std::path::{Path, PathBuf};

use airlock_config::Profile;

use super::MountPlan;
use crate::hide::{self, HideSpec, Pin};
use crate::host::HostFacts;
use crate::spec::MountOp;

/// The spec's `hide`, adding to `plan` the mounts the keeper draws from: the empty file its masks
/// are clones of, and a second, unreplaceable bind of each pinned file. None when nothing is
/// hidden and nothing pinned.
pub(super) fn plan(
    profile: &Profile,
    host: &HostFacts,
    state_root: &Path,
    plan: &mut MountPlan,
) -> Option<HideSpec> {
    let mut patterns: Vec<String> = Vec::new();
    if profile.hide_env_files {
        patterns.extend(hide::ENV_PATTERNS.iter().map(|p| p.to_string()));
    }
    patterns.extend(profile.hide.iter().cloned());
    let generated = state_root.join(super::tools::GENERATED);
    let pinned: Vec<PathBuf> = plan
        .ops
        .iter()
        .filter_map(|(op, _)| match op {
            MountOp::Bind {
                source,
                target,
                writable: false,
            } if source.starts_with(&generated) && target.starts_with(&host.project) => {
                Some(source.clone())
            }
            _ => None,
        })
        .collect();
    if patterns.is_empty() && pinned.is_empty() {
        return None;
    }
    let mut pins = Vec::new();
    for (n, source) in pinned.into_iter().enumerate() {
        let Some(target) = plan.ops.iter().find_map(|(op, _)| match op {
            MountOp::Bind {
                source: s, target, ..
            } if *s == source => Some(target.clone()),
            _ => None,
        }) else {
            continue;
        };
        let kept = Path::new(hide::PINNED_DIR).join(format!("pin-{n}"));
        plan.push(
            MountOp::Bind {
                source,
                target: kept.clone(),
                writable: false,
            },
            "a pinned file's source",
        );
        pins.push(Pin {
            target,
            source: kept,
        });
    }
    plan.push(
        MountOp::MaskFile {
            target: PathBuf::from(hide::EMPTY),
        },
        "the hidden files' source",
    );
    Some(HideSpec {
        root: host.project.clone(),
        patterns,
        skip: hide::SKIP.iter().map(|s| s.to_string()).collect(),
        known: host.hidden.clone(),
        pins,
        index: state_root.join(hide::INDEX),
    })
}
