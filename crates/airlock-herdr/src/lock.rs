//! Per-mapping lock files with pid + start-token ownership, reclaimed when the holder died.
//!
//! Protocol (docs/herdr-plugin.md, "State"): the lock `<name>.lock` holds `<pid> <start token>\n`.
//! It is created atomically *with* its content (a written temp file hard-linked to the lock path,
//! which fails with EEXIST exactly like O_CREAT|O_EXCL) so no reader ever sees an empty lock, even
//! when the creator is killed half-way. A holder is gone when its pid is dead, when the pid's
//! start token differs (a recycled pid), or, when unverifiable, once the lock is older than
//! max(wait, 60 s). Reclaiming is serialised by `<lock>.reclaim` (O_EXCL) and unlinks the lock only
//! if its bytes are unchanged. Hand-rolled rather than `flock`: the owner must be inspectable by
//! other processes (error messages name the holder) and the files must survive across exec.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use crate::error::{PluginError, Result};
use crate::proc;

/// How long an action waits for another process to release a mapping (`HERDR_SBX_LOCK_WAIT_MS`).
pub const DEFAULT_WAIT: Duration = Duration::from_secs(5);
const RETRY: Duration = Duration::from_millis(20);
const UNVERIFIABLE_AGE: Duration = Duration::from_secs(60);

/// Lock paths this process holds, with their re-entry depth.
static HELD: Mutex<Option<HashMap<PathBuf, usize>>> = Mutex::new(None);

/// A held lock; dropping it releases one level of re-entry.
#[derive(Debug)]
pub struct LockGuard {
    path: PathBuf,
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
        let map = held.get_or_insert_with(HashMap::new);
        let depth = map.get_mut(&self.path).map(|d| {
            *d -= 1;
            *d
        });
        if depth == Some(0) {
            map.remove(&self.path);
            // Release only a lock that still names this process.
            if std::fs::read_to_string(&self.path).ok().as_deref() == Some(&own_content()) {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }
}

fn own_content() -> String {
    format!("{} {}\n", std::process::id(), proc::own_token())
}

/// The wait from `HERDR_SBX_LOCK_WAIT_MS`, else five seconds.
pub fn configured_wait() -> Duration {
    proc::env_duration("HERDR_SBX_LOCK_WAIT_MS", DEFAULT_WAIT)
}

/// Takes the lock at `path`, waiting up to `wait`; a timeout is a `conflict` naming the holder.
pub fn acquire(path: &Path, wait: Duration) -> Result<LockGuard> {
    {
        let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
        let map = held.get_or_insert_with(HashMap::new);
        if let Some(depth) = map.get_mut(path) {
            *depth += 1;
            return Ok(LockGuard {
                path: path.to_owned(),
            });
        }
    }
    let content = own_content();
    let deadline = Instant::now() + wait;
    loop {
        match try_create(path, &content) {
            Ok(true) => {
                let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
                held.get_or_insert_with(HashMap::new)
                    .insert(path.to_owned(), 1);
                return Ok(LockGuard {
                    path: path.to_owned(),
                });
            }
            Ok(false) => {}
            Err(e) => {
                return Err(PluginError::startup(format!(
                    "Could not create the lock file {}: {e}. Check that the state directory is writable.",
                    path.display()
                )));
            }
        }
        if let Ok(bytes) = std::fs::read(path)
            && holder_gone(path, &bytes, wait)
        {
            reclaim(path, &bytes);
            // Retry at once only if the lock is gone; another reclaimer at work means waiting.
            if !path.exists() {
                continue;
            }
        }
        if Instant::now() >= deadline {
            let holder = std::fs::read_to_string(path).unwrap_or_default();
            return Err(PluginError::conflict(format!(
                "Another process holds {} (owner: {}); it did not release it within {} ms. Retry once it finished, or set HERDR_SBX_LOCK_WAIT_MS to wait longer.",
                path.display(),
                holder.trim(),
                wait.as_millis()
            )));
        }
        std::thread::sleep(RETRY);
    }
}

/// Writes `content` to a private temp file and hard-links it to `path`: `Ok(false)` on EEXIST.
fn try_create(path: &Path, content: &str) -> std::io::Result<bool> {
    let tmp = path.with_extension(format!(
        "lock.{}.{}",
        std::process::id(),
        proc::random_hex(4)
    ));
    {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(content.as_bytes())?;
    }
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether the holder recorded in `bytes` is gone (dead, recycled, or unverifiable and old).
fn holder_gone(path: &Path, bytes: &[u8], wait: Duration) -> bool {
    let text = String::from_utf8_lossy(bytes);
    let mut words = text.split_whitespace();
    let pid = words.next().and_then(|p| p.parse::<u32>().ok());
    let token = words.next().unwrap_or("-");
    match pid {
        Some(pid) if !proc::pid_alive(pid) => true,
        Some(pid) if token != "-" => match proc::start_token(pid) {
            Some(current) => current != token,
            None => older_than(path, wait.max(UNVERIFIABLE_AGE)),
        },
        _ => older_than(path, wait.max(UNVERIFIABLE_AGE)),
    }
}

fn older_than(path: &Path, age: Duration) -> bool {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|m| SystemTime::now().duration_since(m).ok())
        .is_some_and(|elapsed| elapsed > age)
}

/// Under the `.reclaim` guard: unlink the lock only if it still holds `seen` and its holder is
/// still gone. A guard left by a reclaimer that died is itself removed once its owner is gone.
fn reclaim(path: &Path, seen: &[u8]) {
    let guard = PathBuf::from(format!("{}.reclaim", path.display()));
    match try_create(&guard, &own_content()) {
        Ok(true) => {
            if std::fs::read(path).ok().as_deref() == Some(seen)
                && holder_gone(path, seen, Duration::ZERO)
            {
                let _ = std::fs::remove_file(path);
            }
            let _ = std::fs::remove_file(&guard);
        }
        Ok(false) => {
            if let Ok(bytes) = std::fs::read(&guard)
                && holder_gone(&guard, &bytes, Duration::ZERO)
                && std::fs::read(&guard).ok() == Some(bytes)
            {
                let _ = std::fs::remove_file(&guard);
            }
        }
        Err(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_lock_of_a_dead_pid_is_reclaimed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.lock");
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("true runs");
        let pid = child.id();
        child.wait().expect("reaped");
        std::fs::write(&path, format!("{pid} linux:1\n")).expect("write");
        let guard = acquire(&path, Duration::from_millis(500)).expect("reclaimed");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), own_content());
        drop(guard);
        assert!(!path.exists());
    }

