//! [`prune`]: the state roots an `airlock sandboxes prune` selects, removed only under their
//! EXCLUSIVE name lock; and [`lock_idle`], the lock that lets a project's state go with it.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::super::files::{disk_usage, remove_tree};
use super::super::locks::{count_live_sessions, open_name_lock, try_flock};
use super::super::{SESSIONS_DIR, StateError, io_err};
use super::{RootFacts, inspect, sandbox_dirs};

/// Which sandboxes [`prune`] removes.
///
/// The filters combine with AND: each one given narrows the selection, so `orphaned` with
/// `older_than` removes orphaned sandboxes that were also not used for that long, and `keep` spares
/// the most recently used ones from whatever the others select. With no filter at all nothing is
/// selected (the CLI asks for one). A sandbox with a live session is never removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PruneOptions {
    /// Select sandboxes whose project directory is gone or that have no readable `sandbox.json`.
    pub orphaned: bool,
    /// Select sandboxes last used longer ago than this; one without `last-used` is never selected
    /// by age (its age is unknown).
    pub older_than: Option<Duration>,
    /// Select every sandbox.
    pub all: bool,
    /// Select all but the `keep` most recently used sandboxes (one without `last-used` counts as
    /// the least recent; ties go by name).
    pub keep: Option<usize>,
    /// Select only sandboxes of these names (e.g. the one state root a tool of airlock's own
    /// created); empty: no restriction by name.
    pub names: Vec<String>,
    /// Report what would be removed, remove nothing.
    pub dry_run: bool,
}

impl PruneOptions {
    /// Whether any selecting filter is set.
    pub fn has_filter(&self) -> bool {
        self.orphaned
            || self.older_than.is_some()
            || self.all
            || self.keep.is_some()
            || !self.names.is_empty()
    }
}

/// What [`prune`] did with one selected sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PruneAction {
    Removed,
    WouldRemove,
    /// A session holds the sandbox.
    SkippedInUse,
    /// Removal was tried and failed (the message says why).
    Failed(String),
}

/// One sandbox selected by [`prune`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PruneResult {
    pub name: String,
    pub path: PathBuf,
    pub size_bytes: u64,
    pub action: PruneAction,
}

/// Removes (or, with `dry_run`, reports) the sandboxes selected by `options`; see [`PruneOptions`].
///
/// Each selected root is removed only while holding its EXCLUSIVE name lock (taken non-blocking), and
/// the selection is checked again under that lock, so a sandbox in use is reported as skipped.
pub fn prune(
    sandboxes_dir: &Path,
    locks_dir: &Path,
    options: &PruneOptions,
) -> Result<Vec<PruneResult>, StateError> {
    let mut results = Vec::new();
    if !options.has_filter() {
        return Ok(results);
    }
    let dirs = sandbox_dirs(sandboxes_dir)?;
    let kept = most_recently_used(&dirs, options.keep.unwrap_or(0));
    for (name, dir) in dirs {
        let first = inspect(&dir);
        let named = options.names.is_empty() || options.names.contains(&name);
        if !named || kept.contains(&name) || !first.selected_by(options, SystemTime::now()) {
            continue;
        }
        let (lock_path, lock) = open_name_lock(locks_dir, &name)?;
        let exclusive = try_flock(&lock, libc::LOCK_EX).map_err(io_err("lock", &lock_path))?;
        let size_bytes = disk_usage(&dir);
        let action = if !exclusive || count_live_sessions(&dir.join(SESSIONS_DIR)) > 0 {
            PruneAction::SkippedInUse
        } else if !inspect(&dir).selected_by(options, SystemTime::now())
            || (options.keep.is_some() && inspect(&dir).last_used != first.last_used)
        {
            continue; // used again between the first look and the lock
        } else if options.dry_run {
            PruneAction::WouldRemove
        } else {
            match remove_tree(&dir) {
                Ok(()) => PruneAction::Removed,
                Err(err) => PruneAction::Failed(format!("cannot remove {}: {err}", dir.display())),
            }
        };
        drop(lock);
        results.push(PruneResult {
            name,
            path: dir,
            size_bytes,
            action,
        });
    }
    Ok(results)
}

/// A project's EXCLUSIVE name lock: while it is held no session of the project runs and none can
/// start (`open_session` waits), so the project's files and state can be removed together.
#[derive(Debug)]
pub struct IdleLock {
    _lock: fs::File,
    /// The project's state root, `<sandboxes_dir>/<name>` (it may not exist).
    pub dir: PathBuf,
}

/// Takes `project`'s EXCLUSIVE name lock without waiting; `None` while a session of it runs.
/// `project` is the canonical path, as [`super::super::open_session`] was given it.
pub fn lock_idle(
    sandboxes_dir: &Path,
    locks_dir: &Path,
    project: &Path,
) -> Result<Option<IdleLock>, StateError> {
    let name = super::super::sandbox_name(project);
    let (lock_path, lock) = open_name_lock(locks_dir, &name)?;
    let dir = sandboxes_dir.join(&name);
    let exclusive = try_flock(&lock, libc::LOCK_EX).map_err(io_err("lock", &lock_path))?;
    if !exclusive || count_live_sessions(&dir.join(SESSIONS_DIR)) > 0 {
        return Ok(None);
    }
    Ok(Some(IdleLock { _lock: lock, dir }))
}

impl IdleLock {
    /// Removes the project's state root; a missing one is no error.
    pub fn remove_state(&self) -> Result<(), StateError> {
        remove_tree(&self.dir).map_err(io_err("remove the sandbox state", &self.dir))
    }
}

/// The names of the `n` roots of `dirs` used last.
fn most_recently_used(dirs: &[(String, PathBuf)], n: usize) -> Vec<String> {
    if n == 0 {
        return Vec::new();
    }
    let mut by_use: Vec<(Option<SystemTime>, &String)> = dirs
        .iter()
        .map(|(name, dir)| (inspect(dir).last_used, name))
        .collect();
    // Latest first; `None` (never recorded) sorts below every time.
    by_use.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    by_use
        .into_iter()
        .take(n)
        .map(|(_, name)| name.clone())
        .collect()
}

impl RootFacts {
    fn selected_by(&self, options: &PruneOptions, now: SystemTime) -> bool {
        let orphan_ok = !options.orphaned || !self.project_exists();
        let age_ok = match options.older_than {
            None => true,
            Some(limit) => self
                .last_used
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|age| age > limit),
        };
        options.has_filter() && orphan_ok && age_ok
    }
}
