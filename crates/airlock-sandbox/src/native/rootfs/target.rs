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
    let flags = libc::O_PATH | libc::O_NOFOLLOW;
    match sys::openat2(
        parent.as_fd(),
        &name_c,
        flags,
        sys::RESOLVE_NO_SYMLINKS | sys::RESOLVE_BENEATH,
    ) {
        Ok(fd) => {
            let st = nix::sys::stat::fstat(fd.as_raw_fd())
                .map_err(|e| fail("cannot stat mount target", target)(e.into()))?;
            if st.st_mode & libc::S_IFMT == libc::S_IFLNK {
                return Err(symlink_refused(target));
            }
            Ok(fd)
        }
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
            // SAFETY: valid fd and C string; the created file is closed right away.
            let fd = unsafe {
                libc::openat(
                    parent.as_raw_fd(),
                    name_c.as_ptr(),
                    libc::O_CREAT
                        | libc::O_EXCL
                        | libc::O_WRONLY
                        | libc::O_NOFOLLOW
                        | libc::O_CLOEXEC,
                    0o644,
                )
            };
            if fd < 0 {
                return Err(fail("cannot create mount point", target)(
                    io::Error::last_os_error(),
                ));
            }
            // SAFETY: freshly opened, closed here.
            drop(unsafe { OwnedFd::from_raw_fd(fd) });
            sys::openat2(
                parent.as_fd(),
                &name_c,
                flags,
                sys::RESOLVE_NO_SYMLINKS | sys::RESOLVE_BENEATH,
            )
            .map_err(fail("cannot open mount point", target))
        }
        Err(e) => Err(symlink_aware(target)(e)),
    }
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
