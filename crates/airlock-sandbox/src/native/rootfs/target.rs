//! Mount targets beneath the new root: opened (and created when missing) one component at a time,
//! refusing every symlink, so nothing planted in the project or the synthetic home can redirect a
//! mount onto another path.

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use super::{SetupError, fail};
use crate::native::sys;

/// Opens (creating when missing) `target` beneath `root`, refusing any symlink on the way.
pub(super) fn mount_point(
    root: BorrowedFd<'_>,
    target: &Path,
    is_dir: bool,
) -> Result<OwnedFd, SetupError> {
    let (parent, name) = parent_dir(root, target)?;
    let name_c = CString::new(name.as_bytes()).map_err(|_| {
        fail("invalid mount target", target)(io::Error::from_raw_os_error(libc::EINVAL))
    })?;
    if is_dir {
        return open_or_mkdir(parent.as_fd(), &name_c).map_err(symlink_aware(target));
    }
    // The new root is airlock's own tmpfs, so a file target is nearly always missing: it is
    // created first. `O_EXCL` never follows or reuses an existing name (a symlink included): that
    // fails with EEXIST and takes the checked open below. The created file's descriptor is the
    // mount point itself, so no second open is needed.
    // SAFETY: valid fd and C string; the result is owned at once.
    let created = unsafe {
        libc::openat(
            parent.as_raw_fd(),
            name_c.as_ptr(),
            libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o644,
        )
    };
    if created >= 0 {
        // SAFETY: freshly opened, owned from here.
        return Ok(unsafe { OwnedFd::from_raw_fd(created) });
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() != Some(libc::EEXIST) {
        return Err(fail("cannot create mount point", target)(err));
    }
    let fd = sys::openat2(
        parent.as_fd(),
        &name_c,
        libc::O_PATH | libc::O_NOFOLLOW,
        sys::RESOLVE_NO_SYMLINKS | sys::RESOLVE_BENEATH,
    )
    .map_err(symlink_aware(target))?;
    let st = nix::sys::stat::fstat(fd.as_raw_fd())
        .map_err(|e| fail("cannot stat mount target", target)(e.into()))?;
    if st.st_mode & libc::S_IFMT == libc::S_IFLNK {
        return Err(symlink_refused(target));
    }
    Ok(fd)
}

/// The directory holding `target`'s last component (created as needed) and that component's name.
pub(super) fn parent_dir<'a>(
    root: BorrowedFd<'_>,
    target: &'a Path,
) -> Result<(OwnedFd, &'a OsStr), SetupError> {
    let mut names: Vec<&OsStr> = Vec::new();
    for component in target.components() {
        match component {
            Component::RootDir => {}
            Component::Normal(name) => names.push(name),
            _ => {
                return Err(fail("invalid mount target", target)(
                    io::Error::from_raw_os_error(libc::EINVAL),
                ));
            }
        }
    }
    let Some(last) = names.pop() else {
        return Err(fail("invalid mount target", target)(
            io::Error::from_raw_os_error(libc::EINVAL),
        ));
    };
    // Most parents exist already (`/etc`, the home): one resolution of the whole path, with the
    // same rule as the walk below (no symlink in any component, nothing above the root), instead
    // of one `openat2` and one `close` per component. Only a missing directory takes the walk.
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW;
    let resolve = sys::RESOLVE_NO_SYMLINKS | sys::RESOLVE_BENEATH;
    let parent_path = names
        .iter()
        .fold(std::ffi::OsString::from("."), |mut path, name| {
            path.push("/");
            path.push(name);
            path
        });
    let parent_c = CString::new(parent_path.as_bytes()).map_err(|_| {
        fail("invalid mount target", target)(io::Error::from_raw_os_error(libc::EINVAL))
    })?;
    match sys::openat2(root, &parent_c, flags, resolve) {
        Ok(dir) => return Ok((dir, last)),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
        Err(e) => return Err(symlink_aware(target)(e)),
    }
    let mut dir = sys::openat2(root, c".", libc::O_PATH | libc::O_DIRECTORY, 0)
        .map_err(fail("cannot open the new root for", target))?;
    for name in names {
        let name_c = CString::new(name.as_bytes()).map_err(|_| {
            fail("invalid mount target", target)(io::Error::from_raw_os_error(libc::EINVAL))
        })?;
        dir = open_or_mkdir(dir.as_fd(), &name_c).map_err(symlink_aware(target))?;
    }
    Ok((dir, last))
}

pub(crate) fn open_or_mkdir(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<OwnedFd> {
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW;
    let resolve = sys::RESOLVE_NO_SYMLINKS | sys::RESOLVE_BENEATH;
    match sys::openat2(dir, name, flags, resolve) {
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
            // SAFETY: valid fd and C string.
            if unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o755) } < 0 {
                let err = io::Error::last_os_error();
                if err.raw_os_error() != Some(libc::EEXIST) {
                    return Err(err);
                }
            }
            sys::openat2(dir, name, flags, resolve)
        }
        other => other,
    }
}

fn symlink_refused(target: &Path) -> SetupError {
    SetupError {
        what: "refusing to mount through a symlink at".into(),
        path: target.to_owned(),
        source: io::Error::from_raw_os_error(libc::ELOOP),
    }
}

fn symlink_aware(target: &Path) -> impl FnOnce(io::Error) -> SetupError + '_ {
    move |e| match e.raw_os_error() {
        Some(libc::ELOOP) | Some(libc::ENOTDIR) | Some(libc::EXDEV) => symlink_refused(target),
        _ => fail("cannot create mount point", target)(e),
    }
}
