//! Step 3 of a launch: build the sandbox's root from the spec's mount operations, then pivot into it.
//!
//! Runs in the sandbox's init (PID 1 of the new namespaces) before anything else. Sources are opened
//! beneath the old root with `RESOLVE_IN_ROOT`, so a host symlink resolves as it does on the host;
//! targets are opened beneath the new root refusing every symlink, so nothing the sandbox planted
//! (in the project or the synthetic home) can redirect a mount onto another path.

use std::ffi::{CStr, CString, OsStr};
use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use nix::mount::{MntFlags, MsFlags, mount, umount2};

use super::sys;
use crate::spec::MountOp;

/// A failed step, with the path it was about and the kernel's error.
#[derive(Debug)]
pub struct SetupError {
    pub what: String,
    pub path: PathBuf,
    pub source: io::Error,
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.what, self.path.display(), self.source)
    }
}

fn fail(what: &str, path: &Path) -> impl FnOnce(io::Error) -> SetupError {
    let what = what.to_owned();
    let path = path.to_owned();
    move |source| SetupError { what, path, source }
}

fn cstr(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `path` relative to `/`, or an error when it is not a plain absolute path.
fn relative(path: &Path) -> io::Result<CString> {
    let mut rel = PathBuf::new();
    for component in path.components() {
        match component {
            Component::RootDir => {}
            Component::Normal(name) => rel.push(name),
            _ => return Err(io::Error::from_raw_os_error(libc::EINVAL)),
        }
    }
    if rel.as_os_str().is_empty() {
        rel.push(".");
    }
    cstr(&rel)
}

/// Builds the new root and pivots into it. Afterwards the host tree is gone from this mount namespace.
pub fn build(mounts: &[MountOp], hostname: &str) -> Result<(), SetupError> {
    let root = Path::new("/");
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| fail("cannot make mounts private at", root)(e.into()))?;

    // The base: a tmpfs holding `oldroot/` (the host tree) and `newroot/` (the sandbox's root).
    let base = Path::new("/tmp");
    mount(
        Some("tmpfs"),
        base,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0700"),
    )
    .map_err(|e| fail("cannot mount the base tmpfs on", base)(e.into()))?;
    nix::unistd::chdir(base).map_err(|e| fail("cannot enter", base)(e.into()))?;
    for dir in ["oldroot", "newroot"] {
        nix::unistd::mkdir(dir, nix::sys::stat::Mode::from_bits_truncate(0o700))
            .map_err(|e| fail("cannot create", Path::new(dir))(e.into()))?;
    }
    // Masks are read-only binds of this empty regular file: a bind of /dev/null would read as empty
    // too, but writes to a device node succeed even on a read-only mount (and vanish silently).
    std::fs::File::create("empty").map_err(fail("cannot create", Path::new("empty")))?;
    sys::pivot_root(c".", c"oldroot").map_err(fail("cannot pivot_root into", base))?;
    nix::unistd::chdir("/").map_err(|e| fail("cannot enter", root)(e.into()))?;

    let newroot = Path::new("/newroot");
    mount(
        Some("tmpfs"),
        newroot,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0755"),
    )
    .map_err(|e| fail("cannot mount the root tmpfs on", newroot)(e.into()))?;
    let old = open_dir(c"/oldroot").map_err(fail("cannot open", Path::new("/oldroot")))?;
    let new = open_dir(c"/newroot").map_err(fail("cannot open", newroot))?;
    let base_fd = open_dir(c"/").map_err(fail("cannot open", root))?;

    for op in mounts {
        apply(op, old.as_fd(), new.as_fd(), base_fd.as_fd())?;
    }

    // Nothing may be created at the top of the sandbox's root.
    sys::set_attr(new.as_fd(), sys::MOUNT_ATTR_RDONLY, 0, false)
        .map_err(fail("cannot make the sandbox root read-only:", root))?;
    drop((old, new, base_fd));

    nix::unistd::chdir(newroot).map_err(|e| fail("cannot enter", newroot)(e.into()))?;
    sys::pivot_root(c".", c".").map_err(fail("cannot pivot_root into", newroot))?;
    // The old root (the base with the host tree under it) is stacked on `/`; detach it for good.
    umount2(".", MntFlags::MNT_DETACH)
        .map_err(|e| fail("cannot detach the host root from", root)(e.into()))?;
    nix::unistd::chdir("/").map_err(|e| fail("cannot enter", root)(e.into()))?;

    nix::unistd::sethostname(hostname)
        .map_err(|e| fail("cannot set the hostname to", Path::new(hostname))(e.into()))?;
    Ok(())
}

