//! Per-project state roots (`<sandboxes_dir>/<name>/`) and the session locks that guard them.
//!
//! Locking protocol, so that concurrent `airlock run`s, `sandboxes list` and `sandboxes prune` never
//! remove a root that is in use:
//! - `<locks_dir>/<name>.lock`: every session holds a SHARED `flock` on it for its whole life; removing
//!   the root needs the EXCLUSIVE lock, taken non-blocking. The lock file is never deleted, so there is
//!   no open/unlink race on it. It lives in the host-trusted state dir, outside every sandbox.
//! - `<root>/sessions/<pid>`: held with an EXCLUSIVE `flock` by its session, so live sessions can be
//!   counted; a session file whose lock can be taken belongs to a dead process and is removed.
//!
//! A root holds `home/` (the synthetic home), `sandbox.json` (`{"project": "<abs path>", "created":
//! <unix secs>}`), `last-used` (its mtime is the last open or close) and `sessions/`.

use std::collections::HashSet;
use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize, Serializer};
use sha2::{Digest, Sha256};

const METADATA_FILE: &str = "sandbox.json";
const LAST_USED_FILE: &str = "last-used";
const SESSIONS_DIR: &str = "sessions";
const HOME_DIR: &str = "home";
/// Long enough to tell projects apart, short enough that `<name>.lock` stays far below NAME_MAX.
const MAX_BASENAME_CHARS: usize = 64;
/// How many `<pid>.<n>` session file names to try before giving up (see `create_session_file`).
const SESSION_FILE_ATTEMPTS: u32 = 64;

/// What went wrong with a sandbox state root or its locks.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error(
        "project path {path:?} is not absolute; pass the canonical path of the project directory"
    )]
    ProjectNotAbsolute { path: PathBuf },
    #[error(
        "project path {path:?} has no directory name (is it `/`?); run airlock inside a project directory"
    )]
    ProjectHasNoName { path: PathBuf },
    #[error(
        "project path {path:?} is not valid UTF-8, which sandbox.json cannot record; rename the directory"
    )]
    ProjectNotUtf8 { path: PathBuf },
    #[error(
        "sandbox state {dir} belongs to project {existing}, not {requested}: both paths hash to the name \
         {name:?}; move or rename one of the two projects (or remove {dir} if {existing} is no longer used)"
    )]
    Collision {
        name: String,
        dir: PathBuf,
        existing: PathBuf,
        requested: PathBuf,
    },
    #[error(
        "{path} is not valid sandbox metadata ({source}); remove the file, or remove the whole sandbox with \
         `airlock sandboxes prune --orphaned`"
    )]
    BadMetadata {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path} exists but is not a directory; move it out of the way")]
    NotADirectory { path: PathBuf },
    #[error(
        "no free session file name in {dir} after {SESSION_FILE_ATTEMPTS} attempts; remove stale files there"
    )]
    NoSessionSlot { dir: PathBuf },
    #[error(
        "cannot {action} {path}: {source}; check that it is yours, writable and on a disk with free space"
    )]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn io_err<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> StateError + 'a {
    move |source| StateError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// The sandbox name of a project: `<basename>-<first 8 hex digits of sha256(path bytes)>`.
///
/// `project` should be the canonical absolute path (the hash is over its exact bytes). The basename
/// is sanitised to `[A-Za-z0-9._-]` (anything else becomes `_`) and cut to 64 characters; a path
/// without a basename (`/`) gives `_`, but [`open_session`] refuses such a project.
pub fn sandbox_name(project: &Path) -> String {
    let digest = Sha256::digest(project.as_os_str().as_bytes());
    let hex: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    let base: String = match project.file_name() {
        Some(name) => name
            .to_string_lossy()
            .chars()
            .take(MAX_BASENAME_CHARS)
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    c
                } else {
                    '_'
                }
            })
            .collect(),
        None => "_".to_string(),
    };
    format!("{base}-{hex}")
}

