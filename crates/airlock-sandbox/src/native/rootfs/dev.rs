//! The sandbox's minimal /dev.

use std::os::fd::BorrowedFd;
use std::path::Path;

use super::target::NewRoot;
use super::{SetupError, attach, bind, fail, symlink};
use crate::native::sys;

/// The host device nodes bound into the sandbox's /dev.
pub(crate) const DEVICE_NODES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];

/// A minimal /dev: host device nodes bound in (mknod is refused in a user namespace), a private
/// devpts instance, a tmpfs for shm, and the usual fd symlinks.
pub(super) fn dev(
    old: BorrowedFd<'_>,
    new: &NewRoot<'_>,
    target: &Path,
    shm_size: Option<&std::ffi::CStr>,
) -> Result<(), SetupError> {
    let fs = sys::new_fs(
        c"tmpfs",
        &[(c"mode", c"0755")],
        sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NOEXEC,
    )
    .map_err(fail("cannot create a tmpfs for", target))?;
    attach(new, &fs, target, true)?;
    // Read-only binds: the nodes are the host's own inodes, and a sandbox running as root owns them,
    // so a writable bind would let it chmod or chown /dev/null for the whole host. Reads and writes
    // of a device never need a writable mount (the kernel skips the check for special files); a
    // change of metadata does, and now fails with EROFS.
    for node in DEVICE_NODES {
        bind(
            old,
            new,
            &Path::new("/dev").join(node),
            &target.join(node),
            false,
        )?;
    }
    let pts = target.join("pts");
    let pts_fs = sys::new_fs(
        c"devpts",
        &[(c"ptmxmode", c"0666"), (c"mode", c"0620")],
        sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NOEXEC,
    );
    // Every devpts mount is a private instance (kernel >= 4.7): the host's ptys are not visible.
    let pts_fs = pts_fs.map_err(fail("cannot mount a new devpts on", &pts))?;
    attach(new, &pts_fs, &pts, true)?;
    symlink(new, Path::new("pts/ptmx"), &target.join("ptmx"))?;
    let mut shm_options = vec![(c"mode", c"1777")];
    if let Some(size) = shm_size {
        shm_options.push((c"size", size));
    }
    let shm = sys::new_fs(
        c"tmpfs",
        &shm_options,
        sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV,
    )
    .map_err(fail("cannot create a tmpfs for", &target.join("shm")))?;
    attach(new, &shm, &target.join("shm"), true)?;
    for (name, to) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        symlink(new, Path::new(to), &target.join(name))?;
    }
    Ok(())
}
