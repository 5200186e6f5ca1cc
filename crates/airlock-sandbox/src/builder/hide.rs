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
    let known = still_hidden(&host.hidden, profile.hide_env_files, &patterns);
    Some(HideSpec {
        root: host.project.clone(),
        patterns,
        skip: hide::SKIP.iter().map(|s| s.to_string()).collect(),
        known,
        pins,
        index: state_root.join(hide::INDEX),
    })
}

/// The last session's masks (the index) that still apply. The keeper hides every known path
/// whatever the rules, so with `hide_env_files` off (or `run --no-hide-env`) a mask the env rule
/// made would otherwise outlive it for good; only those are dropped, every other mask is kept.
fn still_hidden(
    known: &[hide::HiddenPath],
    hide_env_files: bool,
    patterns: &[String],
) -> Vec<hide::HiddenPath> {
    if hide_env_files {
        return known.to_vec();
    }
    let env_patterns: Vec<String> = hide::ENV_PATTERNS.iter().map(|p| p.to_string()).collect();
    let env = hide::Rules::new(&env_patterns).expect("the built-in env patterns are globs");
    let others = hide::Rules::new(patterns).ok();
    known
        .iter()
        .filter(|h| {
            !env.matches(&h.path) || others.as_ref().is_none_or(|rules| rules.matches(&h.path))
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hidden(path: &str) -> hide::HiddenPath {
        hide::HiddenPath {
            path: PathBuf::from(path),
            dir: false,
        }
    }

    #[test]
    fn env_masks_of_the_last_session_go_when_env_files_are_shown() {
        let known = [
            hidden(".env"),
            hidden("web/.env.local"),
            hidden("keys/a.pem"),
            hidden("secrets/dev.env"),
            hidden("certs/.env"),
        ];
        assert_eq!(still_hidden(&known, true, &[]), known.to_vec());
        let patterns = vec!["*.pem".to_owned(), "/certs/**".to_owned()];
        assert_eq!(
            still_hidden(&known, false, &patterns),
            [
                hidden("keys/a.pem"),
                hidden("secrets/dev.env"),
                hidden("certs/.env")
            ]
        );
    }
}
