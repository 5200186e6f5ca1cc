//! git: how much of the repository and of the host's git setup the sandbox gets, per
//! `[tools.git] mode`:
//!
//! - `readonly` (default): `.git` read-only; a generated gitconfig with the host's resolved
//!   identity, excludes and attributes; no credentials, SSH or GPG.
//! - `readwrite`: `.git` writable; the same gitconfig plus signing settings; `~/.ssh`, `~/.gnupg`,
//!   `~/.git-credentials` read-only; the SSH agent socket forwarded.
//! - `disabled`: no git config; `.git` writable except `.git/config`.
//!
//! A writable `.git` is still mounted onto itself, so it is a mount point the sandbox cannot
//! rename or replace.
//!
//! In every mode `.git/hooks` stays read-only unless `allow_hooks = true`: a hook planted by the
//! agent would run on the host the next time the developer uses git. [`guard`] does the same for
//! program-running keys written to `.git/config`.

pub mod guard;
pub mod identity;
pub mod linked;

use std::path::Path;

use airlock_sandbox::{ToolMount, ToolMountMode};

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
        help: "readonly: .git read-only, identity only; readwrite: commits, SSH/GPG keys read-only, \
               SSH agent; disabled: no git config, .git writable except config and hooks",
    },
    KeySpec {
        name: "allow_hooks",
        kind: KeyKind::Bool,
        default: "false",
        help: "let the sandbox write .git/hooks (hooks run on your host the next time you use git)",
    },
    KeySpec {
        name: "trust_config_changes",
        kind: KeyKind::Bool,
        default: "false",
        help: "keep program-running .git/config keys (core.fsmonitor, alias.x = !cmd, ...) the \
               sandbox added, instead of reverting them at exit",
    },
];

/// Whether a launch with these settings should run [`guard::guard_git_config`]: only `readwrite`
/// leaves `.git/config` writable, and `trust_config_changes` opts out.
pub fn wants_config_guard(settings: &crate::Settings) -> bool {
    let git = settings.tool("git");
    git.enabled && mode(&git) == "readwrite" && !git.flag("trust_config_changes", false)
}

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
        repository_mounts(ctx, mode, &mut extras);
        if mode == "disabled" {
            return extras;
        }
        let signing = mode == "readwrite";
        match ctx.host.find_binary("git") {
            Some(git) => identity::contribute(ctx.host, &git, ctx.project, signing, &mut extras),
            None => extras.warnings.push(
                "tool git: no git on PATH to read your identity from; commits inside need --author"
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

/// `.git`, `.git/hooks` and `.git/config` per mode. For a linked worktree or a submodule, whose
/// `.git` is a file, the git dir it names is what is mounted: the main repository's, or the
/// submodule's under the superproject's `.git/modules` (see [`linked`]). A `.git` file is mounted
/// read-only onto itself: a sandbox that could rewrite it could point the host's git at a git dir
/// of its own making, hooks included.
fn repository_mounts(ctx: &ToolContext, mode: &str, extras: &mut Extras) {
    let repository = linked::repository(ctx.project);
    if repository.is_git_file() {
        extras
            .fixed_mounts
            .push(readonly(&ctx.project.join(".git"), false));
    }
    let (git_dir, worktree_own) = match repository {
        linked::Repository::None => return,
        linked::Repository::Dir(dir) | linked::Repository::Submodule(dir) => (dir, None),
        linked::Repository::Worktree { common, own } => (common, Some(own)),
        linked::Repository::Unlinked(reason) => {
            extras.warnings.push(format!(
                "tool git: {reason}; no repository is mounted, so git inside finds none here"
            ));
            return;
        }
    };
    if mode == "readonly" {
        extras.fixed_mounts.push(readonly(&git_dir, true));
        return;
    }
    // Writable, but a mount point of its own: the sandbox cannot rename `.git` away and put a
    // repository with its own hooks and config in its place.
    extras.fixed_mounts.push(ToolMount {
        mode: ToolMountMode::Readwrite,
        ..readonly(&git_dir, true)
    });
    if !ctx.config.flag("allow_hooks", false) {
        let hooks = git_dir.join("hooks");
        // A read-only mount needs the directory; git itself creates it on init, and an empty one
        // changes nothing for git on the host.
        if !ctx.dry_run
            && !hooks.exists()
            && let Err(e) = std::fs::create_dir(&hooks)
        {
            extras.warnings.push(format!(
                "tool git: cannot create {} ({e}) to mount it read-only; hooks written inside would run on your host",
                hooks.display()
            ));
        }
        if ctx.host.state(&hooks) == PathState::Dir {
            extras.fixed_mounts.push(readonly(&hooks, true));
        }
    }
    let config = git_dir.join("config");
    if mode == "disabled" && ctx.host.state(&config) == PathState::File {
        extras.fixed_mounts.push(readonly(&config, false));
    }
    // Read once, only to decide whether a missing `config.worktree` must be created.
    let mentions_extension = std::fs::read(&config).is_ok_and(|bytes| {
        String::from_utf8_lossy(&bytes)
            .to_ascii_lowercase()
            .contains("worktreeconfig")
    });
    for dir in std::iter::once(&git_dir).chain(worktree_own.as_ref()) {
        worktree_config_mount(ctx, dir, mentions_extension, extras);
    }
}

/// `<dir>/config.worktree` read-only where the git dir is writable. git reads it when
/// `extensions.worktreeConfig` is on, and keys written there (`core.fsmonitor`, ...) would run on
/// the host like those in `.git/config`, out of the guard's sight. When the file is missing but
/// the config mentions the extension at all (a plain text check: no git run at launch), an empty
/// one is created first, as for hooks; enabling the extension from inside is reverted by the guard.
fn worktree_config_mount(
    ctx: &ToolContext,
    dir: &Path,
    mentions_extension: bool,
    extras: &mut Extras,
) {
    let path = dir.join("config.worktree");
    if !ctx.dry_run
        && mentions_extension
        && ctx.host.state(&path) == PathState::Missing
        && let Err(e) = std::fs::File::create_new(&path)
    {
        extras.warnings.push(format!(
            "tool git: cannot create {} ({e}) to mount it read-only; git config written there \
             inside would apply on your host",
            path.display()
        ));
    }
    if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
        extras.fixed_mounts.push(readonly(&path, false));
    }
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
