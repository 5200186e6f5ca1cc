//! revdiff's part of a launch: the shared temp directory its launcher hands files through, and
//! the pinned overlay the kitty and herdr filters run its launches as.

use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use airlock_sandbox::{MountOp, SandboxSpec};
use airlock_sockets::overlay::{Pins, RevdiffOverlay, ScriptDir};
use airlock_tools::HostView;

/// `airlock overlay-handoff PRIVATE SHARED OUTPUT [SENTINEL]` (the last line of every launch
/// script airlock writes).
#[derive(clap::Args, Debug)]
pub struct HandoffArgs {
    /// revdiff's output, in the host-only script directory
    pub private_output: PathBuf,
    /// The session's shared temp directory
    pub shared: PathBuf,
    /// The output file's name there
    pub output: String,
    /// The sentinel file's name there
    pub sentinel: Option<String>,
}

pub fn handoff(args: HandoffArgs) -> anyhow::Result<i32> {
    airlock_sockets::overlay::handoff(
        &args.private_output,
        &args.shared,
        &args.output,
        args.sentinel.as_deref(),
    )
    .map_err(|e| anyhow::anyhow!("overlay-handoff: {e}"))?;
    Ok(0)
}

/// The shared temp directory's parent: `$XDG_CACHE_HOME/airlock/tmp` (`~/.cache/airlock/tmp`).
pub fn shared_root(view: &HostView) -> PathBuf {
    view.xdg_cache().join("airlock/tmp")
}

fn pid_alive(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// Makes this session's shared temp directory `<root>/<sandbox>.<pid>` (0700), after reclaiming
/// the directories earlier sessions of the same project left (their supervisor is gone);
/// another project's are never touched. Bound read-write at the same path inside, `$TMPDIR`.
pub fn shared_tmp(spec: &mut SandboxSpec, view: &HostView) -> anyhow::Result<PathBuf> {
    let root = shared_root(view);
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&root)?;
    let prefix = format!("{}.", spec.name);
    if let Ok(entries) = fs::read_dir(&root) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let dead = name
                .to_str()
                .and_then(|n| n.strip_prefix(&prefix))
                .and_then(|pid| pid.parse::<u32>().ok())
                .is_some_and(|pid| pid != std::process::id() && !pid_alive(pid));
            if dead {
                // remove_dir_all does not follow the links a sandbox left inside.
                let _ = fs::remove_dir_all(entry.path());
            }
        }
    }
    let dir = root.join(format!("{prefix}{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::DirBuilder::new().mode(0o700).create(&dir)?;
    spec.mounts.push(MountOp::Bind {
        source: dir.clone(),
        target: dir.clone(),
        writable: true,
    });
    spec.env
        .insert("TMPDIR".into(), dir.to_string_lossy().into_owned());
    Ok(dir)
}

/// A host program resolved outside every sandbox-writable directory, and its real path.
fn host_program(view: &HostView, name: &str, project: &Path) -> Option<(PathBuf, PathBuf)> {
    let found = view.find_host_program(name, project)?;
    let real = airlock_config::canonicalize(&found).ok()?;
    Some((found, real))
}

/// `EDITOR` / `VISUAL` as the host sets them, each a single word resolved to an absolute path
/// outside the sandbox-writable directories; others are left out.
fn editor_env(view: &HostView, project: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for var in ["EDITOR", "VISUAL"] {
        let Some(value) = view.var(var).filter(|v| !v.is_empty() && !v.contains(' ')) else {
            continue;
        };
        let resolved = if value.starts_with('/') {
            airlock_config::canonicalize(value).ok()
        } else {
            host_program(view, value, project).map(|(_, real)| real)
        };
        if let Some(path) = resolved.and_then(|p| p.to_str().map(str::to_owned)) {
            out.push((var.to_owned(), path));
        }
    }
    out
}

/// The overlay of this session: revdiff pinned, its scripts in
/// `$XDG_CACHE_HOME/airlock/herdr-scripts/<sandbox>.<pid>/` (never mounted). `None` when revdiff
/// cannot be resolved outside the sandbox-writable directories (every launch is then denied).
pub fn revdiff_overlay(
    spec: &SandboxSpec,
    view: &HostView,
    shared: &Path,
) -> anyhow::Result<Option<Arc<RevdiffOverlay>>> {
    let Some((found, revdiff)) = host_program(view, "revdiff", &spec.project) else {
        return Ok(None);
    };
    let airlock = airlock_config::canonicalize(std::env::current_exe()?)?;
    let git = host_program(view, "git", &spec.project).map(|(_, real)| real);
    let dot_git = spec.project.join(".git");
    let git_dir = fs::symlink_metadata(&dot_git)
        .is_ok_and(|m| m.is_dir())
        .then_some(dot_git);
    let session = shared
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let scripts = ScriptDir::create(&view.xdg_cache().join("airlock/herdr-scripts").join(session))?;
    if let Some(git) = &git {
        scripts.link_git(git)?;
    }
    let mut program_names = vec![revdiff.to_string_lossy().into_owned()];
    if found != revdiff {
        program_names.push(found.to_string_lossy().into_owned());
    }
    Ok(Some(Arc::new(RevdiffOverlay {
        pins: Pins {
            revdiff,
            airlock,
            git,
            project: spec.project.clone(),
            git_dir,
            shared: shared.to_path_buf(),
            editor_env: editor_env(view, &spec.project),
        },
        program_names,
        scripts,
    })))
}
