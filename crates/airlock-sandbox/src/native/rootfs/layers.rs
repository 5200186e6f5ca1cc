//! Overlays (persistent or throwaway uppers) and private file copies: the tool mounts whose writes
//! must not reach the host.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::Path;

use super::target::{NewRoot, open_or_mkdir};
use super::{SetupError, attach, fail, relative};
use crate::native::sys;

/// A fresh name in the base tmpfs for throwaway overlay layers and file copies.
fn scratch_name(base: BorrowedFd<'_>, prefix: &str) -> io::Result<CString> {
    for n in 0u32.. {
        let name = CString::new(format!("{prefix}-{n}"))
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        match sys::openat2(base, &name, libc::O_PATH, sys::RESOLVE_BENEATH) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(name),
            _ => continue,
        }
    }
    Err(io::Error::from_raw_os_error(libc::ENOSPC))
}

pub(super) fn overlay(
    old: BorrowedFd<'_>,
    new: &NewRoot<'_>,
    base: BorrowedFd<'_>,
    lower: &Path,
    target: &Path,
    upper: &crate::spec::Upper,
) -> Result<(), SetupError> {
    let dir_flags = libc::O_PATH | libc::O_DIRECTORY;
    let rel = relative(lower).map_err(fail("invalid overlay lower dir", lower))?;
    let lower_fd = sys::openat2(old, &rel, dir_flags, sys::RESOLVE_IN_ROOT)
        .map_err(fail("cannot open overlay lower dir", lower))?;
    let open_state = |dir: &Path| {
        let rel = relative(dir).map_err(fail("invalid overlay dir", dir))?;
        sys::openat2(old, &rel, dir_flags, sys::RESOLVE_IN_ROOT)
            .map_err(fail("cannot open overlay dir", dir))
    };
    let throwaway = || {
        let name = scratch_name(base, "overlay")
            .map_err(fail("cannot name a throwaway layer for", target))?;
        open_or_mkdir(base, &name).map_err(fail("cannot create a throwaway layer for", target))
    };
    // A stacked layer: the owner's upper is one more (read-only) lower, above the host's dir.
    let mut saved = None;
    let layers = match upper {
        crate::spec::Upper::Persistent { dir } | crate::spec::Upper::Owned { dir } => {
            open_state(dir)?
        }
        crate::spec::Upper::Throwaway => throwaway()?,
        crate::spec::Upper::Stacked { dir } => {
            let upper = dir.join("upper");
            saved = open_state(&upper).ok();
            throwaway()?
        }
    };
    let layer = |name: &CStr| {
        open_or_mkdir(layers.as_fd(), name)
            .map_err(fail("cannot open the overlay layers of", target))
    };
    let (upper_fd, work_fd) = (layer(c"upper")?, layer(c"work")?);
    // Paths through /proc/self/fd: the layers were resolved safely above, and the kernel follows
    // these magic links to exactly those directories, whatever the paths contain.
    let via_fd = |fd: &OwnedFd| {
        CString::new(format!("/oldroot/proc/self/fd/{}", fd.as_raw_fd())).map_err(|_| {
            fail("invalid overlay path for", target)(io::Error::from_raw_os_error(libc::EINVAL))
        })
    };
    let (mut l, u, w) = (via_fd(&lower_fd)?, via_fd(&upper_fd)?, via_fd(&work_fd)?);
    if let Some(saved) = &saved {
        // lowerdir lists the top layer first.
        let mut both = via_fd(saved)?.into_bytes();
        both.push(b':');
        both.extend_from_slice(l.as_bytes());
        l = CString::new(both).map_err(|_| {
            fail("invalid overlay path for", target)(io::Error::from_raw_os_error(libc::EINVAL))
        })?;
    }
    let attrs = sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV;
    let options = [
        (c"lowerdir", l.as_c_str()),
        (c"upperdir", u.as_c_str()),
        (c"workdir", w.as_c_str()),
    ];
    let mut with_userxattr = options.to_vec();
    with_userxattr.push((c"userxattr", c""));
    // user.* xattrs are what an unprivileged overlay can write; older kernels lack the option.
    let fs = sys::new_fs(c"overlay", &with_userxattr, attrs)
        .or_else(|_| sys::new_fs(c"overlay", &options, attrs))
        .map_err(fail("cannot mount an overlay on", target))?;
    attach(new, &fs, target, true)
}

pub(super) fn copy_file(
    old: BorrowedFd<'_>,
    new: &NewRoot<'_>,
    base: BorrowedFd<'_>,
    source: &Path,
    target: &Path,
) -> Result<(), SetupError> {
    let rel = relative(source).map_err(fail("invalid file to copy", source))?;
    let from = sys::openat2(old, &rel, libc::O_RDONLY, sys::RESOLVE_IN_ROOT)
        .map_err(fail("cannot open", source))?;
    let name = scratch_name(base, "copy").map_err(fail("cannot name a private copy of", source))?;
    // SAFETY: valid fd and C string; the fd is owned right below.
    let raw = unsafe {
        libc::openat(
            base.as_raw_fd(),
            name.as_ptr(),
            libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600,
        )
    };
    if raw < 0 {
        return Err(fail("cannot create a private copy of", source)(
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: freshly opened.
    let mut to = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(raw) });
    let mut from = std::fs::File::from(from);
    std::io::copy(&mut from, &mut to).map_err(fail("cannot copy", source))?;
    drop(to);
    let copy = sys::openat2(base, &name, libc::O_PATH, sys::RESOLVE_BENEATH)
        .map_err(fail("cannot open the private copy of", source))?;
    let tree = sys::clone_tree(copy.as_fd(), false)
        .map_err(fail("cannot bind the private copy of", source))?;
    attach(new, &tree, target, false)
}
