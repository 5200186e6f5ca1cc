//! Detection and the plan: which tools the host has, and what they contribute to one launch.

use std::path::{Path, PathBuf};

use airlock_config::{NetworkMode, OverlayDefault};
use airlock_sandbox::{Contributions, ToolMount, ToolMountMode};
use serde::Serialize;

use crate::catalog::Catalog;
use crate::host::{HostView, PathState};
use crate::settings::{Settings, ToolConfig};
use crate::tool::{DefaultMode, MountDecl, Tool, ToolContext};

/// Whether a tool takes part in a launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Its binary is on `PATH` or one of its paths exists.
    Available,
    /// Neither.
    Missing,
    /// `[tools.<name>] enabled = false`.
    Disabled,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Available => "available",
            Status::Missing => "missing",
            Status::Disabled => "disabled",
        }
    }
}

/// What the host has of one tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detection {
    pub status: Status,
    /// The first of the tool's binaries found on `PATH`.
    pub binary: Option<PathBuf>,
    /// Every declared mount and what is at its source.
    pub mounts: Vec<(MountDecl, PathState)>,
    /// Why a present tool is not used (then `status` is `Missing`).
    pub not_used: Option<String>,
}

/// Looks for `tool` on the host.
pub fn detect(tool: &dyn Tool, host: &HostView, config: &ToolConfig) -> Detection {
    let binary = tool.binaries().iter().find_map(|b| host.find_binary(b));
    let mut declared = tool.mounts(host);
    declared.extend(tool.config_mounts(host, config));
    let mounts: Vec<(MountDecl, PathState)> = declared
        .into_iter()
        .map(|m| {
            let state = host.state(&m.source);
            (m, state)
        })
        .collect();
    let present = binary.is_some()
        || mounts.iter().any(|(_, s)| {
            s.is_usable() || matches!(s, PathState::Dangling | PathState::Unreadable)
        });
    let not_used = if present {
        tool.not_used_because(host)
    } else {
        None
    };
    let status = if !config.enabled {
        Status::Disabled
    } else if present && not_used.is_none() {
        Status::Available
    } else {
        Status::Missing
    };
    Detection {
        status,
        binary,
        mounts,
        not_used,
    }
}

/// A mount's mode: the tool's `mount_mode`, else `[overlay] default`, else the mount's own default
/// (`split`); `None` when that is `disabled`. A locked mount ignores the config.
pub fn resolve_mode(
    decl: &MountDecl,
    tool_mode: Option<OverlayDefault>,
    global: OverlayDefault,
) -> Option<ToolMountMode> {
    let own = match decl.default {
        DefaultMode::Locked(mode) => return Some(mode),
        DefaultMode::Fixed(mode) => mode,
        DefaultMode::Split => decl.category.split_mode(),
    };
    match tool_mode.unwrap_or(global) {
        OverlayDefault::Split => Some(own),
        OverlayDefault::Overlay => Some(ToolMountMode::Overlay),
        OverlayDefault::Tmpoverlay => Some(ToolMountMode::Tmpoverlay),
        OverlayDefault::Readonly => Some(ToolMountMode::Readonly),
        OverlayDefault::Readwrite => Some(ToolMountMode::Readwrite),
        OverlayDefault::Disabled => None,
    }
}

/// Everything the available, enabled tools of `catalog` contribute to a launch in `project`.
///
/// Reads the host through `host` only (plus the host's `git`, for the identity the git tool copies
/// in). A tool path that is a dangling symlink or cannot be read is skipped with a warning.
pub fn plan(
    catalog: &Catalog,
    settings: &Settings,
    host: &HostView,
    network: NetworkMode,
    project: &Path,
) -> Contributions {
    plan_for(catalog, settings, host, network, project, false)
}