/// One open session on a project's state root; hold it for as long as the sandbox runs.
///
/// Dropping it without [`Session::close`] removes the session file and releases the locks, but never
/// removes the root.
#[derive(Debug)]
pub struct Session {
    /// The sandbox name (`<basename>-<hash>`).
    pub name: String,
    /// The state root, `<sandboxes_dir>/<name>`.
    pub dir: PathBuf,
    /// The synthetic home, `<dir>/home`.
    pub home: PathBuf,
    /// Whether this session created the state root (a launch that fails then passes it to `close`).
    pub created_now: bool,
    /// SHARED for the session's life; the root is removed only by whoever gets it EXCLUSIVE.
    name_lock: File,
    lock_path: PathBuf,
    /// `sessions/<pid>[.<n>]`, EXCLUSIVELY locked; `None` once removed.
    session_file: Option<(PathBuf, File)>,
    /// The process that opened the session: a forked child that drops its copy must not clean up.
    owner_pid: u32,
}

/// What [`Session::close`] did with the state root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseOutcome {
    /// Removal was not asked for; the root stays for the next session.
    Kept,
    /// Removal was asked for and no other session held the sandbox: the root is gone.
    Removed,
    /// Removal was asked for but another session is using the sandbox; the root stays.
    KeptInUse,
}

/// Opens a session on `project`'s state root, creating the root if it is missing.
///
/// Takes the SHARED name lock (waiting only while a removal of this root is in progress), creates
/// `<sandboxes_dir>/<name>/` and `home/` (0700), records `sandbox.json` on first use, touches
/// `last-used` and registers `sessions/<pid>`. Safe to call concurrently for the same project, from
/// several processes or threads. `project` must be the canonical absolute project directory.
pub fn open_session(
    sandboxes_dir: &Path,
    locks_dir: &Path,
    project: &Path,
) -> Result<Session, StateError> {
    if !project.is_absolute() {
        return Err(StateError::ProjectNotAbsolute {
            path: project.to_path_buf(),
        });
    }
    if project.file_name().is_none() {
        return Err(StateError::ProjectHasNoName {
            path: project.to_path_buf(),
        });
    }
    if project.to_str().is_none() {
        return Err(StateError::ProjectNotUtf8 {
            path: project.to_path_buf(),
        });
    }
    let name = sandbox_name(project);
    let (lock_path, name_lock) = open_name_lock(locks_dir, &name)?;
    flock(&name_lock, libc::LOCK_SH).map_err(io_err("lock", &lock_path))?;

    create_private_dir_all(sandboxes_dir)?;
    let dir = sandboxes_dir.join(&name);
    let created_now = create_private_dir(&dir)?;
    let mut session = Session {
        home: dir.join(HOME_DIR),
        name,
        dir,
        created_now,
        name_lock,
        lock_path,
        session_file: None,
        owner_pid: std::process::id(),
    };
    match session.populate(project) {
        Ok(()) => Ok(session),
        Err(err) => {
            // Leave nothing half-created behind; a root that existed before stays as it was.
            let _ = session.close(created_now);
            Err(err)
        }
    }
}

impl Session {
    fn populate(&mut self, project: &Path) -> Result<(), StateError> {
        create_private_dir(&self.home)?;
        record_project(&self.name, &self.dir, project)?;
        touch(&self.dir.join(LAST_USED_FILE))?;
        let sessions = self.dir.join(SESSIONS_DIR);
        create_private_dir(&sessions)?;
        // Tidy up after crashed sessions while we are here; the count itself is not needed.
        let _ = count_live_sessions(&sessions);
        self.session_file = Some(create_session_file(&sessions)?);
        Ok(())
    }

    /// Ends the session: removes its session file and, when `remove` is set, the whole state root,
    /// unless another session still holds the sandbox (then [`CloseOutcome::KeptInUse`]).
    ///
    /// A failed launch calls `close(session.created_now)` so that a root it created is not left behind.
    pub fn close(mut self, remove: bool) -> Result<CloseOutcome, StateError> {
        let unregistered = self.remove_session_file();
        if !remove {
            unregistered?;
            touch(&self.dir.join(LAST_USED_FILE))?;
            return Ok(CloseOutcome::Kept);
        }
        // Converting SHARED to EXCLUSIVE may drop the shared lock when it fails (flock(2) conversions
        // are not atomic); that is harmless here because the session is ending either way.
        let exclusive =
            try_flock(&self.name_lock, libc::LOCK_EX).map_err(io_err("lock", &self.lock_path))?;
        if !exclusive {
            unregistered?;
            touch(&self.dir.join(LAST_USED_FILE))?;
            return Ok(CloseOutcome::KeptInUse);
        }
        remove_tree(&self.dir).map_err(io_err("remove the sandbox state", &self.dir))?;
        unregistered?;
        Ok(CloseOutcome::Removed)
    }

