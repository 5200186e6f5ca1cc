//! Mount targets beneath the new root: opened (and created when missing) one component at a time,
//! refusing every symlink, so nothing planted in the project or the synthetic home can redirect a
//! mount onto another path.

use std::cell::RefCell;
use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

use super::{SetupError, fail};
use crate::native::sys;

/// The new root, and the directory the last target was created in. Targets come in runs under
/// one parent (`/dev/*`, `/etc/*`: 81 parents resolved for the default spec, 30 of them
/// different), so a target under the same parent as the one before it reuses that directory
/// instead of resolving it again. Only airlock writes the new root while it is built, and a mount
/// on the remembered directory or above it forgets it ([`NewRoot::mounted_on`]; `attach` also
/// looks up its own target's parent first, which replaces it), so the reused directory is the one
/// a fresh resolution would open.
pub(super) struct NewRoot<'a> {
    pub(super) fd: BorrowedFd<'a>,
    last_parent: RefCell<Option<(PathBuf, Rc<OwnedFd>)>>,
}

impl<'a> NewRoot<'a> {
    pub(super) fn new(fd: BorrowedFd<'a>) -> NewRoot<'a> {
        NewRoot {
            fd,
            last_parent: RefCell::new(None),
        }
    }

    /// Called once something is mounted on `target`: a remembered directory at or beneath it is
    /// now covered by that mount.
    pub(super) fn mounted_on(&self, target: &Path) {
        let mut last = self.last_parent.borrow_mut();
        if last
            .as_ref()
            .is_some_and(|(parent, _)| parent.starts_with(target))
        {
            *last = None;
        }
    }
}

/// Opens (creating when missing) `target` beneath `root`, refusing any symlink on the way.
pub(super) fn mount_point(
    root: &NewRoot<'_>,
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
    root: &NewRoot<'_>,
    target: &'a Path,
) -> Result<(Rc<OwnedFd>, &'a OsStr), SetupError> {
    let parent = target.parent().unwrap_or(target);
    if let Some((last, dir)) = &*root.last_parent.borrow()
        && last == parent
    {
        let name = target.file_name().ok_or_else(|| {
            fail("invalid mount target", target)(io::Error::from_raw_os_error(libc::EINVAL))
        })?;
        return Ok((dir.clone(), name));
    }
    let (dir, name) = resolve_parent(root.fd, target)?;
    let dir = Rc::new(dir);
    *root.last_parent.borrow_mut() = Some((parent.to_path_buf(), dir.clone()));
    Ok((dir, name))
}

/// [`parent_dir`] without the remembered directory.
fn resolve_parent<'a>(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::native::forked::assert_ok;

    /// In a user and mount namespace of its own (the forked child is single-threaded): a tmpfs
    /// root for [`NewRoot`], as init's new root is.
    fn scratch_root() -> Result<OwnedFd, String> {
        let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
        nix::sched::unshare(
            nix::sched::CloneFlags::CLONE_NEWUSER | nix::sched::CloneFlags::CLONE_NEWNS,
        )
        .map_err(|e| format!("unshare: {e}"))?;
        for (file, line) in [
            ("setgroups", "deny".to_string()),
            ("uid_map", format!("0 {uid} 1")),
            ("gid_map", format!("0 {gid} 1")),
        ] {
            std::fs::write(format!("/proc/self/{file}"), line)
                .map_err(|e| format!("{file}: {e}"))?;
        }
        let fs = sys::new_fs(c"tmpfs", &[], 0).map_err(|e| format!("tmpfs: {e}"))?;
        Ok(fs)
    }

    #[test]
    fn a_mount_on_the_remembered_parent_makes_the_next_target_go_on_top_of_it() {
        assert_ok(|| {
            let fs = scratch_root()?;
            let root = NewRoot::new(fs.as_fd());
            let exists = |path: &CStr| {
                sys::openat2(fs.as_fd(), path, libc::O_PATH, sys::RESOLVE_BENEATH).is_ok()
            };
            // `/a/x` remembers `/a`; the next target under it reuses it.
            mount_point(&root, Path::new("/a/x"), true).map_err(|e| e.to_string())?;
            let first = root
                .last_parent
                .borrow()
                .as_ref()
                .map(|(_, d)| d.as_raw_fd());
            mount_point(&root, Path::new("/a/w"), true).map_err(|e| e.to_string())?;
            let again = root
                .last_parent
                .borrow()
                .as_ref()
                .map(|(_, d)| d.as_raw_fd());
            if first.is_none() || first != again {
                return Err(format!(
                    "the parent was not reused: {first:?}, then {again:?}"
                ));
            }
            // A tmpfs on `/a` covers it: `/a/y` must land on that tmpfs, not in the covered dir.
            // (`attach` resolves `/`, the parent of its own target, first, which replaces what
            // was remembered already; this mount is made without it, as any other route could.)
            let cover = sys::new_fs(c"tmpfs", &[], 0).map_err(|e| format!("tmpfs: {e}"))?;
            let a = sys::openat2(fs.as_fd(), c"a", libc::O_PATH, sys::RESOLVE_BENEATH)
                .map_err(|e| format!("open a: {e}"))?;
            sys::move_mount(cover.as_fd(), a.as_fd()).map_err(|e| format!("mount on a: {e}"))?;
            root.mounted_on(Path::new("/a"));
            mount_point(&root, Path::new("/a/y"), true).map_err(|e| e.to_string())?;
            if !exists(c"a/y") || exists(c"a/x") {
                return Err(format!(
                    "after the mount on /a, /a/y is there: {}, the covered /a/x shows: {}",
                    exists(c"a/y"),
                    exists(c"a/x")
                ));
            }
            Ok(())
        });
    }
}
