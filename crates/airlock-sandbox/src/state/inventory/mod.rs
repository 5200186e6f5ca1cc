//! The inventory of state roots for `airlock sandboxes`: [`list`] reports every root with its project,
//! size, last use and live sessions; [`prune`] removes the roots its [`PruneOptions`] select, never one
//! that a session holds. Both read `sandbox.json` and `last-used` without locks and lock only to remove.

mod prune;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Serialize, Serializer};

pub use prune::{IdleLock, PruneAction, PruneOptions, PruneResult, lock_idle, prune};

use super::files::disk_usage;
use super::locks::count_live_sessions;
use super::{LAST_USED_FILE, METADATA_FILE, Metadata, SESSIONS_DIR, StateError, io_err, unix_secs};

/// One sandbox state root, as `airlock sandboxes list` shows it (`--json` prints these fields).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxInfo {
    /// The sandbox name, also the directory name.
    pub name: String,
    /// The state root.
    pub path: PathBuf,
    /// The project recorded in `sandbox.json`; `None` when the file is missing or unreadable.
    pub project: Option<PathBuf>,
    /// Whether the recorded project still exists (`false` when `project` is `None`).
    pub project_exists: bool,
    /// Disk usage of the root in bytes (allocated blocks, symlinks not followed, hard links once).
    pub size_bytes: u64,
    /// The mtime of `last-used` (last session open or close); JSON: `last_used_unix`, unix seconds.
    #[serde(rename = "last_used_unix", serialize_with = "serialize_unix_secs")]
    pub last_used: Option<SystemTime>,
    /// Sessions whose process is still alive.
    pub live_sessions: u32,
    /// Whether the last session ended with processes killed at `[sandbox.resources] memory`.
    pub oom_killed: bool,
}

pub(super) fn serialize_unix_secs<S: Serializer>(
    time: &Option<SystemTime>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match time {
        Some(t) => s.serialize_some(&unix_secs(*t)),
        None => s.serialize_none(),
    }
}

/// Every state root under `sandboxes_dir`, sorted by name. Removes stale session files on the way.
pub fn list(sandboxes_dir: &Path, locks_dir: &Path) -> Result<Vec<SandboxInfo>, StateError> {
    list_with(sandboxes_dir, locks_dir, &ListOptions { sizes: true })
}

/// What [`list_with`] measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListOptions {
    /// Walk each root for its disk usage; without, `size_bytes` is 0 (a big home takes a while).
    pub sizes: bool,
}

/// [`list`], measuring what `options` asks for.
pub fn list_with(
    sandboxes_dir: &Path,
    _locks_dir: &Path,
    options: &ListOptions,
) -> Result<Vec<SandboxInfo>, StateError> {
    let mut infos = Vec::new();
    for (name, dir) in sandbox_dirs(sandboxes_dir)? {
        let facts = inspect(&dir);
        // A root removed while we walked it (a concurrent prune) is simply not listed.
        if !dir.is_dir() {
            continue;
        }
        infos.push(SandboxInfo {
            size_bytes: if options.sizes { disk_usage(&dir) } else { 0 },
            live_sessions: count_live_sessions(&dir.join(SESSIONS_DIR)),
            oom_killed: dir.join(super::OOM_MARKER).exists(),
            name,
            path: dir,
            project_exists: facts.project_exists(),
            project: facts.project,
            last_used: facts.last_used,
        });
    }
    Ok(infos)
}

/// What a root records about itself, read without locks.
struct RootFacts {
    pub(super) project: Option<PathBuf>,
    pub(super) last_used: Option<SystemTime>,
}

impl RootFacts {
    fn project_exists(&self) -> bool {
        // A project we cannot even stat (permissions, a dead mount) counts as existing: prune must not
        // delete a home because a drive is unmounted or unreadable for a moment.
        self.project
            .as_ref()
            .is_some_and(|p| p.try_exists().unwrap_or(true))
    }
}

fn inspect(dir: &Path) -> RootFacts {
    let project = fs::read(dir.join(METADATA_FILE))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Metadata>(&bytes).ok())
        .map(|m| m.project);
    let last_used = fs::symlink_metadata(dir.join(LAST_USED_FILE))
        .and_then(|m| m.modified())
        .ok();
    RootFacts { project, last_used }
}

/// The real directories directly under `sandboxes_dir` with UTF-8 names, sorted; none if it is missing.
fn sandbox_dirs(sandboxes_dir: &Path) -> Result<Vec<(String, PathBuf)>, StateError> {
    let entries = match fs::read_dir(sandboxes_dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(io_err("read", sandboxes_dir)(err)),
    };
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io_err("read", sandboxes_dir))?;
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if let (true, Ok(name)) = (is_dir, entry.file_name().into_string()) {
            dirs.push((name, entry.path()));
        }
    }
    dirs.sort();
    Ok(dirs)
}

#[cfg(test)]
mod tests;
