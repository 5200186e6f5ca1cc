//! The `.git/config` guard: program-running keys the sandbox adds or changes are reverted at exit.
//!
//! A key such as `core.fsmonitor` or `alias.st = !cmd` written from inside runs a program on the
//! host the next time the developer uses git there. The guard snapshots `.git/config` when the
//! session starts and, at the end, restores the start values of every such key that changed. It
//! reads and writes the file with the host's `git config --file` (git's own parser and writer),
//! so quoting, sections and subsections are handled exactly as git handles them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `.git/config` as it was when the session started.
#[derive(Debug)]
pub struct GitConfigGuard {
    config: PathBuf,
    git: PathBuf,
    /// The raw file, to restore it wholesale when git can no longer parse it.
    bytes: Option<Vec<u8>>,
    /// Every key with all its values, in order.
    entries: Option<BTreeMap<String, Vec<String>>>,
    /// `.git`'s device and inode, to notice a `.git` replaced during the session.
    git_dir_id: Option<(u64, u64)>,
}

/// The device and inode of `path` when it is a real directory (not a symlink).
fn dir_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path).ok()?;
    meta.is_dir().then(|| (meta.dev(), meta.ino()))
}

/// Snapshots the config of the project's repository: `<project>/.git/config`, or for a linked
/// worktree the main repository's (nothing to guard when there is none or no git).
pub fn guard_git_config(project: &Path) -> GitConfigGuard {
    let git_dir = super::linked::repository(project)
        .common_dir()
        .map_or_else(|| project.join(".git"), Path::to_path_buf);
    let config = git_dir.join("config");
    let git = find_git().unwrap_or_else(|| PathBuf::from("git"));
    let git_dir_id = dir_id(&git_dir);
    let regular = std::fs::symlink_metadata(&config).is_ok_and(|m| m.is_file());
    let bytes = regular.then(|| std::fs::read(&config).ok()).flatten();
    let entries = bytes.as_ref().and_then(|_| list(&git, &config).ok());
    GitConfigGuard {
        config,
        git,
        bytes,
        entries: entries.filter(|_| git_dir_id.is_some()),
        git_dir_id,
    }
}

/// Whether a key (as `git config --list` prints it: section and name lower-cased) with this value
/// makes git run a program, or read more config from a file the sandbox could write
/// (`include.path`, and `extensions.worktreeConfig`, which turns on `.git/config.worktree`).
pub fn runs_program(key: &str, value: &str) -> bool {
    let key = key.to_ascii_lowercase();
    let (section, rest) = key.split_once('.').unwrap_or((key.as_str(), ""));
    let name = rest.rsplit('.').next().unwrap_or("");
    let has_sub = rest.contains('.');
    match section {
        "core" => matches!(
            name,
            "fsmonitor"
                | "hookspath"
                | "sshcommand"
                | "pager"
                | "editor"
                | "askpass"
                | "gitproxy"
                | "alternaterefscommand"
        ),
        "alias" => value.trim_start().starts_with('!'),
        "filter" => has_sub && matches!(name, "clean" | "smudge" | "process"),
        "diff" => matches!(name, "textconv" | "command" | "external"),
        "merge" => has_sub && name == "driver",
        "mergetool" | "difftool" | "browser" | "man" => has_sub && matches!(name, "cmd" | "path"),
        "credential" => name == "helper",
        "gpg" => matches!(name, "program" | "defaultkeycommand"),
        "sequence" => name == "editor",
        "include" => name == "path",
        "includeif" => has_sub && name == "path",
        "pager" | "interactive" => true,
        "uploadpack" => name == "packobjectshook",
        "remote" => has_sub && matches!(name, "uploadpack" | "receivepack" | "vcs"),
        "submodule" => has_sub && name == "update" && value.trim_start().starts_with('!'),
        "sendemail" => matches!(name, "smtpserver" | "sendmailcmd" | "tocmd" | "cccmd"),
        "trailer" => has_sub && matches!(name, "command" | "cmd"),
        "web" => name == "browser",
        "protocol" => has_sub && name == "allow",
        "extensions" => name == "worktreeconfig",
        _ => false,
    }
}

