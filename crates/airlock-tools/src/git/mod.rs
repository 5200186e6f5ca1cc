//! git: how much of the repository and of the host's git setup the sandbox gets, per
//! `[tools.git] mode`:
//!
//! - `readonly` (default): `.git` read-only; a generated gitconfig with the host's resolved
//!   identity, excludes and attributes; no credentials, SSH or GPG.
//! - `readwrite`: `.git` is a layer ([`layer`]): git works as usual inside, but every write stays in
//!   the sandbox's state, and when the session ends the commits are brought into the host
//!   repository as `airlock/<branch>` ([`fetch`]), pure data, nothing of the sandbox's config or
//!   hooks; plus signing settings, `~/.ssh`, `~/.gnupg`, `~/.git-credentials` read-only and the
//!   SSH agent.
//! - `disabled`: no git config; `.git` a layer as in `readwrite`.
//!
//! In every mode the sandbox sees `.git/config` without its secrets ([`sanitize`]), a `.git` file
//! and the `.git` of every submodule read-only, and a hook dir named by the host's
//! `core.hooksPath` inside the project as a throwaway overlay. Git metadata created or changed
//! anywhere else in the project is quarantined when the session ends ([`quarantine`]).

pub mod fetch;
pub mod hint;
pub mod identity;
pub mod layer;
pub mod linked;
mod plain_config;
pub mod quarantine;
pub mod sanitize;
pub mod session;
mod submodules;
pub mod worktree;

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use airlock_sandbox::{GeneratedFile, ToolMount, ToolMountMode};

use crate::host::{HostView, PathState};
use crate::settings::ToolConfig;
use crate::tool::{Category, Extras, KeyKind, KeySpec, MountDecl, Tool, ToolContext};

pub(crate) struct Git;

/// `[tools.git] mode` values.
pub const MODES: &[&str] = &["readonly", "readwrite", "disabled"];

const KEYS: &[KeySpec] = &[
    KeySpec {
        name: "mode",
        kind: KeyKind::Choice(MODES),
        default: "\"readonly\"",
        help: "readonly: .git read-only, identity only; readwrite: commits (kept in the sandbox, \
               brought back as airlock/<branch> at exit), SSH/GPG keys read-only, SSH agent; \
               disabled: no git config, commits as in readwrite",
    },
    KeySpec {
        name: "allow_hooks",
        kind: KeyKind::Bool,
        default: "false",
        help: "let the sandbox write the hook dir your core.hooksPath names in the project (its \
               hooks run on your host the next time you use git)",
    },
    KeySpec {
        name: "trust_config_changes",
        kind: KeyKind::Bool,
        default: "false",
        help: "no effect: .git/config written inside never reaches the host (kept for old configs)",
    },
];

/// The `mode` of a git tool config.
pub fn mode(config: &ToolConfig) -> &str {
    config.choice("mode", "readonly")
}