    fn remove_session_file(&mut self) -> Result<(), StateError> {
        match self.session_file.take() {
            // Unlink while still holding its lock, so a lister never counts a half-removed file.
            Some((path, file)) => {
                let result =
                    remove_file_if_present(&path).map_err(io_err("remove session file", &path));
                drop(file);
                result
            }
            None => Ok(()),
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if std::process::id() == self.owner_pid {
            let _ = self.remove_session_file();
        }
    }
}

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
}

fn serialize_unix_secs<S: Serializer>(time: &Option<SystemTime>, s: S) -> Result<S::Ok, S::Error> {
    match time {
        Some(t) => s.serialize_some(&unix_secs(*t)),
        None => s.serialize_none(),
    }
}

/// Every state root under `sandboxes_dir`, sorted by name. Removes stale session files on the way.
pub fn list(sandboxes_dir: &Path, _locks_dir: &Path) -> Result<Vec<SandboxInfo>, StateError> {
    let mut infos = Vec::new();
    for (name, dir) in sandbox_dirs(sandboxes_dir)? {
        let facts = inspect(&dir);
        // A root removed while we walked it (a concurrent prune) is simply not listed.
        if !dir.is_dir() {
            continue;
        }
        infos.push(SandboxInfo {
            size_bytes: disk_usage(&dir),
            live_sessions: count_live_sessions(&dir.join(SESSIONS_DIR)),
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
/// `older_than` removes orphaned sandboxes that were also not used for that long. With no filter at
/// all nothing is selected (the CLI asks for one). A sandbox with a live session is never removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PruneOptions {
    /// Select sandboxes whose project directory is gone or that have no readable `sandbox.json`.
    pub orphaned: bool,
    /// Select sandboxes last used longer ago than this; one without `last-used` is never selected
    /// by age (its age is unknown).
    pub older_than: Option<Duration>,
    /// Report what would be removed, remove nothing.
    pub dry_run: bool,
}

impl PruneOptions {
    /// Whether any selecting filter is set.
    pub fn has_filter(&self) -> bool {
        self.orphaned || self.older_than.is_some()
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
    for (name, dir) in sandbox_dirs(sandboxes_dir)? {
        if !inspect(&dir).selected_by(options, SystemTime::now()) {
            continue;
        }
        let (lock_path, lock) = open_name_lock(locks_dir, &name)?;
        let exclusive = try_flock(&lock, libc::LOCK_EX).map_err(io_err("lock", &lock_path))?;
        let size_bytes = disk_usage(&dir);
        let action = if !exclusive || count_live_sessions(&dir.join(SESSIONS_DIR)) > 0 {
            PruneAction::SkippedInUse
        } else if !inspect(&dir).selected_by(options, SystemTime::now()) {
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

/// `sandbox.json`.
#[derive(Debug, Serialize, Deserialize)]
struct Metadata {
    project: PathBuf,
    created: u64,
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

/// Writes `sandbox.json` if it is missing (atomically: temp file, then a hard link that fails if
/// another session won the race), and checks that an existing one names the same project.
fn record_project(name: &str, dir: &Path, project: &Path) -> Result<(), StateError> {
    static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);
    let path = dir.join(METADATA_FILE);
    if !path.exists() {
        let meta = Metadata {
            project: project.to_path_buf(),
            created: unix_secs(SystemTime::now()),
        };
        let json = serde_json::to_vec(&meta).map_err(|source| StateError::BadMetadata {
            path: path.clone(),
            source,
        })?;
        let seq = TEMP_SEQ.fetch_add(1, Ordering::Relaxed);
        let temp = dir.join(format!(".{METADATA_FILE}.{}.{seq}.tmp", std::process::id()));
        let written =
            write_new_file(&temp, &json).and_then(|()| match fs::hard_link(&temp, &path) {
                Err(err) if err.kind() != io::ErrorKind::AlreadyExists => Err(err),
                _ => Ok(()),
            });
        let _ = fs::remove_file(&temp);
        written.map_err(io_err("write", &path))?;
    }
    let bytes = fs::read(&path).map_err(io_err("read", &path))?;
    let existing: Metadata =
        serde_json::from_slice(&bytes).map_err(|source| StateError::BadMetadata {
            path: path.clone(),
            source,
        })?;
    if existing.project != project {
        return Err(StateError::Collision {
            name: name.to_string(),
            dir: dir.to_path_buf(),
            existing: existing.project,
            requested: project.to_path_buf(),
        });
    }
    Ok(())
}

fn write_new_file(path: &Path, contents: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(contents)?;
    file.sync_all()
}

/// Registers this session: `sessions/<pid>`, or `<pid>.<n>` when that name is held (another session
/// of this process, or of a process with the same pid in another pid namespace).
fn create_session_file(sessions: &Path) -> Result<(PathBuf, File), StateError> {
    let pid = std::process::id();
    for n in 0..SESSION_FILE_ATTEMPTS {
        let path = match n {
            0 => sessions.join(pid.to_string()),
            n => sessions.join(format!("{pid}.{n}")),
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(io_err("create session file", &path))?;
        if !try_flock(&file, libc::LOCK_EX).map_err(io_err("lock", &path))? {
            continue;
        }
        // A lister may have removed the file as stale between our open and our lock; then the file we
        // hold is unlinked and would be invisible, so take another name.
        if still_linked(&file, &path) {
            return Ok((path, file));
        }
    }
    Err(StateError::NoSessionSlot {
        dir: sessions.to_path_buf(),
    })
}

/// Counts the session files whose lock is held, removing those whose lock can be taken (stale).
fn count_live_sessions(sessions: &Path) -> u32 {
    let Ok(entries) = fs::read_dir(sessions) else {
        return 0;
    };
    let mut live = 0;
    for entry in entries.flatten() {
        if !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let path = entry.path();
        let Ok(file) = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)
        else {
            continue;
        };
        match try_flock(&file, libc::LOCK_EX) {
            Ok(false) => live += 1,
            // Stale. Unlink while holding the lock, and only the file we locked, not a new one that a
            // starting session may have created under the same name since.
            Ok(true) if still_linked(&file, &path) => {
                let _ = remove_file_if_present(&path);
            }
            _ => {}
        }
    }
    live
}

fn still_linked(file: &File, path: &Path) -> bool {
    match (file.metadata(), fs::symlink_metadata(path)) {
        (Ok(held), Ok(named)) => held.dev() == named.dev() && held.ino() == named.ino(),
        _ => false,
    }
}

fn open_name_lock(locks_dir: &Path, name: &str) -> Result<(PathBuf, File), StateError> {
    create_private_dir_all(locks_dir)?;
    let path = locks_dir.join(format!("{name}.lock"));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(io_err("open lock file", &path))?;
    Ok((path, file))
}

/// `flock(op)`, waiting for the lock.
fn flock(file: &File, op: libc::c_int) -> io::Result<()> {
    loop {
        // SAFETY: flock on a descriptor we own; no memory is passed.
        if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// `flock(op | LOCK_NB)`: `Ok(false)` when someone else holds a conflicting lock.
fn try_flock(file: &File, op: libc::c_int) -> io::Result<bool> {
    match flock(file, op | libc::LOCK_NB) {
        Ok(()) => Ok(true),
        Err(err) if err.kind() == io::ErrorKind::WouldBlock => Ok(false),
        Err(err) => Err(err),
    }
}

/// Creates `dir` (0700) if missing; `Ok(true)` when this call created it. An existing entry must be a
/// real directory, not a symlink.
fn create_private_dir(dir: &Path) -> Result<bool, StateError> {
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => Ok(true),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
            if fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
                Ok(false)
            } else {
                Err(StateError::NotADirectory {
                    path: dir.to_path_buf(),
                })
            }
        }
        Err(err) => Err(io_err("create directory", dir)(err)),
    }
}

fn create_private_dir_all(dir: &Path) -> Result<(), StateError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io_err("create directory", dir))
}

/// Creates `path` if missing and sets its mtime to now.
fn touch(path: &Path) -> Result<(), StateError> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(io_err("create", path))?;
    file.set_modified(SystemTime::now())
        .map_err(io_err("update the time of", path))
}

fn remove_file_if_present(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err),
        _ => Ok(()),
    }
}

/// Removes a directory tree without following symlinks out of it (`remove_dir_all` never does). When
/// the sandbox left directories without write or search permission, they are made `u+rwx` first.
pub(crate) fn remove_tree(path: &Path) -> io::Result<()> {
    match fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::PermissionDenied => {
            make_dirs_owner_writable(path);
            match fs::remove_dir_all(path) {
                Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err),
                _ => Ok(()),
            }
        }
        Err(err) => Err(err),
    }
}