impl GitConfigGuard {
    /// Reverts program-running keys added or changed since the snapshot; one message per key.
    pub fn finish(self) -> Vec<String> {
        let (Some(bytes), Some(before)) = (&self.bytes, &self.entries) else {
            return Vec::new();
        };
        let shown = self.config.display();
        let git_dir = self.config.parent().unwrap_or(&self.config);
        if dir_id(git_dir) != self.git_dir_id {
            // Whatever is there now is not the repository we snapshotted: touching it could write
            // through a symlink to a host file. Say so and leave it alone.
            return vec![format!(
                "{} was replaced during the session; airlock left it untouched: inspect it (hooks, \
                 config) before using git on this project",
                git_dir.display()
            )];
        }
        let regular = std::fs::symlink_metadata(&self.config).is_ok_and(|m| m.is_file());
        let after = if regular {
            list(&self.git, &self.config).ok()
        } else {
            None
        };
        let Some(after) = after else {
            return match self.restore(bytes) {
                Ok(()) => vec![format!(
                    "restored {shown} as it was before the session: it was replaced or can no longer be read by git"
                )],
                Err(e) => vec![format!(
                    "could not restore {shown} ({e}); inspect it before using git on this project"
                )],
            };
        };
        let mut messages = Vec::new();
        for (key, values) in &after {
            let old = before.get(key);
            if old == Some(values) || !values.iter().any(|v| runs_program(key, v)) {
                continue;
            }
            match self.reset_key(key, old.map(Vec::as_slice).unwrap_or(&[])) {
                Ok(()) => messages.push(format!(
                    "reverted {key} in {shown}: the sandbox {} it, and it makes git run a program on your host; \
                     set [tools.git] trust_config_changes = true to keep such changes",
                    if old.is_some() { "changed" } else { "added" }
                )),
                Err(e) => messages.push(format!(
                    "could not revert {key} in {shown} ({e}); remove it before using git on this project"
                )),
            }
        }
        messages
    }

    fn restore(&self, bytes: &[u8]) -> std::io::Result<()> {
        if let Ok(meta) = std::fs::symlink_metadata(&self.config) {
            if meta.is_dir() {
                std::fs::remove_dir_all(&self.config)?;
            } else {
                std::fs::remove_file(&self.config)?;
            }
        }
        std::fs::write(&self.config, bytes)
    }

    /// Sets `key` back to exactly `values` (none: removed).
    fn reset_key(&self, key: &str, values: &[String]) -> Result<(), String> {
        self.git_config(&["--unset-all", key])?;
        for value in values {
            self.git_config(&["--add", key, value])?;
        }
        Ok(())
    }

    fn git_config(&self, args: &[&str]) -> Result<(), String> {
        let out = git_command(&self.git, &self.config)
            .args(args)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.git.display()))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
        }
    }
}

/// `git config --file <config>` with nothing of the environment that could redirect it.
fn git_command(git: &Path, config: &Path) -> Command {
    let mut cmd = Command::new(git);
    cmd.arg("config")
        .arg("--file")
        .arg(config)
        .env_remove("GIT_CONFIG")
        .env_remove("GIT_CONFIG_PARAMETERS")
        .env_remove("GIT_CONFIG_COUNT")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Every key of the file (includes not followed) with its values in order.
fn list(git: &Path, config: &Path) -> Result<BTreeMap<String, Vec<String>>, String> {
    let out = git_command(git, config)
        .args(["--null", "--list"])
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
    }
    let mut entries: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for entry in String::from_utf8_lossy(&out.stdout).split('\0') {
        if entry.is_empty() {
            continue;
        }
        let (key, value) = entry.split_once('\n').unwrap_or((entry, "true"));
        entries
            .entry(key.to_owned())
            .or_default()
            .push(value.to_owned());
    }
    Ok(entries)
}

/// The host's git, from this process's `PATH`.
fn find_git() -> Option<PathBuf> {
    let path = std::env::var("PATH").ok()?;
    path.split(':')
        .map(|dir| Path::new(dir).join("git"))
        .find(|p| p.is_file())
}