impl Tool for Git {
    fn name(&self) -> &'static str {
        "git"
    }
    fn description(&self) -> &'static str {
        "Git configuration (safe mode, no credentials)"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["git"]
    }
    fn has_mount_mode(&self) -> bool {
        false
    }
    fn keys(&self) -> &'static [KeySpec] {
        KEYS
    }
    fn config_mounts(&self, host: &HostView, config: &ToolConfig) -> Vec<MountDecl> {
        if mode(config) != "readwrite" {
            return Vec::new();
        }
        [".ssh", ".gnupg", ".git-credentials"]
            .into_iter()
            .map(|rel| {
                MountDecl::same(host.home_path(rel), Category::Config)
                    .locked(ToolMountMode::Readonly)
            })
            .collect()
    }
    fn extras(&self, ctx: &ToolContext) -> Extras {
        let mode = mode(ctx.config);
        let mut extras = Extras::default();
        let git = ctx.host.find_host_program("git", ctx.project);
        // Read once: the repository, and its config (None when missing or not a regular file).
        let repository = linked::repository(ctx.project);
        let (config_is_plain, config) = match repository.common_dir() {
            Some(dir) => read_config(dir, &mut extras),
            None => (true, None),
        };
        // The host's git runs in the project (for includeIf "gitdir:") only when its config is a
        // plain file: a FIFO there would block it, a symlink would point it anywhere.
        let run_in = if config_is_plain {
            ctx.project
        } else {
            Path::new("/")
        };
        let global = match &git {
            Some(git) => identity::host_global_config(ctx.host, git, run_in)
                .unwrap_or_else(|problem| {
                    if mode != "disabled" {
                        extras.warnings.push(format!(
                            "tool git: cannot read your git config ({problem}); commits inside need --author"
                        ));
                    }
                    BTreeMap::new()
                }),
            None => BTreeMap::new(),
        };
        repository_mounts(
            ctx,
            mode,
            &repository,
            config.as_deref(),
            &global,
            &mut extras,
        );
        if mode == "disabled" {
            return extras;
        }
        let signing = mode == "readwrite";
        match git {
            Some(_) => identity::contribute(ctx.host, &global, signing, &mut extras),
            None => extras.warnings.push(
                "tool git: no git on PATH (outside the project and temp dirs) to read your identity \
                 from; commits inside need --author"
                    .into(),
            ),
        }
        if signing {
            forward_ssh_agent(ctx.host, &mut extras);
        }
        extras
    }
}

/// A read-only mount of `path` onto itself.
fn readonly(path: &Path, is_dir: bool) -> ToolMount {
    ToolMount {
        tool: "git".into(),
        source: path.to_path_buf(),
        target: path.to_path_buf(),
        mode: ToolMountMode::Readonly,
        is_dir,
    }
}

/// `<git dir>/config`: whether it is missing or a regular file (a warning when it is anything
/// else), and its text when it could be read.
fn read_config(git_dir: &Path, extras: &mut Extras) -> (bool, Option<String>) {
    let path = git_dir.join("config");
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if !meta.is_file() => {
            extras.warnings.push(format!(
                "tool git: {} is not a regular file; airlock does not read it and git inside \
                 will not work here (replace it with a regular file)",
                path.display()
            ));
            (false, None)
        }
        _ => {
            let text = airlock_config::hostfs::read_regular(&path, CONFIG_BYTES)
                .ok()
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
            (true, text)
        }
    }
}

/// The most a repository config may hold for airlock to read it.
pub const CONFIG_BYTES: u64 = 4 << 20;

/// The repository's `config` as the sandbox sees it, when it is a readable regular file with
/// something to take out (a config with no secrets is shown as it is: no copy, no extra mount).
pub fn sanitized_config(git_dir: &Path) -> Option<String> {
    let bytes = airlock_config::hostfs::read_regular(&git_dir.join("config"), CONFIG_BYTES).ok()?;
    sanitized(&String::from_utf8_lossy(&bytes))
}

/// The hosts the project's repository names in its remotes (`remote.*.url`, `pushurl`); none when
/// it has no repository or its config is not a readable regular file.
pub fn remote_hosts_of(project: &Path) -> Vec<String> {
    linked::repository(project)
        .common_dir()
        .and_then(|dir| {
            airlock_config::hostfs::read_regular(&dir.join("config"), CONFIG_BYTES).ok()
        })
        .map(|bytes| sanitize::remote_hosts(&String::from_utf8_lossy(&bytes)))
        .unwrap_or_default()
}

/// [`sanitize::sanitize`] of `text`, when that takes something out.
fn sanitized(text: &str) -> Option<String> {
    let clean = sanitize::sanitize(text);
    (clean != text).then_some(clean)
}

