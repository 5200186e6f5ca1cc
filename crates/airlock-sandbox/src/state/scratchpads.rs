//! Scratchpads (`airlock scratchpad`): empty managed workspaces for throwaway agent work, at
//! `<scratchpads_dir>/<NAME>`. Each is a project like any other to the sandbox (its state root is
//! `<sandboxes_dir>/<sandbox name of the workspace>`), but no project config is ever read from it:
//! what is in it is the sandbox's writing alone.
//!
//! A scratchpad is removed with its state root under the project's EXCLUSIVE name lock
//! ([`super::lock_idle`]), so never while a session of it runs, and never half: the workspace goes
//! first only once the lock is held, and a root that cannot be removed is reported.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;

use super::files::{create_private_dir, create_private_dir_all, disk_usage, remove_tree};
use super::locks::count_live_sessions;
use super::{LAST_USED_FILE, SESSIONS_DIR, StateError, io_err, lock_idle, sandbox_name};

/// Names longer than this are refused (the sandbox name adds 9 characters).
const MAX_NAME_CHARS: usize = 64;

/// The name `airlock scratchpad` uses without one.
pub const DEFAULT_NAME: &str = "default";

/// What a scratchpad name, a removal or a creation can get wrong.
#[derive(Debug, thiserror::Error)]
pub enum ScratchpadError {
    #[error(
        "scratchpad name {name:?} is not valid: use 1 to {MAX_NAME_CHARS} of A-Z a-z 0-9 . _ -, \
         not starting with . or - (e.g. `airlock scratchpad try-rust`)"
    )]
    BadName { name: String },
    #[error("no scratchpad named {name:?}; `airlock scratchpad list` shows the ones there are")]
    Missing { name: String },
    #[error(
        "scratchpad {name:?} is in use by a running sandbox; exit it first, then remove it again"
    )]
    InUse { name: String },
    #[error("{path} is not a directory airlock made; move it out of the way")]
    NotADirectory { path: PathBuf },
    #[error(transparent)]
    State(#[from] StateError),
}

/// Checks `name` for a scratchpad: a plain file name of `[A-Za-z0-9._-]`, not hidden, not an
/// option, not `.`/`..`.
pub fn check_name(name: &str) -> Result<(), ScratchpadError> {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    let ok = !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && name.chars().all(plain)
        && !name.starts_with(['.', '-']);
    match ok {
        true => Ok(()),
        false => Err(ScratchpadError::BadName {
            name: name.to_owned(),
        }),
    }
}

/// The workspace of `name`, created (0700, with its parents) if missing, canonical as the sandbox
/// wants a project path. A symlink or a file in its place is refused, never followed.
pub fn open(scratchpads_dir: &Path, name: &str) -> Result<PathBuf, ScratchpadError> {
    check_name(name)?;
    create_private_dir_all(scratchpads_dir)?;
    let dir = scratchpads_dir.join(name);
    create_private_dir(&dir).map_err(|e| match e {
        StateError::NotADirectory { path } => ScratchpadError::NotADirectory { path },
        e => e.into(),
    })?;
    Ok(airlock_config::canonicalize(&dir).map_err(io_err("resolve", &dir))?)
}

/// One scratchpad, as `airlock scratchpad list` shows it (`--json` prints these fields).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScratchpadInfo {
    pub name: String,
    /// The workspace.
    pub path: PathBuf,
    /// Its sandbox's name (the state root under the sandboxes dir).
    pub sandbox: String,
    /// Disk usage of the workspace and its sandbox state; 0 when not measured.
    pub size_bytes: u64,
    /// The last session's open or close (unix seconds in JSON); `None` before the first.
    #[serde(
        rename = "last_used_unix",
        serialize_with = "super::inventory::serialize_unix_secs"
    )]
    pub last_used: Option<SystemTime>,
    /// Sessions whose process is still alive.
    pub live_sessions: u32,
}

/// Every scratchpad under `scratchpads_dir`, by name; `sizes` walks each for its disk usage.
/// Entries that are not plain directories with a valid name are left out.
pub fn list(
    scratchpads_dir: &Path,
    sandboxes_dir: &Path,
    sizes: bool,
) -> Result<Vec<ScratchpadInfo>, ScratchpadError> {
    let entries = match fs::read_dir(scratchpads_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err("read", scratchpads_dir)(e).into()),
    };
    let mut infos = Vec::new();
    for entry in entries.flatten() {
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let path = entry.path();
        if check_name(&name).is_err() || !fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        let path = airlock_config::canonicalize(&path).unwrap_or(path);
        let sandbox = sandbox_name(&path);
        let root = sandboxes_dir.join(&sandbox);
        infos.push(ScratchpadInfo {
            size_bytes: match sizes {
                true => disk_usage(&path) + disk_usage(&root),
                false => 0,
            },
            last_used: fs::metadata(root.join(LAST_USED_FILE))
                .and_then(|m| m.modified())
                .ok(),
            live_sessions: count_live_sessions(&root.join(SESSIONS_DIR)),
            name,
            path,
            sandbox,
        });
    }
    infos.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(infos)
}

