//! Host-side preparation of a launch: the spec's [`PrepareStep`]s (overlay layer dirs, seeded copies
//! of tool files, generated files), and the lease on the sandbox's persistent overlay layers.
//!
//! Only one overlay may use an upper dir at a time, so the first session of a project takes an
//! exclusive lease on `overlay.lock`; a later concurrent session sees the owner's upper read-only,
//! under a throwaway upper of its own (`Upper::Stacked`), so its writes are discarded.

use std::fs::{self, File};
use std::io;
use std::path::Path;

use super::files::{create_private_dir_all, open_lock_file, remove_tree};
use super::locks::try_flock;
use super::{StateError, io_err};
use crate::spec::PrepareStep;

/// Held for a session's life by the session that owns the persistent overlay layers.
#[derive(Debug)]
pub struct OverlayLease {
    _file: File,
}

/// Takes the overlay lease of the sandbox at `state_root`, or None when another session holds it.
pub fn lease_overlays(state_root: &Path) -> Result<Option<OverlayLease>, StateError> {
    let path = state_root.join("overlay.lock");
    let file = open_lock_file(&path).map_err(io_err("open", &path))?;
    let got = try_flock(&file, libc::LOCK_EX).map_err(io_err("lock", &path))?;
    Ok(got.then_some(OverlayLease { _file: file }))
}

/// Performs the prepare steps in order. Idempotent: a step left half-done by a crashed session is
/// redone (a stale overlay work dir is emptied, a seeded copy is never overwritten).
pub fn prepare(steps: &[PrepareStep]) -> Result<(), StateError> {
    for step in steps {
        match step {
            PrepareStep::OverlayDirs { dir } => {
                create_private_dir_all(&dir.join("upper"))?;
                let work = dir.join("work");
                // The kernel leaves `work/work` (mode 000) behind; a fresh work dir is always
                // valid. The old one is set aside (a rename: half what removing it costs here)
                // and removed at the session's end ([`clear_stale_work`]), else removed now.
                if !set_aside(&work, &dir.join(STALE_WORK)) {
                    remove_tree(&work)
                        .or_else(ignore_missing)
                        .map_err(io_err("reset", &work))?;
                }
                create_private_dir_all(&work)?;
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

/// Where an overlay's old work dirs wait for [`clear_stale_work`], beside `upper` and `work`.
const STALE_WORK: &str = "stale-work";

/// Moves `work` into `stale` under a name of its own (true too when there is none); false when
/// it could not, and `work` is where it was.
fn set_aside(work: &Path, stale: &Path) -> bool {
    if fs::symlink_metadata(work).is_err() {
        return true;
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let name = stale.join(format!("{}-{nanos}", std::process::id()));
    create_private_dir_all(stale).is_ok() && fs::rename(work, name).is_ok()
}

/// Removes the work dirs the prepare steps of `steps` set aside: call it once the launch is
/// over (they are earlier sessions', which no mount uses), while the sandbox's own mounts are
/// still being torn down. Best effort: what is left goes at a later session's end.
pub fn clear_stale_work(steps: &[PrepareStep]) {
    for step in steps {
        if let PrepareStep::OverlayDirs { dir } = step {
            let _ = remove_tree(&dir.join(STALE_WORK));
        }
    }
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
    fn overlay_dirs_reset_a_stale_work_dir_and_keep_the_upper() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layers = dir.path().join("overlay/x");
        fs::create_dir_all(layers.join("upper")).expect("upper");
        fs::write(layers.join("upper/kept"), "x").expect("upper file");
        fs::create_dir_all(layers.join("work/work")).expect("stale work");
        let steps = [PrepareStep::OverlayDirs {
            dir: layers.clone(),
        }];
        prepare(&steps).expect("prepare");
        assert!(layers.join("upper/kept").exists());
        assert_eq!(fs::read_dir(layers.join("work")).expect("work").count(), 0);
        // The old work dir waits beside it, kernel's mode 000 and all, until the session's end.
        let stale = layers.join(STALE_WORK);
        assert_eq!(fs::read_dir(&stale).expect("stale").count(), 1);
        fs::create_dir_all(layers.join("work/work")).expect("stale work again");
        fs::set_permissions(layers.join("work/work"), fs::Permissions::from_mode(0o000))
            .expect("mode 000");
        prepare(&steps).expect("prepare again");
        assert_eq!(fs::read_dir(&stale).expect("stale").count(), 2);
        clear_stale_work(&steps);
        assert!(!stale.exists(), "cleared at the session's end");
        assert!(layers.join("upper/kept").exists());
        assert!(layers.join("work").is_dir());
    }

    #[test]
    fn a_link_left_in_an_old_work_dir_is_removed_never_followed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let host = dir.path().join("host-secret");
        fs::write(&host, "kept").expect("host file");
        let layers = dir.path().join("overlay/x");
        // What a crashed session's copy-up may leave: an entry the sandbox named, here a link out.
        fs::create_dir_all(layers.join("work/work")).expect("stale work");
        std::os::unix::fs::symlink(&host, layers.join("work/work/#1")).expect("link");
        std::os::unix::fs::symlink(dir.path(), layers.join("work/up")).expect("dir link");
        let steps = [PrepareStep::OverlayDirs {
            dir: layers.clone(),
        }];
        prepare(&steps).expect("prepare");
        clear_stale_work(&steps);
        assert!(!layers.join(STALE_WORK).exists());
        assert_eq!(fs::read_to_string(&host).expect("host file"), "kept");
        assert!(dir.path().join("overlay/x/upper").is_dir());
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

    #[test]
    fn only_one_session_leases_the_overlays() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = lease_overlays(dir.path()).expect("lease");
        assert!(first.is_some());
        assert!(lease_overlays(dir.path()).expect("second").is_none());
        drop(first);
        assert!(lease_overlays(dir.path()).expect("third").is_some());
    }
}