/// `.git` per mode (read-only, or the layer), the sanitised config, a `.git` file and the
/// submodules' `.git` read-only, and the host's hook dir when it lies in the project. For a
/// linked worktree or a submodule, whose `.git` is a file, the git dir it names is what is
/// mounted: the main repository's, or the submodule's under the superproject's `.git/modules`
/// (see [`linked`]).
fn repository_mounts(
    ctx: &ToolContext,
    mode: &str,
    repository: &linked::Repository,
    config: Option<&str>,
    global: &BTreeMap<String, String>,
    extras: &mut Extras,
) {
    let dot_git = ctx.project.join(".git");
    if repository.is_git_file() && std::fs::symlink_metadata(&dot_git).is_ok_and(|m| m.is_file()) {
        extras.fixed_mounts.push(readonly(&dot_git, false));
    }
    if let linked::Repository::Unlinked(reason) = repository {
        extras.warnings.push(format!(
            "tool git: {reason}; no repository is mounted, so git inside finds none here"
        ));
    }
    for link in submodules::links(ctx.project) {
        extras.fixed_mounts.push(readonly(&link.path, link.is_dir));
    }
    let git_dir = repository.common_dir().map(Path::to_path_buf);
    if let Some(git_dir) = &git_dir {
        if mode == "readonly" {
            extras.fixed_mounts.push(readonly(git_dir, true));
            // A failed commit inside then says why ([`hint`]).
            extras.shims.push("git".into());
            extras.env.push((
                hint::READONLY_ENV.into(),
                git_dir.to_string_lossy().into_owned(),
            ));
            // Always a copy, even with nothing to take out: the keeper holds it in place, so a
            // secret the host adds while the session runs (`git remote set-url`) stays unseen.
            if let Some(content) = config.map(sanitize::sanitize) {
                extras.files.push(GeneratedFile {
                    tool: "git".into(),
                    target: git_dir.join("config"),
                    content,
                });
            }
        } else {
            // The layer: writes stay in the sandbox's state; `session` seeds the sanitised config
            // into it and brings the commits back at exit.
            extras.fixed_mounts.push(ToolMount {
                mode: ToolMountMode::Layer,
                ..readonly(git_dir, true)
            });
        }
    }
    if ctx.config.flag("allow_hooks", false) {
        return;
    }
    let hooks_path = sanitize::plain_value(config.unwrap_or(""), "core", "hookspath")
        .or_else(|| global.get("core.hookspath").cloned());
    if let Some(dir) = hooks_path.and_then(|value| hooks_dir_in_project(ctx, &value)) {
        match ctx.host.state(&dir) {
            // Hooks written inside are discarded at exit: husky's install still works in here.
            PathState::Dir => extras.fixed_mounts.push(ToolMount {
                mode: ToolMountMode::Tmpoverlay,
                ..readonly(&dir, true)
            }),
            _ => extras.host_executed.push(dir),
        }
    }
}

/// The directory a `core.hooksPath` value names, when it lies inside the project (outside its
/// `.git`, which is protected already). Relative values are relative to the worktree, as git
/// reads them for a non-bare repository.
fn hooks_dir_in_project(ctx: &ToolContext, value: &str) -> Option<PathBuf> {
    let named = match value.strip_prefix("~/") {
        Some(rest) => ctx.host.home.join(rest),
        None => ctx.project.join(value),
    };
    let mut dir = PathBuf::new();
    for part in named.components() {
        match part {
            Component::ParentDir => {
                dir.pop();
            }
            Component::CurDir => {}
            other => dir.push(other),
        }
    }
    let dir = airlock_config::canonicalize(&dir).unwrap_or(dir);
    (dir.starts_with(ctx.project)
        && dir != ctx.project
        && !dir.starts_with(ctx.project.join(".git")))
    .then_some(dir)
}

/// `SSH_AUTH_SOCK`, when it names a socket: the socket itself is bound (not its directory, which
/// may hold other sockets) and the variable passed through.
fn forward_ssh_agent(host: &HostView, extras: &mut Extras) {
    let Some(sock) = host.path_var("SSH_AUTH_SOCK") else {
        return;
    };
    if host.state(&sock) != PathState::Other {
        extras.warnings.push(format!(
            "tool git: SSH_AUTH_SOCK={} is not a socket; the SSH agent is not forwarded",
            sock.display()
        ));
        return;
    }
    extras.fixed_mounts.push(ToolMount {
        tool: "git".into(),
        source: sock.clone(),
        target: sock.clone(),
        mode: ToolMountMode::Readwrite,
        is_dir: false,
    });
    extras
        .env
        .push(("SSH_AUTH_SOCK".into(), sock.to_string_lossy().into_owned()));
}
