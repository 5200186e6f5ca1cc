//! Host-side preparation of a launch: the spec's [`PrepareStep`]s (overlay layer dirs, seeded copies
//! of tool files, generated files), and the lease on the sandbox's persistent overlay layers.
//!
//! Only one overlay may use an upper dir at a time, so the first session of a project takes an
//! exclusive lease on `overlay.lock`; a later concurrent session sees the owner's upper read-only,
//! under a throwaway upper of its own (`Upper::Stacked`), so its writes are discarded.

use std::fs::{self, File};
use std::io;
use std::path::Path;

use std::time::{Duration, Instant};

use super::files::{create_private_dir_all, open_lock_file, remove_tree};
use super::locks::{count_live_sessions, try_flock};
use super::{SESSIONS_DIR, StateError, io_err};
use crate::spec::PrepareStep;

/// Held for a session's life by the session that owns the persistent overlay layers, and let go
/// only once its overlays are unmounted.
#[derive(Debug)]
pub struct OverlayLease {
    file: File,
}

impl OverlayLease {
    /// A copy of the lease's descriptor: the lock is held until every copy is closed.
    pub fn try_clone_fd(&self) -> std::io::Result<std::os::fd::OwnedFd> {
        self.file.try_clone().map(Into::into)
    }
}

/// What [`lease_overlays`] got.
#[derive(Debug)]
pub enum Lease {
    /// This session owns the overlay layers.
    Taken(OverlayLease),
    /// Another live session owns them.
    InUse,
    /// A session that has ended still had them mounted after [`LEASE_WAIT`]: its closer lets the
    /// lease go once their unmount (a sync of their file system) is done.
    Unmounting,
}

/// How long a session waits for the overlay lease of one that has ended.
pub const LEASE_WAIT: Duration = Duration::from_secs(5);

/// Takes the overlay lease of the sandbox at `state_root`, for a session registered there.
///
/// The lease is held by a live session, or by the closer of one that has ended, which lets it go
/// once that sandbox's overlays are unmounted, a few milliseconds after its airlock exited. When
/// no other session is live, the holder is such a closer, and this waits for it (at most
/// [`LEASE_WAIT`]).
pub fn lease_overlays(state_root: &Path) -> Result<Lease, StateError> {
    lease_overlays_within(state_root, LEASE_WAIT)
}