/// Removes the scratchpad `name`: its workspace and its sandbox state, under the lock that keeps
/// a session from starting meanwhile. Refused while one runs; a missing one is an error.
pub fn remove(
    scratchpads_dir: &Path,
    sandboxes_dir: &Path,
    locks_dir: &Path,
    name: &str,
) -> Result<(), ScratchpadError> {
    check_name(name)?;
    let dir = scratchpads_dir.join(name);
    if !fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return Err(ScratchpadError::Missing {
            name: name.to_owned(),
        });
    }
    let path = airlock_config::canonicalize(&dir).map_err(io_err("resolve", &dir))?;
    let Some(lock) = lock_idle(sandboxes_dir, locks_dir, &path)? else {
        return Err(ScratchpadError::InUse {
            name: name.to_owned(),
        });
    };
    remove_tree(&dir).map_err(io_err("remove the scratchpad", &dir))?;
    lock.remove_state()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fx {
        _dir: tempfile::TempDir,
        pads: PathBuf,
        sandboxes: PathBuf,
        locks: PathBuf,
    }

    fn fx() -> Fx {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        Fx {
            pads: root.join("scratchpads"),
            sandboxes: root.join("sandboxes"),
            locks: root.join("locks"),
            _dir: dir,
        }
    }

    #[test]
    fn names_are_plain_file_names() {
        for good in ["default", "try-rust", "a.b_c", "X1"] {
            check_name(good).unwrap();
        }
        let long = "a".repeat(MAX_NAME_CHARS + 1);
        for bad in [
            "", ".", "..", ".hidden", "-x", "a/b", "../up", "sp ace", "é", &long,
        ] {
            let err = check_name(bad).unwrap_err().to_string();
            assert!(err.contains("is not valid"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn open_creates_a_private_dir_and_refuses_a_symlink_in_its_place() {
        let fx = fx();
        let path = open(&fx.pads, "one").unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o700
        );
        assert_eq!(open(&fx.pads, "one").unwrap(), path, "reused");
        let elsewhere = fx.pads.parent().unwrap().join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, fx.pads.join("link")).unwrap();
        assert!(matches!(
            open(&fx.pads, "link"),
            Err(ScratchpadError::NotADirectory { .. })
        ));
    }

    #[test]
    fn remove_takes_the_workspace_and_the_state_and_is_refused_while_a_session_runs() {
        let fx = fx();
        let path = open(&fx.pads, "pad").unwrap();
        fs::write(path.join("work"), "x").unwrap();
        let session = super::super::open_session(&fx.sandboxes, &fx.locks, &path).unwrap();
        let root = session.dir.clone();
        let listed = list(&fx.pads, &fx.sandboxes, true).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].live_sessions, 1);
        assert_eq!(
            listed[0].sandbox,
            root.file_name().unwrap().to_str().unwrap()
        );
        assert!(matches!(
            remove(&fx.pads, &fx.sandboxes, &fx.locks, "pad"),
            Err(ScratchpadError::InUse { .. })
        ));
        assert!(path.join("work").exists(), "nothing removed while in use");
        session.close(false).unwrap();
        remove(&fx.pads, &fx.sandboxes, &fx.locks, "pad").unwrap();
        assert!(!path.exists() && !root.exists());
        assert!(matches!(
            remove(&fx.pads, &fx.sandboxes, &fx.locks, "pad"),
            Err(ScratchpadError::Missing { .. })
        ));
    }

    #[test]
    fn remove_never_follows_a_link_in_the_workspace() {
        let fx = fx();
        let path = open(&fx.pads, "pad").unwrap();
        let outside = fx.pads.parent().unwrap().join("outside");
        fs::create_dir(&outside).unwrap();
        fs::write(outside.join("keep"), "precious").unwrap();
        std::os::unix::fs::symlink(&outside, path.join("link")).unwrap();
        remove(&fx.pads, &fx.sandboxes, &fx.locks, "pad").unwrap();
        assert_eq!(fs::read(outside.join("keep")).unwrap(), b"precious");
    }
}
