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
//!
//! The code is split by concept: this file names sandboxes, opens and closes sessions and records
//! `sandbox.json`; `locks` holds the two kinds of lock above; `inventory` lists and prunes roots for
//! `airlock sandboxes`; `files` has the filesystem primitives (private dirs, atomic writes, tree
//! removal, disk usage).

mod files;
mod inventory;
mod locks;
mod prepare;
pub mod scratchpads;
#[cfg(test)]
mod tests;

use std::fs::{self, File};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// In a sandbox's state root when its last session ended with processes OOM-killed at its
/// memory limit; removed when the next session starts.
pub const OOM_MARKER: &str = "oom-killed";

use files::{
    create_private_dir, create_private_dir_all, remove_file_if_present, touch, write_new_file,
};
pub use files::{disk_usage, remove_tree};
pub use inventory::{
    IdleLock, ListOptions, PruneAction, PruneOptions, PruneResult, SandboxInfo, list, list_with,
    lock_idle, prune,
};
use locks::{count_live_sessions, create_session_file, flock, open_name_lock, try_flock};
pub(crate) use prepare::replace_file;
pub use prepare::{LEASE_WAIT, Lease, OverlayLease, lease_overlays, prepare};

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

/// `sandbox.json`.
#[derive(Debug, Serialize, Deserialize)]
struct Metadata {
    project: PathBuf,
    created: u64,
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

fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