fn lease_overlays_within(state_root: &Path, wait: Duration) -> Result<Lease, StateError> {
    let path = state_root.join("overlay.lock");
    let file = open_lock_file(&path).map_err(io_err("open", &path))?;
    let deadline = Instant::now() + wait;
    let mut counted = false;
    loop {
        if try_flock(&file, libc::LOCK_EX).map_err(io_err("lock", &path))? {
            return Ok(Lease::Taken(OverlayLease { file }));
        }
        // This session's own file counts as one.
        if !std::mem::replace(&mut counted, true)
            && count_live_sessions(&state_root.join(SESSIONS_DIR)) > 1
        {
            return Ok(Lease::InUse);
        }
        if Instant::now() >= deadline {
            return Ok(Lease::Unmounting);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Performs the prepare steps in order. Idempotent: a step left half-done by a crashed session is
/// redone (a seeded copy is never overwritten).
pub fn prepare(steps: &[PrepareStep]) -> Result<(), StateError> {
    for step in steps {
        match step {
            PrepareStep::OverlayDirs { dir } => {
                // The work dir is reused as the last mount left it: the kernel empties its own
                // `work/work` (mode 000, and whatever an interrupted copy-up left there) when it
                // mounts the overlay again, without following a link, so the host never walks it.
                create_private_dir_all(&dir.join("upper"))?;
                create_private_dir_all(&dir.join("work"))?;
            }
            PrepareStep::SeedFile { from, to } => {
                if fs::symlink_metadata(to).is_ok() {
                    continue;
                }
                if let Some(parent) = to.parent() {
                    create_private_dir_all(parent)?;
                }
                let bytes = fs::read(from).map_err(io_err("read", from))?;
                replace(to, &bytes, true)?;
            }
            PrepareStep::WriteFile { path, content } => {
                // The same as the last launch wrote: reading it back costs less than a write and
                // a rename.
                if fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
                    && fs::read(path).is_ok_and(|old| old == content.as_bytes())
                {
                    continue;
                }
                if let Some(parent) = path.parent() {
                    create_private_dir_all(parent)?;
                }
                replace(path, content.as_bytes(), false)?;
            }
            PrepareStep::Symlinks {
                dir,
                link_to,
                names,
            } => symlinks(dir, link_to, names)?,
        }
    }
    Ok(())
}

/// Leaves `dir` holding exactly `names`, each a symlink to `link_to`; anything else is removed.
fn symlinks(dir: &Path, link_to: &Path, names: &[String]) -> Result<(), StateError> {
    create_private_dir_all(dir)?;
    let plain = |n: &str| !n.is_empty() && n != "." && n != ".." && !n.contains('/');
    // The names already right, each read once.
    let mut right = std::collections::HashSet::new();
    for entry in fs::read_dir(dir).map_err(io_err("read", dir))?.flatten() {
        let path = entry.path();
        let file_name = entry.file_name();
        let wanted = file_name
            .to_str()
            .filter(|n| names.iter().any(|w| w == n))
            .filter(|_| fs::read_link(&path).is_ok_and(|to| to == link_to));
        if let Some(name) = wanted {
            right.insert(name.to_owned());
        } else {
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            let removed = if is_dir {
                remove_tree(&path)
            } else {
                fs::remove_file(&path)
            };
            removed
                .or_else(ignore_missing)
                .map_err(io_err("remove", &path))?;
        }
    }
    for name in names.iter().filter(|n| plain(n)) {
        if right.insert(name.clone()) {
            let path = dir.join(name);
            std::os::unix::fs::symlink(link_to, &path).map_err(io_err("create", &path))?;
        }
    }
    Ok(())
}

fn ignore_missing(e: io::Error) -> io::Result<()> {
    if e.kind() == io::ErrorKind::NotFound {
        Ok(())
    } else {
        Err(e)
    }
}

/// Writes `bytes` to a temp file beside `path`, then renames (or, with `keep_existing`, hard-links)
/// it into place, so no reader ever sees half a file.
/// Replaces `path` with `bytes` at once: a reader sees the old file or the new one.
pub(crate) fn replace_file(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    replace(path, bytes, false)
}

fn replace(path: &Path, bytes: &[u8], keep_existing: bool) -> Result<(), StateError> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let _ = fs::remove_file(&tmp);
    fs::write(&tmp, bytes).map_err(io_err("write", &tmp))?;
    let placed = if keep_existing {
        match fs::hard_link(&tmp, path) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            other => other,
        }
    } else {
        fs::rename(&tmp, path)
    };
    let _ = fs::remove_file(&tmp);
    placed.map_err(io_err("write", path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;
    use std::path::PathBuf;

    #[test]
    fn overlay_dirs_are_made_once_and_a_used_work_dir_is_left_to_the_kernel() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layers = dir.path().join("overlay/x");
        let steps = [PrepareStep::OverlayDirs {
            dir: layers.clone(),
        }];
        prepare(&steps).expect("prepare");
        assert!(layers.join("upper").is_dir() && layers.join("work").is_dir());
        // What a mount leaves (the kernel's mode-000 `work/work`), and what an interrupted
        // copy-up may leave in it: an entry the sandbox named, here a link out.
        fs::write(layers.join("upper/kept"), "x").expect("upper file");
        let host = dir.path().join("host-secret");
        fs::write(&host, "kept").expect("host file");
        fs::create_dir_all(layers.join("work/work")).expect("used work");
        std::os::unix::fs::symlink(&host, layers.join("work/work/#1")).expect("link");
        fs::set_permissions(layers.join("work/work"), fs::Permissions::from_mode(0o000))
            .expect("mode 000");
        prepare(&steps).expect("prepare again");
        assert!(layers.join("upper/kept").exists());
        assert!(layers.join("work/work").is_dir(), "left for the kernel");
        assert_eq!(fs::read_to_string(&host).expect("host file"), "kept");
        fs::set_permissions(layers.join("work/work"), fs::Permissions::from_mode(0o700))
            .expect("mode 700");
    }

    #[test]
    fn seeded_copies_are_made_once_and_generated_files_replaced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let host = dir.path().join("host.json");
        fs::write(&host, "v1").expect("host file");
        let copy: PathBuf = dir.path().join("files/claude.json");
        let seed = [PrepareStep::SeedFile {
            from: host.clone(),
            to: copy.clone(),
        }];
        prepare(&seed).expect("seed");
        fs::write(&host, "v2").expect("host changes");
        fs::write(&copy, "sandbox edit").expect("sandbox changes its copy");
        prepare(&seed).expect("seed again");
        assert_eq!(fs::read_to_string(&copy).expect("copy"), "sandbox edit");

        let generated = dir.path().join("generated/gitconfig");
        for content in ["a", "b"] {
            let steps = [PrepareStep::WriteFile {
                path: generated.clone(),
                content: content.into(),
            }];
            prepare(&steps).expect("write");
        }
        assert_eq!(fs::read_to_string(&generated).expect("generated"), "b");
    }

    /// Registers a live session in `root` as `open_session` does (an exclusively locked file).
    fn live_session(root: &Path, name: &str) -> File {
        let sessions = root.join(SESSIONS_DIR);
        fs::create_dir_all(&sessions).expect("sessions");
        let file = File::create(sessions.join(name)).expect("session file");
        assert!(try_flock(&file, libc::LOCK_EX).expect("lock"));
        file
    }

    #[test]
    fn only_one_live_session_leases_the_overlays() {
        let dir = tempfile::tempdir().expect("tempdir");
        let _first_session = live_session(dir.path(), "1");
        let first = lease_overlays(dir.path()).expect("lease");
        assert!(matches!(first, Lease::Taken(_)), "{first:?}");
        let _second_session = live_session(dir.path(), "2");
        let started = Instant::now();
        let second = lease_overlays(dir.path()).expect("second");
        assert!(matches!(second, Lease::InUse), "{second:?}");
        assert!(
            started.elapsed() < LEASE_WAIT,
            "a live session's lease is not waited for"
        );
        drop(first);
        let third = lease_overlays(dir.path()).expect("third");
        assert!(matches!(third, Lease::Taken(_)), "{third:?}");
    }

    #[test]
    fn an_ended_sessions_lease_is_waited_for_until_its_closer_lets_go() {
        // The ended session's closer: the lease held, no session file.
        let dir = tempfile::tempdir().expect("tempdir");
        let _this_session = live_session(dir.path(), "2");
        let Lease::Taken(closer) = lease_overlays(dir.path()).expect("lease") else {
            panic!("the first lease");
        };
        let letting_go = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(closer);
        });
        let started = Instant::now();
        let lease = lease_overlays(dir.path()).expect("second");
        assert!(matches!(lease, Lease::Taken(_)), "{lease:?}");
        assert!(started.elapsed() >= Duration::from_millis(90));
        letting_go.join().expect("thread");

        // A closer that never lets go: the wait ends, and says why.
        let held = lease;
        let started = Instant::now();
        let late = lease_overlays_within(dir.path(), Duration::from_millis(100)).expect("late");
        assert!(matches!(late, Lease::Unmounting), "{late:?}");
        assert!(started.elapsed() >= Duration::from_millis(100));
        drop(held);
    }
}
