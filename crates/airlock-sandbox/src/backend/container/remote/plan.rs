//! What of a spec a remote engine honours: the refusals, what of the project is not sent (and
//! never written back), what is read-only inside (see docs/backends.md, "Remote engines").

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::super::engine::Engine;
use super::{render, send, url};
use crate::spec::{MountOp, SandboxSpec, Upper};

/// What a remote engine cannot honour in `spec`, one sentence each (see docs/backends.md).
pub fn unsupported(spec: &SandboxSpec, engine: &Engine) -> Vec<String> {
    let mut out = Vec::new();
    let at = url(engine);
    if spec.network != airlock_config::NetworkMode::None {
        out.push(format!(
            "the container backend on a remote engine ({at}) has no network but none: the \
             egress proxy and its allowlist need the container's network namespace on this \
             machine, and network = \"{}\" would give the container that machine's network \
             unfiltered; use --network none (or [sandbox] network = \"none\"), or a local engine \
             for the allowlisted network",
            spec.network.as_str()
        ));
    }
    if !spec.ports.forwards.is_empty() {
        out.push(format!(
            "the container backend on a remote engine ({at}) cannot forward ports \
             ([[network.ports]], --publish); drop the forwards, or use --backend native"
        ));
    }
    let project = &spec.project;
    let inside = |p: &Path| p.starts_with(project) && p != project.as_path();
    for op in &spec.mounts {
        let problem = match op {
            MountOp::Overlay { target, upper, .. } if inside(target) => {
                let git_layer =
                    matches!(upper, Upper::Owned { .. }) && *target == project.join(".git");
                (!git_layer).then(|| format!("an overlay at {}", target.display()))
            }
            MountOp::Bind {
                source,
                target,
                writable,
            } if inside(target) && source != target && !substitute(spec, source, *writable) => {
                Some(format!(
                    "{} bound at {}",
                    source.display(),
                    target.display()
                ))
            }
            MountOp::Tmpfs { target, .. } if inside(target) => {
                Some(format!("a tmpfs at {}", target.display()))
            }
            MountOp::CopyFile { target, .. } if inside(target) => {
                Some(format!("a copy of a host file at {}", target.display()))
            }
            _ => None,
        };
        if let Some(what) = problem {
            out.push(format!(
                "the container backend on a remote engine ({at}) syncs the project as it is on \
                 this machine, and this sandbox puts {what} inside it; remove that mount, or use a \
                 local engine or --backend native"
            ));
        }
    }
    let names: Vec<&Path> = [project.as_path(), spec.cwd.as_path()]
        .into_iter()
        .chain(render::tmpfs_targets(spec))
        .chain(render::home(spec))
        .collect();
    out.extend(super::super::render::unmountable_refusal(names));
    out
}

/// Whether a bind of `source` inside the project can be sent as that file's content: a
/// read-only bind of a file airlock writes in its state (the sanitised `.git/config`; written
/// by the launch's prepare steps, read with no link followed when sent: anything but a regular
/// file then fails the launch).
fn substitute(spec: &SandboxSpec, source: &Path, writable: bool) -> bool {
    !writable && source.starts_with(&spec.state_root)
}

/// What of the project is not sent (and never written back): the spec's hide rules, the
/// keeper's known paths, masks inside the project; pins are sent with their content.
pub(super) fn exclusions(spec: &SandboxSpec) -> Result<send::Exclusions, String> {
    let project = &spec.project;
    let rel = |p: &Path| p.strip_prefix(project).ok().map(Path::to_path_buf);
    let mut paths = Vec::new();
    let mut substitutes = BTreeMap::new();
    let mut patterns = Vec::new();
    if let Some(hide) = &spec.hide {
        patterns = hide.patterns.clone();
        paths.extend(hide.known.iter().map(|k| k.path.clone()));
        for pin in &hide.pins {
            if let Some(r) = rel(&pin.target) {
                substitutes.insert(r, pin.source.clone());
            }
        }
    }
    for op in &spec.mounts {
        match op {
            MountOp::MaskFile { target } => paths.extend(rel(target)),
            MountOp::Bind {
                source,
                target,
                writable,
            } if source != target && substitute(spec, source, *writable) => {
                if let Some(r) = rel(target) {
                    substitutes.insert(r, source.clone());
                }
            }
            _ => {}
        }
    }
    // The git layer's sanitised config, written by the git tool before the launch.
    if let Some((_, target, dir)) = spec.owned_layer()
        && target == project.join(".git")
    {
        let config = dir.join("upper/config");
        if config.is_file() {
            substitutes.insert(PathBuf::from(".git/config"), config);
        }
    }
    Ok(send::Exclusions {
        rules: crate::hide::Rules::new(&patterns)?,
        paths,
        substitutes,
    })
}

/// Paths inside the project the spec mounts read-only onto themselves: never written back; a
/// directory among them is a read-only volume of its own in the container ([`ro_dirs`]).
pub(super) fn read_only(spec: &SandboxSpec) -> Vec<PathBuf> {
    spec.mounts
        .iter()
        .filter_map(|op| match op {
            MountOp::Bind {
                source,
                target,
                writable: false,
            } if source == target || substitute(spec, source, false) => target
                .strip_prefix(&spec.project)
                .ok()
                .map(Path::to_path_buf),
            _ => None,
        })
        .filter(|r| !r.as_os_str().is_empty())
        .collect()
}

/// The read-only directories of [`read_only`] (a file among them stays in the project's volume,
/// writable inside, never written back), each with its volume: `<name>-ro-<n>`.
pub(super) fn ro_dirs(spec: &SandboxSpec, name: &str) -> Vec<(PathBuf, String)> {
    read_only(spec)
        .into_iter()
        .filter(|r| std::fs::symlink_metadata(spec.project.join(r)).is_ok_and(|m| m.is_dir()))
        .enumerate()
        .map(|(n, r)| (r, format!("{name}-ro-{n}")))
        .collect()
}
