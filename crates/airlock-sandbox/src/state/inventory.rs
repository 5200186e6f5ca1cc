//! The inventory of state roots for `airlock sandboxes`: [`list`] reports every root with its project,
//! size, last use and live sessions; [`prune`] removes the roots its [`PruneOptions`] select, never one
//! that a session holds. Both read `sandbox.json` and `last-used` without locks and lock only to remove.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Serialize, Serializer};

use super::files::{disk_usage, remove_tree};
use super::locks::{count_live_sessions, open_name_lock, try_flock};
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
/// `project` is the canonical path, as [`super::open_session`] was given it.
pub fn lock_idle(
    sandboxes_dir: &Path,
    locks_dir: &Path,
    project: &Path,
) -> Result<Option<IdleLock>, StateError> {
    let name = super::sandbox_name(project);
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

/// What a root records about itself, read without locks.
struct RootFacts {
    project: Option<PathBuf>,
    last_used: Option<SystemTime>,
}

impl RootFacts {
    fn project_exists(&self) -> bool {
        // A project we cannot even stat (permissions, a dead mount) counts as existing: prune must not
        // delete a home because a drive is unmounted or unreadable for a moment.
        self.project
            .as_ref()
            .is_some_and(|p| p.try_exists().unwrap_or(true))
    }

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
mod tests {
    use std::fs;
    use std::time::{Duration, SystemTime};

    use super::super::sandbox_name;
    use super::super::tests::{DAY, Fixture, set_last_used};
    use super::*;

    #[test]
    fn list_reports_fields() {
        let f = Fixture::new();
        assert!(f.list().is_empty(), "a missing sandboxes dir lists nothing");
        let kept = f.project("kept");
        let gone = f.project("gone");
        let a = f.open(&kept);
        fs::write(a.home.join("blob"), vec![7u8; 64 * 1024]).unwrap();
        f.open(&gone).close(false).unwrap();
        fs::remove_dir(&gone).unwrap();
        fs::create_dir_all(f.sandboxes.join("stray")).unwrap();
        fs::write(f.sandboxes.join("not-a-dir"), b"").unwrap();

        let infos = f.list();
        let names: Vec<&str> = infos.iter().map(|i| i.name.as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        assert_eq!(infos.len(), 3);

        let info = infos.iter().find(|i| i.name == a.name).unwrap();
        assert_eq!(info.path, a.dir);
        assert_eq!(info.project.as_deref(), Some(kept.as_path()));
        assert!(info.project_exists);
        assert!(info.size_bytes >= 64 * 1024, "{}", info.size_bytes);
        let age = SystemTime::now()
            .duration_since(info.last_used.unwrap())
            .unwrap();
        assert!(age < Duration::from_secs(60));
        assert_eq!(info.live_sessions, 1);

        let info = infos
            .iter()
            .find(|i| i.name == sandbox_name(&gone))
            .unwrap();
        assert_eq!(info.project.as_deref(), Some(gone.as_path()));
        assert!(!info.project_exists);
        assert_eq!(info.live_sessions, 0);

        let stray = infos.iter().find(|i| i.name == "stray").unwrap();
        assert_eq!(
            (stray.project.as_ref(), stray.project_exists),
            (None, false)
        );
        assert_eq!((stray.last_used, stray.live_sessions), (None, 0));

        let json = serde_json::to_value(stray).unwrap();
        let keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "last_used_unix",
                "live_sessions",
                "name",
                "oom_killed",
                "path",
                "project",
                "project_exists",
                "size_bytes"
            ]
        );
        let json = serde_json::to_value(&infos[0]).unwrap();
        assert!(json["last_used_unix"].as_u64().unwrap() > 1_600_000_000);
        a.close(false).unwrap();
    }

    #[test]
    fn prune_without_filter_selects_nothing() {
        let f = Fixture::new();
        let gone = f.project("gone");
        f.open(&gone).close(false).unwrap();
        fs::remove_dir(&gone).unwrap();
        assert!(f.prune(PruneOptions::default()).is_empty());
        assert_eq!(f.list().len(), 1);
    }

    #[test]
    fn prune_orphaned() {
        let f = Fixture::new();
        let kept = f.project("kept");
        let gone = f.project("gone");
        f.open(&kept).close(false).unwrap();
        f.open(&gone).close(false).unwrap();
        fs::remove_dir(&gone).unwrap();
        fs::create_dir_all(f.sandboxes.join("no-metadata")).unwrap();

        let results = f.prune(PruneOptions {
            orphaned: true,
            ..PruneOptions::default()
        });
        let mut removed: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
        removed.sort();
        let gone_name = sandbox_name(&gone);
        assert_eq!(removed, [gone_name.as_str(), "no-metadata"]);
        assert!(results.iter().all(|r| r.action == PruneAction::Removed));
        let left: Vec<String> = f.list().into_iter().map(|i| i.name).collect();
        assert_eq!(left, [sandbox_name(&kept)]);
    }

    #[test]
    fn prune_older_than_and_dry_run() {
        let f = Fixture::new();
        let old = f.open(&f.project("old"));
        let new = f.open(&f.project("new"));
        let (old_name, old_dir, new_dir) = (old.name.clone(), old.dir.clone(), new.dir.clone());
        old.close(false).unwrap();
        new.close(false).unwrap();
        set_last_used(&old_dir, 10 * DAY);
        set_last_used(&new_dir, DAY);
        let options = PruneOptions {
            older_than: Some(5 * DAY),
            dry_run: true,
            ..PruneOptions::default()
        };

        let results = f.prune(options.clone());
        assert_eq!(results.len(), 1);
        assert_eq!(results[0].name, old_name);
        assert_eq!(results[0].action, PruneAction::WouldRemove);
        assert!(results[0].size_bytes > 0);
        assert!(old_dir.is_dir(), "dry run removes nothing");

        let results = f.prune(PruneOptions {
            dry_run: false,
            ..options
        });
        assert_eq!(results[0].action, PruneAction::Removed);
        assert!(!old_dir.exists());
        assert!(new_dir.is_dir());
    }

    #[test]
    fn prune_by_name_removes_only_that_root() {
        let f = Fixture::new();
        let (a, b) = (f.project("a"), f.project("b"));
        for p in [&a, &b] {
            f.open(p).close(false).unwrap();
        }
        let results = f.prune(PruneOptions {
            names: vec![sandbox_name(&a)],
            ..PruneOptions::default()
        });
        let names: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, [sandbox_name(&a)]);
        assert_eq!(results[0].action, PruneAction::Removed);
        assert!(f.sandboxes.join(sandbox_name(&b)).is_dir());
    }

    #[test]
    fn prune_filters_combine_with_and() {
        let f = Fixture::new();
        let gone_recent = f.project("gone-recent");
        let gone_old = f.project("gone-old");
        let alive_old = f.project("alive-old");
        for p in [&gone_recent, &gone_old, &alive_old] {
            let s = f.open(p);
            let dir = s.dir.clone();
            s.close(false).unwrap();
            if p != &gone_recent {
                set_last_used(&dir, 40 * DAY);
            }
        }
        fs::remove_dir(&gone_recent).unwrap();
        fs::remove_dir(&gone_old).unwrap();
        let results = f.prune(PruneOptions {
            orphaned: true,
            older_than: Some(30 * DAY),
            dry_run: true,
            ..PruneOptions::default()
        });
        let names: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, [sandbox_name(&gone_old)]);
    }

    #[test]
    fn list_without_sizes_skips_the_walk() {
        let f = Fixture::new();
        let s = f.open(&f.project("big"));
        fs::write(s.home.join("blob"), vec![7u8; 64 * 1024]).unwrap();
        s.close(false).unwrap();
        let unused = Path::new("/nonexistent");
        let infos = list_with(&f.sandboxes, unused, &ListOptions { sizes: false }).unwrap();
        assert_eq!((infos.len(), infos[0].size_bytes), (1, 0));
        assert!(f.list()[0].size_bytes >= 64 * 1024);
    }

    #[test]
    fn prune_all_and_keep_the_most_recent() {
        let f = Fixture::new();
        let mut names = Vec::new();
        for (project, ago) in [("a", 3 * DAY), ("b", DAY), ("c", 2 * DAY), ("d", 4 * DAY)] {
            let s = f.open(&f.project(project));
            let (name, dir) = (s.name.clone(), s.dir.clone());
            s.close(false).unwrap();
            set_last_used(&dir, ago);
            names.push(name);
        }
        fs::create_dir_all(f.sandboxes.join("never-used")).unwrap();
        let selected = |options: PruneOptions| -> Vec<String> {
            let mut names: Vec<String> = f.prune(options).into_iter().map(|r| r.name).collect();
            names.sort();
            names
        };
        let dry = PruneOptions {
            dry_run: true,
            ..PruneOptions::default()
        };
        let mut everything = names.clone();
        everything.push("never-used".into());
        everything.sort();
        assert_eq!(
            selected(PruneOptions {
                all: true,
                ..dry.clone()
            }),
            everything
        );
        // b and c are the two used last; a root never used counts as the oldest.
        let mut older = vec![names[0].clone(), names[3].clone(), "never-used".into()];
        older.sort();
        assert_eq!(
            selected(PruneOptions {
                keep: Some(2),
                ..dry.clone()
            }),
            older
        );
        assert_eq!(
            selected(PruneOptions {
                keep: Some(10),
                ..dry.clone()
            }),
            Vec::<String>::new()
        );
        // With --older-than: the two kept are spared, the rest must also be old enough.
        assert_eq!(
            selected(PruneOptions {
                keep: Some(1),
                older_than: Some(2 * DAY + Duration::from_secs(3_600)),
                ..dry.clone()
            }),
            [names[0].clone(), names[3].clone()]
        );
        let results = f.prune(PruneOptions {
            keep: Some(2),
            ..PruneOptions::default()
        });
        assert!(results.iter().all(|r| r.action == PruneAction::Removed));
        let left: Vec<String> = f.list().into_iter().map(|i| i.name).collect();
        assert_eq!(left, [names[1].clone(), names[2].clone()]);
    }

    #[test]
    fn prune_never_removes_a_live_sandbox() {
        let f = Fixture::new();
        let gone = f.project("gone");
        let s = f.open(&gone);
        fs::remove_dir(&gone).unwrap();
        for dry_run in [true, false] {
            let results = f.prune(PruneOptions {
                orphaned: true,
                dry_run,
                ..PruneOptions::default()
            });
            assert_eq!(results.len(), 1);
            assert_eq!(results[0].action, PruneAction::SkippedInUse);
            assert!(s.home.is_dir());
        }
        let dir = s.dir.clone();
        s.close(false).unwrap();
        // Other tests in this process fork (the seccomp and launch tests): a child forked while
        // the session was open holds a copy of its lock until it exits, so the lock may stay
        // taken for a few milliseconds after close. Prune only removes once nothing holds it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let results = loop {
            let results = f.prune(PruneOptions {
                orphaned: true,
                ..PruneOptions::default()
            });
            if results[0].action != PruneAction::SkippedInUse
                || std::time::Instant::now() > deadline
            {
                break results;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        assert_eq!(results[0].action, PruneAction::Removed);
        assert!(!dir.exists());
    }
}