    #[test]
    fn recycled_pid_is_detected_by_its_start_token() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.lock");
        // Our own pid, but a start token from another incarnation.
        std::fs::write(&path, format!("{} linux:1\n", std::process::id())).expect("write");
        let _guard = acquire(&path, Duration::from_millis(500)).expect("reclaimed");
    }

    #[test]
    fn live_holder_times_out_with_a_conflict_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.lock");
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep runs");
        let token = proc::start_token(child.id()).expect("token");
        std::fs::write(&path, format!("{} {token}\n", child.id())).expect("write");
        let err = acquire(&path, Duration::from_millis(100)).expect_err("held");
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(err.kind, crate::ErrorKind::Conflict);
        assert!(
            err.message.contains(&child.id().to_string()),
            "{}",
            err.message
        );
    }

    #[test]
    fn unverifiable_holder_counts_only_once_old() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.lock");
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep runs");
        // A live pid without a start token: unverifiable.
        std::fs::write(&path, format!("{} -\n", child.id())).expect("write");
        let fresh = acquire(&path, Duration::from_millis(100));
        let file = std::fs::File::options()
            .write(true)
            .open(&path)
            .expect("open");
        let old = SystemTime::now() - Duration::from_secs(120);
        file.set_modified(old).expect("set mtime");
        let reclaimed = acquire(&path, Duration::from_millis(100));
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(
            fresh
                .expect_err("a young unverifiable lock is respected")
                .kind,
            crate::ErrorKind::Conflict
        );
        drop(reclaimed.expect("an unverifiable lock older than 60 s is reclaimed"));
    }

    #[test]
    fn reentrant_within_one_process() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.lock");
        let a = acquire(&path, Duration::from_millis(100)).expect("first");
        let b = acquire(&path, Duration::from_millis(100)).expect("second");
        drop(b);
        assert!(path.exists(), "still held by the outer guard");
        drop(a);
        assert!(!path.exists());
    }
}