/// Best effort `chmod u+rwx` on every real directory of a tree, iteratively (a sandbox can make the
/// tree arbitrarily deep). Only called on roots no session holds, so nothing swaps entries under us;
/// `AT_SYMLINK_NOFOLLOW` keeps a symlink from redirecting the chmod anyway.
fn make_dirs_owner_writable(root: &Path) {
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(meta) = fs::symlink_metadata(&dir) else {
            continue;
        };
        if !meta.is_dir() {
            continue;
        }
        if meta.mode() & 0o700 != 0o700
            && let Ok(c_path) = CString::new(dir.as_os_str().as_bytes())
        {
            let mode = (meta.mode() | 0o700) & 0o7777;
            // SAFETY: a valid C string; no other memory is passed.
            unsafe {
                libc::fchmodat(
                    libc::AT_FDCWD,
                    c_path.as_ptr(),
                    mode as libc::mode_t,
                    libc::AT_SYMLINK_NOFOLLOW,
                );
            }
        }
        if let Ok(entries) = fs::read_dir(&dir) {
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    pending.push(entry.path());
                }
            }
        }
    }
}

/// Allocated bytes of a tree, like `du -s`: symlinks are not followed, hard links count once, and
/// entries that vanish or cannot be read are skipped.
fn disk_usage(root: &Path) -> u64 {
    let mut seen = HashSet::new();
    let mut total = 0u64;
    let mut pending = vec![root.to_path_buf()];
    while let Some(path) = pending.pop() {
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.nlink() > 1 && !meta.is_dir() && !seen.insert((meta.dev(), meta.ino())) {
            continue;
        }
        total = total.saturating_add(meta.blocks().saturating_mul(512));
        if meta.is_dir()
            && let Ok(entries) = fs::read_dir(&path)
        {
            pending.extend(entries.flatten().map(|e| e.path()));
        }
    }
    total
}

fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::{Arc, Barrier};

    struct Fixture {
        _tmp: tempfile::TempDir,
        root: PathBuf,
        sandboxes: PathBuf,
        locks: PathBuf,
    }

    impl Fixture {
        fn new() -> Fixture {
            let tmp = tempfile::tempdir().unwrap();
            let root = tmp.path().canonicalize().unwrap();
            Fixture {
                sandboxes: root.join("data/airlock/sandboxes"),
                locks: root.join("state/airlock/locks"),
                root,
                _tmp: tmp,
            }
        }

        fn project(&self, name: &str) -> PathBuf {
            let p = self.root.join("projects").join(name);
            fs::create_dir_all(&p).unwrap();
            p
        }

        fn open(&self, project: &Path) -> Session {
            open_session(&self.sandboxes, &self.locks, project).unwrap()
        }

        fn list(&self) -> Vec<SandboxInfo> {
            list(&self.sandboxes, &self.locks).unwrap()
        }

        fn prune(&self, options: PruneOptions) -> Vec<PruneResult> {
            prune(&self.sandboxes, &self.locks, &options).unwrap()
        }
    }

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().permissions().mode() & 0o777
    }

    fn session_files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir.join(SESSIONS_DIR))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    fn set_last_used(dir: &Path, ago: Duration) {
        let file = File::options()
            .write(true)
            .open(dir.join(LAST_USED_FILE))
            .unwrap();
        file.set_modified(SystemTime::now() - ago).unwrap();
    }

    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn name_is_sanitised_basename_and_path_hash() {
        assert_eq!(
            sandbox_name(Path::new("/home/u/my proj!")),
            "my_proj_-5ddd9935"
        );
        assert_eq!(sandbox_name(Path::new("/")), "_-8a5edab2");
        let name = sandbox_name(Path::new("/x/.dot-ted_Dir.9"));
        assert!(name.starts_with(".dot-ted_Dir.9-"), "{name}");
        assert_eq!(name.len(), ".dot-ted_Dir.9-".len() + 8);
        assert_ne!(
            sandbox_name(Path::new("/a/p")),
            sandbox_name(Path::new("/b/p"))
        );
        let long = format!("/x/{}", "é".repeat(100));
        let name = sandbox_name(Path::new(&long));
        assert_eq!(name.len(), MAX_BASENAME_CHARS + 9, "{name}");
        assert!(name.starts_with("____"), "{name}");
    }

    #[test]
    fn refuses_relative_root_and_non_utf8_projects() {
        let f = Fixture::new();
        let err = open_session(&f.sandboxes, &f.locks, Path::new("rel/p")).unwrap_err();
        assert!(
            matches!(err, StateError::ProjectNotAbsolute { .. }),
            "{err}"
        );
        let err = open_session(&f.sandboxes, &f.locks, Path::new("/")).unwrap_err();
        assert!(err.to_string().contains("no directory name"), "{err}");
        let bad = PathBuf::from(std::ffi::OsStr::from_bytes(b"/tmp/\xff"));
        let err = open_session(&f.sandboxes, &f.locks, &bad).unwrap_err();
        assert!(matches!(err, StateError::ProjectNotUtf8 { .. }), "{err}");
        assert!(!f.sandboxes.exists());
    }

    #[test]
    fn open_creates_private_layout_and_close_keeps_it() {
        let f = Fixture::new();
        let project = f.project("app");
        let s = f.open(&project);
        assert!(s.created_now);
        assert_eq!(s.name, sandbox_name(&project));
        assert_eq!(s.dir, f.sandboxes.join(&s.name));
        assert_eq!(s.home, s.dir.join("home"));
        assert_eq!(mode(&s.dir), 0o700);
        assert_eq!(mode(&s.home), 0o700);
        assert_eq!(mode(&f.locks), 0o700);
        let lock = f.locks.join(format!("{}.lock", s.name));
        assert_eq!(mode(&lock), 0o600);
        let meta: serde_json::Value =
            serde_json::from_slice(&fs::read(s.dir.join("sandbox.json")).unwrap()).unwrap();
        assert_eq!(meta["project"], project.to_str().unwrap());
        assert!(meta["created"].as_u64().unwrap() > 1_600_000_000);
        assert!(s.dir.join("last-used").is_file());
        assert_eq!(session_files(&s.dir), vec![std::process::id().to_string()]);

        let dir = s.dir.clone();
        assert_eq!(s.close(false).unwrap(), CloseOutcome::Kept);
        assert!(dir.join("home").is_dir());
        assert!(session_files(&dir).is_empty());
        assert!(lock.exists(), "the name lock file is never removed");

        let again = f.open(&project);
        assert!(!again.created_now);
        assert_eq!(again.close(true).unwrap(), CloseOutcome::Removed);
        assert!(!dir.exists());
        assert!(lock.exists());
    }

    #[test]
    fn two_sessions_last_close_removes() {
        let f = Fixture::new();
        let project = f.project("app");
        let first = f.open(&project);
        let second = f.open(&project);
        assert!(first.created_now && !second.created_now);
        let dir = first.dir.clone();
        let pid = std::process::id();
        assert_eq!(
            session_files(&dir),
            vec![pid.to_string(), format!("{pid}.1")]
        );
        assert_eq!(f.list()[0].live_sessions, 2);

        assert_eq!(first.close(true).unwrap(), CloseOutcome::KeptInUse);
        assert!(dir.join("home").is_dir());
        assert_eq!(f.list()[0].live_sessions, 1);
        assert_eq!(second.close(true).unwrap(), CloseOutcome::Removed);
        assert!(!dir.exists());
        assert!(f.list().is_empty());
    }

    #[test]
    fn concurrent_opens_race_free() {
        let f = Arc::new(Fixture::new());
        let project = f.project("race");
        let barrier = Arc::new(Barrier::new(8));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (f, project, barrier) = (f.clone(), project.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    f.open(&project)
                })
            })
            .collect();
        let sessions: Vec<Session> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(sessions.iter().filter(|s| s.created_now).count(), 1);
        assert_eq!(f.list()[0].live_sessions, 8);
        let outcomes: Vec<CloseOutcome> = sessions
            .into_iter()
            .map(|s| s.close(true).unwrap())
            .collect();
        assert_eq!(
            outcomes
                .iter()
                .filter(|o| **o == CloseOutcome::Removed)
                .count(),
            1
        );
        assert_eq!(outcomes.last(), Some(&CloseOutcome::Removed));
        assert!(f.list().is_empty());
    }

    #[test]
    fn dropped_session_unregisters_but_keeps_root() {
        let f = Fixture::new();
        let s = f.open(&f.project("app"));
        let dir = s.dir.clone();
        drop(s);
        assert!(session_files(&dir).is_empty());
        assert!(dir.join("home").is_dir());
    }

    #[test]
    fn stale_session_files_are_not_counted_and_are_removed() {
        let f = Fixture::new();
        let s = f.open(&f.project("app"));
        let stale = s.dir.join(SESSIONS_DIR).join("4194999");
        fs::write(&stale, b"").unwrap();
        let infos = f.list();
        assert_eq!(infos[0].live_sessions, 1);
        assert!(!stale.exists());
        assert_eq!(session_files(&s.dir), vec![std::process::id().to_string()]);
        s.close(false).unwrap();
    }

    #[test]
    fn failed_open_keeps_old_root_and_failed_launch_removes_new_one() {
        let f = Fixture::new();
        let project = f.project("app");
        let dir = f.sandboxes.join(sandbox_name(&project));
        // Opening fails half-way (`home` is taken by a file): the pre-existing root is left as it was.
        fs::create_dir_all(&f.sandboxes).unwrap();
        let err = {
            fs::create_dir(&dir).unwrap();
            fs::write(dir.join("home"), b"").unwrap();
            open_session(&f.sandboxes, &f.locks, &project).unwrap_err()
        };
        assert!(matches!(err, StateError::NotADirectory { .. }), "{err}");
        assert!(
            dir.join("home").is_file(),
            "a root that existed before is kept"
        );
        fs::remove_dir_all(&dir).unwrap();

        // The launch-failure path: a session that created the root removes it again.
        let s = f.open(&project);
        assert!(s.created_now);
        assert_eq!(s.close(true).unwrap(), CloseOutcome::Removed);
        assert!(!dir.exists());
    }

    #[test]
    fn hash_collision_is_an_error_naming_both_projects() {
        let f = Fixture::new();
        let project = f.project("app");
        let s = f.open(&project);
        let dir = s.dir.clone();
        s.close(false).unwrap();
        fs::write(
            dir.join("sandbox.json"),
            br#"{"project": "/elsewhere/app", "created": 1}"#,
        )
        .unwrap();
        let err = open_session(&f.sandboxes, &f.locks, &project).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, StateError::Collision { .. }), "{msg}");
        assert!(
            msg.contains("/elsewhere/app") && msg.contains(project.to_str().unwrap()),
            "{msg}"
        );
        assert!(msg.contains(dir.to_str().unwrap()), "{msg}");
        assert!(
            dir.join("home").is_dir(),
            "the other project's state is untouched"
        );
        assert!(session_files(&dir).is_empty());
    }

    #[test]
    fn close_removes_read_only_dirs_without_following_symlinks() {
        let f = Fixture::new();
        let outside = f.root.join("outside");
        fs::create_dir(&outside).unwrap();
        fs::write(outside.join("keep"), b"precious").unwrap();
        let s = f.open(&f.project("app"));
        let ro = s.home.join("ro");
        fs::create_dir_all(ro.join("sub")).unwrap();
        fs::write(ro.join("sub/file"), b"x").unwrap();
        std::os::unix::fs::symlink(&outside, s.home.join("link")).unwrap();
        std::os::unix::fs::symlink(&outside, ro.join("link")).unwrap();
        fs::set_permissions(ro.join("sub"), fs::Permissions::from_mode(0o500)).unwrap();
        fs::set_permissions(&ro, fs::Permissions::from_mode(0o500)).unwrap();
        let dir = s.dir.clone();
        assert_eq!(s.close(true).unwrap(), CloseOutcome::Removed);
        assert!(!dir.exists());
        assert_eq!(fs::read(outside.join("keep")).unwrap(), b"precious");
        assert_eq!(mode(&outside) & 0o700, 0o700);
    }

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
        });
        let names: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, [sandbox_name(&gone_old)]);
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
        let results = f.prune(PruneOptions {
            orphaned: true,
            ..PruneOptions::default()
        });
        assert_eq!(results[0].action, PruneAction::Removed);
        assert!(!dir.exists());
    }
}
