//! Read-only copies of small host files (the system files of /etc), written into the sandbox's
//! root tmpfs instead of bound: a copy costs a few syscalls, a bind a mount. The root tmpfs is made
//! read-only once the root is built, so a copy can be neither written nor replaced inside.

use std::ffi::CString;
use std::io::{self, Read as _, Write as _};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::target::{create_new, parent_dir};
use super::{SetupError, bind, fail, relative};
use crate::native::sys;

/// The largest file copied; a larger one is bound.
const MAX_BYTES: u64 = 1 << 20;

/// Copies `source` (beneath the host root `old`) to `target` beneath the new root, read-only.
/// Binds it read-only instead when it is not a regular file of at most [`MAX_BYTES`], when the
/// target's directory is not on the root tmpfs (a bind there: writing would reach that mount),
/// or when something is already at the target.
pub(super) fn snapshot(
    old: BorrowedFd<'_>,
    new: BorrowedFd<'_>,
    source: &Path,
    target: &Path,
) -> Result<(), SetupError> {
    match copy(old, new, source, target)? {
        Copied::Yes => Ok(()),
        Copied::No => bind(old, new, source, target, false),
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Copied {
    Yes,
    No,
}

fn copy(
    old: BorrowedFd<'_>,
    new: BorrowedFd<'_>,
    source: &Path,
    target: &Path,
) -> Result<Copied, SetupError> {
    let Ok(rel) = relative(source) else {
        return Ok(Copied::No);
    };
    // O_NONBLOCK: a FIFO put where a file was opens at once and is refused by the mode check.
    let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY;
    let Ok(from) = sys::openat2(old, &rel, flags, sys::RESOLVE_IN_ROOT) else {
        // The bind reports why the source cannot be opened.
        return Ok(Copied::No);
    };
    let st = nix::sys::stat::fstat(from.as_raw_fd())
        .map_err(|e| fail("cannot stat", source)(e.into()))?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_size as u64 > MAX_BYTES {
        return Ok(Copied::No);
    }
    let mut bytes = Vec::with_capacity(st.st_size as usize);
    std::fs::File::from(from)
        .take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(fail("cannot read", source))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Ok(Copied::No);
    }

    let (parent, name) = parent_dir(new, target)?;
    let device = |fd: BorrowedFd<'_>| {
        nix::sys::stat::fstat(fd.as_raw_fd())
            .map(|st| st.st_dev)
            .map_err(|e| fail("cannot stat the directory of", target)(e.into()))
    };
    if device(parent.as_fd())? != device(new)? {
        return Ok(Copied::No);
    }
    let name = CString::new(name.as_bytes())
        .map_err(|_| fail("invalid target", target)(io::Error::from_raw_os_error(libc::EINVAL)))?;
    let mut to = match create_new(parent.as_fd(), &name) {
        Ok(file) => file,
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => return Ok(Copied::No),
        Err(e) => return Err(fail("cannot create the copy of", source)(e)),
    };
    to.write_all(&bytes)
        .map_err(fail("cannot write the copy of", source))?;
    // The host's permission bits without setuid, setgid or sticky; fchmod ignores the umask.
    let mode = st.st_mode & 0o777;
    // SAFETY: a valid, owned fd.
    if unsafe { libc::fchmod(to.as_raw_fd(), mode) } < 0 {
        return Err(fail("cannot set the mode of the copy of", source)(
            io::Error::last_os_error(),
        ));
    }
    // The host's modification time, so tools comparing times see the file as unchanged.
    let times = [
        libc::timespec {
            tv_sec: st.st_atime,
            tv_nsec: st.st_atime_nsec,
        },
        libc::timespec {
            tv_sec: st.st_mtime,
            tv_nsec: st.st_mtime_nsec,
        },
    ];
    // SAFETY: a valid, owned fd and two timespecs.
    if unsafe { libc::futimens(to.as_raw_fd(), times.as_ptr()) } < 0 {
        return Err(fail("cannot set the times of the copy of", source)(
            io::Error::last_os_error(),
        ));
    }
    Ok(Copied::Yes)
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::fd::OwnedFd;
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};

    use super::*;

    fn dir_fd(path: &Path) -> OwnedFd {
        fs::File::open(path).expect("open dir").into()
    }

    /// A host tree (`old`) and an empty new root (`new`) on the same filesystem.
    fn roots() -> (tempfile::TempDir, OwnedFd, OwnedFd) {
        let tmp = tempfile::tempdir().expect("tempdir");
        fs::create_dir_all(tmp.path().join("old/etc")).unwrap();
        fs::create_dir_all(tmp.path().join("new")).unwrap();
        let (old, new) = (
            dir_fd(&tmp.path().join("old")),
            dir_fd(&tmp.path().join("new")),
        );
        (tmp, old, new)
    }

    fn try_copy(old: &OwnedFd, new: &OwnedFd, path: &str) -> Copied {
        copy(old.as_fd(), new.as_fd(), Path::new(path), Path::new(path)).expect("copy")
    }

    #[test]
    fn a_small_regular_file_is_copied_with_its_bits_less_setuid_and_its_mtime() {
        let (tmp, old, new) = roots();
        let host = tmp.path().join("old/etc/passwd");
        fs::write(&host, "root:x:0:0::/root:/bin/sh\n").unwrap();
        fs::set_permissions(&host, fs::Permissions::from_mode(0o4754)).unwrap();
        assert_eq!(try_copy(&old, &new, "/etc/passwd"), Copied::Yes);
        let copy = tmp.path().join("new/etc/passwd");
        assert_eq!(fs::read(&copy).unwrap(), fs::read(&host).unwrap());
        let (c, h) = (fs::metadata(&copy).unwrap(), fs::metadata(&host).unwrap());
        assert_eq!(c.mode() & 0o7777, 0o754);
        assert_eq!((c.mtime(), c.mtime_nsec()), (h.mtime(), h.mtime_nsec()));
    }

    #[test]
    fn what_is_not_a_small_regular_file_is_left_to_a_bind_and_nothing_is_created() {
        let (tmp, old, new) = roots();
        let etc = tmp.path().join("old/etc");
        fs::create_dir(etc.join("profile.d")).unwrap();
        nix::unistd::mkfifo(
            &etc.join("fifo"),
            nix::sys::stat::Mode::from_bits_truncate(0o644),
        )
        .unwrap();
        fs::write(etc.join("big"), vec![b'x'; MAX_BYTES as usize + 1]).unwrap();
        for name in ["/etc/profile.d", "/etc/fifo", "/etc/big", "/etc/missing"] {
            assert_eq!(try_copy(&old, &new, name), Copied::No, "{name}");
            assert!(
                fs::symlink_metadata(tmp.path().join("new").join(&name[1..])).is_err(),
                "{name} was created"
            );
        }
    }

    #[test]
    fn something_already_at_the_target_is_left_as_it_is() {
        let (tmp, old, new) = roots();
        fs::write(tmp.path().join("old/etc/group"), "host\n").unwrap();
        fs::create_dir_all(tmp.path().join("new/etc")).unwrap();
        fs::write(tmp.path().join("new/etc/group"), "earlier\n").unwrap();
        assert_eq!(try_copy(&old, &new, "/etc/group"), Copied::No);
        assert_eq!(
            fs::read_to_string(tmp.path().join("new/etc/group")).unwrap(),
            "earlier\n"
        );
    }

    #[test]
    fn a_link_planted_at_the_target_is_neither_followed_nor_replaced() {
        let (tmp, old, new) = roots();
        fs::write(tmp.path().join("old/etc/group"), "host\n").unwrap();
        let outside = tmp.path().join("outside");
        fs::create_dir_all(tmp.path().join("new/etc")).unwrap();
        std::os::unix::fs::symlink(&outside, tmp.path().join("new/etc/group")).unwrap();
        assert_eq!(try_copy(&old, &new, "/etc/group"), Copied::No);
        assert!(
            fs::symlink_metadata(&outside).is_err(),
            "the link was followed"
        );
    }
}