/// [`plan`], or with `dry_run` (`airlock run --print-spec`) the same without touching the host: the
/// few directories a launch creates first (`.git/hooks` to mount it read-only, an agent's
/// `sessions/`) are left alone, so their mounts appear only once they exist.
pub fn plan_for(
    catalog: &Catalog,
    settings: &Settings,
    host: &HostView,
    network: NetworkMode,
    project: &Path,
    dry_run: bool,
) -> Contributions {
    let mut out = Contributions::default();
    let mut path_prepend: Vec<PathBuf> = Vec::new();
    let mut binaries: Vec<(&str, PathBuf)> = Vec::new();
    for tool in catalog.iter() {
        let config = settings.tool(tool.name());
        let mut detection = detect(tool, host, &config);
        if detection.status != Status::Available {
            continue;
        }
        if !dry_run && tool.prepare_host(host) {
            detection = detect(tool, host, &config);
        }
        for (decl, state) in &detection.mounts {
            let Some(mode) = resolve_mode(decl, config.mount_mode, settings.overlay_default) else {
                continue;
            };
            if let Some(mount) =
                tool_mount(tool.name(), decl, *state, mode, host, &mut out.warnings)
            {
                out.mounts.push(mount);
            }
        }
        if let Some(binary) = &detection.binary {
            binaries.push((tool.name(), binary.clone()));
        }
        let ctx = ToolContext {
            host,
            config: &config,
            network,
            project,
            dry_run,
        };
        let extras = tool.extras(&ctx);
        out.env.extend(extras.env);
        out.files.extend(extras.files);
        out.mounts.extend(extras.fixed_mounts);
        out.warnings.extend(extras.warnings);
        out.host_executed.extend(extras.host_executed);
        out.shims.extend(extras.shims);
        path_prepend.extend(extras.path_prepend);
    }
    // After every tool's mounts, so a binary already inside one (mise's ~/.local/bin) is not
    // mounted twice; what it runs from is found as the host finds it (`resolve`).
    for (tool, binary) in binaries {
        let extra =
            crate::resolve::binary_mounts(tool, &binary, host, &out.mounts, &mut out.warnings);
        out.mounts.extend(extra);
    }
    if !path_prepend.is_empty() {
        let mut parts: Vec<String> = path_prepend
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        parts.push(
            host.var("PATH")
                .unwrap_or("/usr/local/bin:/usr/bin:/bin")
                .to_owned(),
        );
        out.env.insert("PATH".into(), parts.join(":"));
    }
    out
}

/// The mount for one declared path, or `None` (with a warning when the user should know).
fn tool_mount(
    tool: &str,
    decl: &MountDecl,
    state: PathState,
    mode: ToolMountMode,
    host: &HostView,
    warnings: &mut Vec<String>,
) -> Option<ToolMount> {
    let shown = host.tilde(&decl.source);
    let problem = match state {
        PathState::Dir | PathState::File => None,
        PathState::Missing if decl.required => Some("does not exist"),
        PathState::Missing => return None,
        PathState::Dangling => Some("is a symlink to a path that does not exist"),
        PathState::Unreadable => Some("cannot be read"),
        PathState::Other => Some("is not a file or directory"),
    };
    if let Some(problem) = problem {
        warnings.push(format!(
            "tool {tool}: {shown} {problem}; skipped (fix or remove it, or set [tools.{tool}] enabled = false)"
        ));
        return None;
    }
    if mode == ToolMountMode::Readwrite && !matches!(decl.default, DefaultMode::Locked(_)) {
        warnings.push(format!(
            "tool {tool}: {shown} is mounted read-write: the sandbox's writes reach your host"
        ));
    }
    // Mount the resolved path, so a symlinked config dir (dotfiles) brings its content.
    let source = airlock_config::canonicalize(&decl.source).unwrap_or_else(|_| decl.source.clone());
    Some(ToolMount {
        tool: tool.to_owned(),
        source,
        target: decl.target.clone(),
        mode,
        is_dir: state == PathState::Dir,
    })
}

/// The shell init lines of the available, enabled tools for `shell`, as (tool, line), in catalog
/// order: what a sandbox shell's startup would run (e.g. from a generated rc snippet).
pub fn shell_init(
    catalog: &Catalog,
    settings: &Settings,
    host: &HostView,
    shell: crate::tool::Shell,
) -> Vec<(&'static str, &'static str)> {
    catalog
        .iter()
        .filter(|tool| detect(*tool, host, &settings.tool(tool.name())).status == Status::Available)
        .filter_map(|tool| tool.shell_init(shell).map(|line| (tool.name(), line)))
        .collect()
}
