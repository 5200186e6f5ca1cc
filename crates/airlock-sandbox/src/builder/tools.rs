//! Tool contributions (`airlock-tools`) turned into mount operations and host-side prepare steps.
//!
//! Directories in `overlay` mode get an overlay with a persistent upper in the state root; in
//! `tmpoverlay` mode a throwaway upper. Files cannot be overlaid, so a persistent file is a copy seeded
//! once into the state root and bound writable, and a throwaway file a private copy made at launch.

use std::path::{Path, PathBuf};

/// The state root's directory of generated files (bound read-only over their targets).
pub(super) const GENERATED: &str = "generated";

use sha2::{Digest, Sha256};

use super::MountPlan;
use crate::contrib::{Contributions, ToolMountMode};
use crate::spec::{MountOp, PrepareStep, Upper};

/// What the tools add: mount operations, paths Landlock must let them write, prepare steps.
#[derive(Default)]
pub(super) struct ToolPlan {
    pub ops: Vec<MountOp>,
    pub writable: Vec<PathBuf>,
    pub prepare: Vec<PrepareStep>,
}

/// A stable, readable name for per-mount state: `<tool>-<basename>-<sha256(target)[:8]>`.
pub(super) fn slot(tool: &str, target: &Path) -> String {
    let digest = Sha256::digest(target.as_os_str().as_encoded_bytes());
    let hex: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    let base = target
        .file_name()
        .map(|n| {
            n.to_string_lossy()
                .replace(|c: char| !c.is_ascii_alphanumeric() && c != '.', "_")
        })
        .unwrap_or_default();
    format!("{tool}-{base}-{hex}")
}

/// Plans the tools' mounts. A target that airlock or a custom mount already owns is left to them:
/// the user's explicit config wins over a tool's default.
pub(super) fn plan(contrib: &Contributions, state_root: &Path, taken: &MountPlan) -> ToolPlan {
    let mut out = ToolPlan::default();
    for mount in &contrib.mounts {
        if taken.owner_of(&mount.target).is_some()
            || out.ops.iter().any(|op| op.target() == mount.target)
        {
            continue;
        }
        let id = slot(&mount.tool, &mount.target);
        let target = mount.target.clone();
        let op = match (mount.mode, mount.is_dir) {
            (ToolMountMode::Readonly, _) => MountOp::Bind {
                source: mount.source.clone(),
                target,
                writable: false,
            },
            (ToolMountMode::Readwrite, _) => MountOp::Bind {
                source: mount.source.clone(),
                target,
                writable: true,
            },
            (ToolMountMode::Overlay, true) => {
                let dir = state_root.join("overlay").join(&id);
                out.prepare
                    .push(PrepareStep::OverlayDirs { dir: dir.clone() });
                MountOp::Overlay {
                    lower: mount.source.clone(),
                    target,
                    upper: Upper::Persistent { dir },
                }
            }
            (ToolMountMode::Layer, true) => {
                let dir = state_root.join("layers").join(&mount.tool);
                out.prepare
                    .push(PrepareStep::OverlayDirs { dir: dir.clone() });
                MountOp::Overlay {
                    lower: mount.source.clone(),
                    target,
                    upper: Upper::Owned { dir },
                }
            }
            (ToolMountMode::Tmpoverlay, true) => MountOp::Overlay {
                lower: mount.source.clone(),
                target,
                upper: Upper::Throwaway,
            },
            (ToolMountMode::Overlay, false) => {
                let copy = state_root.join("files").join(&id);
                out.prepare.push(PrepareStep::SeedFile {
                    from: mount.source.clone(),
                    to: copy.clone(),
                });
                MountOp::Bind {
                    source: copy,
                    target,
                    writable: true,
                }
            }
            (ToolMountMode::Scratch, _) => MountOp::Tmpfs {
                target,
                writable: true,
            },
            (ToolMountMode::Tmpoverlay | ToolMountMode::Layer, false) => MountOp::CopyFile {
                source: mount.source.clone(),
                target,
            },
        };
        if mount.mode != ToolMountMode::Readonly {
            out.writable.push(mount.target.clone());
        }
        out.ops.push(op);
    }
    for file in &contrib.files {
        if taken.owner_of(&file.target).is_some()
            || out.ops.iter().any(|op| op.target() == file.target)
        {
            continue;
        }
        let path = state_root
            .join(GENERATED)
            .join(slot(&file.tool, &file.target));
        out.prepare.push(PrepareStep::WriteFile {
            path: path.clone(),
            content: file.content.clone(),
        });
        out.ops.push(MountOp::Bind {
            source: path,
            target: file.target.clone(),
            writable: false,
        });
    }
    out
}
