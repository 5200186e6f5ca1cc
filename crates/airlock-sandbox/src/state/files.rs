//! Filesystem primitives for state roots: private (0700) directories that must not be symlinks,
//! `touch`, new files written whole before anyone can see them, removal of a tree the sandbox may have
//! left read-only, and `du`-style disk usage. Nothing here knows about sessions or locks.

use std::collections::HashSet;
use std::ffi::CString;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::time::SystemTime;

use super::{StateError, io_err};

/// Opens (creating, 0600) a file that only ever carries a `flock`; refuses a symlink in its place.
pub(super) fn open_lock_file(path: &Path) -> io::Result<fs::File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

pub(super) fn write_new_file(path: &Path, contents: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(contents)?;
    file.sync_all()
}

/// Creates `dir` (0700) if missing; `Ok(true)` when this call created it. An existing entry must be a
/// real directory, not a symlink.
pub(super) fn create_private_dir(dir: &Path) -> Result<bool, StateError> {
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

pub(super) fn create_private_dir_all(dir: &Path) -> Result<(), StateError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io_err("create directory", dir))
}

/// Creates `path` if missing and sets its mtime to now.
pub(super) fn touch(path: &Path) -> Result<(), StateError> {
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

pub(super) fn remove_file_if_present(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err),
        _ => Ok(()),
    }
}

/// Removes a directory tree without following symlinks out of it (`remove_dir_all` never does). When
/// the sandbox left directories without write or search permission, they are made `u+rwx` first.
pub fn remove_tree(path: &Path) -> io::Result<()> {
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
pub fn disk_usage(root: &Path) -> u64 {
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
