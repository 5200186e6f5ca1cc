//! The two kinds of lock of the protocol in the [module docs](super): the per-name lock file in
//! `<locks_dir>` (SHARED for every session, EXCLUSIVE to remove the root) and the per-session files in
//! `<root>/sessions/` (EXCLUSIVE while their session lives, so live sessions can be counted and stale
//! ones removed). Plain `flock(2)` wrappers live here too.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::files::{create_private_dir_all, open_lock_file, remove_file_if_present};
use super::{SESSION_FILE_ATTEMPTS, StateError, io_err};

/// Registers this session: `sessions/<pid>`, or `<pid>.<n>` when that name is held (another session
/// of this process, or of a process with the same pid in another pid namespace).
pub(super) fn create_session_file(sessions: &Path) -> Result<(PathBuf, File), StateError> {
    let pid = std::process::id();
    for n in 0..SESSION_FILE_ATTEMPTS {
        let path = match n {
            0 => sessions.join(pid.to_string()),
            n => sessions.join(format!("{pid}.{n}")),
        };
        let file = open_lock_file(&path).map_err(io_err("create session file", &path))?;
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
pub(super) fn count_live_sessions(sessions: &Path) -> u32 {
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

pub(super) fn open_name_lock(locks_dir: &Path, name: &str) -> Result<(PathBuf, File), StateError> {
    create_private_dir_all(locks_dir)?;
    let path = locks_dir.join(format!("{name}.lock"));
    let file = open_lock_file(&path).map_err(io_err("open lock file", &path))?;
    Ok((path, file))
}

/// `flock(op)`, waiting for the lock.
pub(super) fn flock(file: &File, op: libc::c_int) -> io::Result<()> {
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
pub(super) fn try_flock(file: &File, op: libc::c_int) -> io::Result<bool> {
    match flock(file, op | libc::LOCK_NB) {
        Ok(()) => Ok(true),
        Err(err) if err.kind() == io::ErrorKind::WouldBlock => Ok(false),
        Err(err) => Err(err),
    }
}