fn open_dir(path: &CStr) -> io::Result<OwnedFd> {
    // SAFETY: a valid C string; the returned fd is owned below.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: freshly opened.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Performs one operation; `base` is the base tmpfs, which holds the empty file masks are made of.
fn apply(
    op: &MountOp,
    old: BorrowedFd<'_>,
    new: BorrowedFd<'_>,
    base: BorrowedFd<'_>,
) -> Result<(), SetupError> {
    match op {
        MountOp::Bind {
            source,
            target,
            writable,
        } => bind(old, new, source, target, *writable),
        MountOp::Tmpfs { target, writable } => {
            let mode: &CStr = if *writable { c"1777" } else { c"0755" };
            let fs = sys::new_fs(
                c"tmpfs",
                &[(c"mode", mode)],
                sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV,
            )
            .map_err(fail("cannot create a tmpfs for", target))?;
            if !writable {
                sys::set_attr(fs.as_fd(), sys::MOUNT_ATTR_RDONLY, 0, false)
                    .map_err(fail("cannot make read-only the tmpfs for", target))?;
            }
            attach(new, &fs, target, true)
        }
        MountOp::MaskFile { target } => bind(base, new, Path::new("/empty"), target, false),
        MountOp::Symlink { target, link_to } => symlink(new, link_to, target),
        MountOp::Proc { target } => {
            let fs = sys::new_fs(
                c"proc",
                &[],
                sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV | sys::MOUNT_ATTR_NOEXEC,
            )
            .map_err(fail("cannot mount a new proc on", target))?;
            attach(new, &fs, target, true)
        }
        MountOp::Dev { target } => dev(old, new, target),
        MountOp::Overlay {
            lower,
            target,
            upper,
        } => overlay(old, new, base, lower, target, upper),
        MountOp::CopyFile { source, target } => copy_file(old, new, base, source, target),
    }
}

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

fn overlay(
    old: BorrowedFd<'_>,
    new: BorrowedFd<'_>,
    base: BorrowedFd<'_>,
    lower: &Path,
    target: &Path,
    upper: &crate::spec::Upper,
) -> Result<(), SetupError> {
    let dir_flags = libc::O_PATH | libc::O_DIRECTORY;
    let rel = relative(lower).map_err(fail("invalid overlay lower dir", lower))?;
    let lower_fd = sys::openat2(old, &rel, dir_flags, sys::RESOLVE_IN_ROOT)
        .map_err(fail("cannot open overlay lower dir", lower))?;
    let layers = match upper {
        crate::spec::Upper::Persistent { dir } => {
            let rel = relative(dir).map_err(fail("invalid overlay dir", dir))?;
            sys::openat2(old, &rel, dir_flags, sys::RESOLVE_IN_ROOT)
                .map_err(fail("cannot open overlay dir", dir))?
        }
        crate::spec::Upper::Throwaway => {
            let name = scratch_name(base, "overlay")
                .map_err(fail("cannot name a throwaway layer for", target))?;
            open_or_mkdir(base, &name)
                .map_err(fail("cannot create a throwaway layer for", target))?
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
    let (l, u, w) = (via_fd(&lower_fd)?, via_fd(&upper_fd)?, via_fd(&work_fd)?);
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

fn copy_file(
    old: BorrowedFd<'_>,
    new: BorrowedFd<'_>,
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

fn bind(
    old: BorrowedFd<'_>,
    new: BorrowedFd<'_>,
    source: &Path,
    target: &Path,
    writable: bool,
) -> Result<(), SetupError> {
    let rel = relative(source).map_err(fail("invalid mount source", source))?;
    let src = sys::openat2(old, &rel, libc::O_PATH, sys::RESOLVE_IN_ROOT)
        .map_err(fail("cannot open mount source", source))?;
    let is_dir = nix::sys::stat::fstat(src.as_raw_fd())
        .map(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR)
        .map_err(|e| fail("cannot stat mount source", source)(e.into()))?;
    let tree = sys::clone_tree(src.as_fd(), true).map_err(fail("cannot bind", source))?;
    if !writable {
        // mount_setattr only adds RDONLY: the flags the host locked (nosuid, nodev, ...) stay as they were.
        sys::set_attr(tree.as_fd(), sys::MOUNT_ATTR_RDONLY, 0, true)
            .map_err(fail("cannot make read-only the bind of", source))?;
    }
    attach(new, &tree, target, is_dir)
}

/// Moves the detached mount `tree` onto `target` beneath the new root, creating the mount point.
fn attach(
    new: BorrowedFd<'_>,
    tree: &OwnedFd,
    target: &Path,
    is_dir: bool,
) -> Result<(), SetupError> {
    let point = mount_point(new, target, is_dir)?;
    sys::move_mount(tree.as_fd(), point.as_fd()).map_err(fail("cannot mount on", target))
}

/// Opens (creating when missing) `target` beneath `root`, refusing any symlink on the way.
fn mount_point(root: BorrowedFd<'_>, target: &Path, is_dir: bool) -> Result<OwnedFd, SetupError> {
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
fn parent_dir<'a>(
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

fn open_or_mkdir(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<OwnedFd> {
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

fn symlink(new: BorrowedFd<'_>, link_to: &Path, target: &Path) -> Result<(), SetupError> {
    let (parent, name) = parent_dir(new, target)?;
    let name_c = CString::new(name.as_bytes())
        .map_err(|_| fail("invalid symlink", target)(io::Error::from_raw_os_error(libc::EINVAL)))?;
    let to = cstr(link_to).map_err(fail("invalid symlink target for", target))?;
    // SAFETY: valid fd and C strings.
    if unsafe { libc::symlinkat(to.as_ptr(), parent.as_raw_fd(), name_c.as_ptr()) } < 0 {
        return Err(fail("cannot create symlink", target)(
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// A minimal /dev: host device nodes bound in (mknod is refused in a user namespace), a private
/// devpts instance, a tmpfs for shm, and the usual fd symlinks.
fn dev(old: BorrowedFd<'_>, new: BorrowedFd<'_>, target: &Path) -> Result<(), SetupError> {
    let fs = sys::new_fs(
        c"tmpfs",
        &[(c"mode", c"0755")],
        sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NOEXEC,
    )
    .map_err(fail("cannot create a tmpfs for", target))?;
    attach(new, &fs, target, true)?;
    for node in ["null", "zero", "full", "random", "urandom", "tty"] {
        bind(
            old,
            new,
            &Path::new("/dev").join(node),
            &target.join(node),
            true,
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
    let shm = sys::new_fs(
        c"tmpfs",
        &[(c"mode", c"1777")],
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
