//! Step 3 of a launch: build the sandbox's root from the spec's mount operations, then pivot into it.
//!
//! Runs in the sandbox's init (PID 1 of the new namespaces) before anything else. Sources are opened
//! beneath the old root with `RESOLVE_IN_ROOT`, so a host symlink resolves as it does on the host;
//! targets are opened beneath the new root refusing every symlink, so nothing the sandbox planted
//! (in the project or the synthetic home) can redirect a mount onto another path.

use std::ffi::{CStr, CString};
use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use nix::mount::{MntFlags, MsFlags, mount, umount2};

use super::sys;
use crate::spec::MountOp;

pub(crate) mod dev;
mod layers;
pub(crate) mod target;

use dev::dev;
use layers::{copy_file, overlay};
use target::{NewRoot, mount_point, parent_dir};

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
/// `tmpfs_size`: the `size=` of every writable tmpfs made for the sandbox (bytes). Returns the
/// device and inode of each bind's source, in order (what `ahead` checks a root built ahead by).
pub fn build(
    mounts: &[MountOp],
    hostname: &str,
    tmpfs_size: Option<&CStr>,
) -> Result<Vec<(u64, u64)>, SetupError> {
    let building = Building::start(tmpfs_size)?;
    let sources = building.apply(mounts)?;
    building.finish(hostname)?;
    Ok(sources)
}

/// A root being built: the host tree at `/oldroot`, the sandbox's root at `/newroot`, both
/// beneath a base tmpfs. [`build`] in three steps, so a root built ahead can leave some of its
/// mounts (its persistent overlays) until the launch holds their lease.
pub struct Building {
    old: OwnedFd,
    new: OwnedFd,
    /// The base tmpfs, which holds the empty file masks are made of.
    base: OwnedFd,
    tmpfs_size: Option<CString>,
}

impl Building {
    /// The base, the pivot into it and the new root's tmpfs.
    pub fn start(tmpfs_size: Option<&CStr>) -> Result<Building, SetupError> {
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
        // Masks are read-only binds of this empty regular file: a bind of /dev/null would read as
        // empty too, but writes to a device node succeed even on a read-only mount (and vanish
        // silently).
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
        Ok(Building {
            old: open_dir(c"/oldroot").map_err(fail("cannot open", Path::new("/oldroot")))?,
            new: open_dir(c"/newroot").map_err(fail("cannot open", newroot))?,
            base: open_dir(c"/").map_err(fail("cannot open", root))?,
            tmpfs_size: tmpfs_size.map(CStr::to_owned),
        })
    }

    /// Performs `mounts` in order; the device and inode of each bind's source, in order.
    pub fn apply(&self, mounts: &[MountOp]) -> Result<Vec<(u64, u64)>, SetupError> {
        let mut sources = Vec::new();
        let new_root = NewRoot::new(self.new.as_fd());
        let size = self.tmpfs_size.as_deref();
        for op in mounts {
            if let Some(id) = apply(op, self.old.as_fd(), &new_root, self.base.as_fd(), size)? {
                sources.push(id);
            }
        }
        Ok(sources)
    }

    /// Makes the new root read-only, pivots into it, detaches the host tree, sets `hostname`.
    pub fn finish(self, hostname: &str) -> Result<(), SetupError> {
        let root = Path::new("/");
        // Nothing may be created at the top of the sandbox's root.
        sys::set_attr(self.new.as_fd(), sys::MOUNT_ATTR_RDONLY, 0, false)
            .map_err(fail("cannot make the sandbox root read-only:", root))?;
        drop(self);

        let newroot = Path::new("/newroot");
        nix::unistd::chdir(newroot).map_err(|e| fail("cannot enter", newroot)(e.into()))?;
        sys::pivot_root(c".", c".").map_err(fail("cannot pivot_root into", newroot))?;
        // The old root (the base with the host tree under it) is stacked on `/`; detach it for
        // good.
        umount2(".", MntFlags::MNT_DETACH)
            .map_err(|e| fail("cannot detach the host root from", root)(e.into()))?;
        nix::unistd::chdir("/").map_err(|e| fail("cannot enter", root)(e.into()))?;

        nix::unistd::sethostname(hostname)
            .map_err(|e| fail("cannot set the hostname to", Path::new(hostname))(e.into()))?;
        Ok(())
    }
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
/// A bind's source's device and inode are returned.
fn apply(
    op: &MountOp,
    old: BorrowedFd<'_>,
    new: &NewRoot<'_>,
    base: BorrowedFd<'_>,
    tmpfs_size: Option<&CStr>,
) -> Result<Option<(u64, u64)>, SetupError> {
    let done = match op {
        MountOp::Bind {
            source,
            target,
            writable,
        } => return bind(old, new, source, target, *writable).map(Some),
        MountOp::Tmpfs { target, writable } => {
            let mode: &CStr = if *writable { c"1777" } else { c"0755" };
            let mut options = vec![(c"mode", mode)];
            if let Some(size) = tmpfs_size.filter(|_| *writable) {
                options.push((c"size", size));
            }
            let fs = sys::new_fs(
                c"tmpfs",
                &options,
                sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV,
            )
            .map_err(fail("cannot create a tmpfs for", target))?;
            if !writable {
                sys::set_attr(fs.as_fd(), sys::MOUNT_ATTR_RDONLY, 0, false)
                    .map_err(fail("cannot make read-only the tmpfs for", target))?;
            }
            attach(new, &fs, target, true)
        }
        MountOp::MaskFile { target } => {
            bind(base, new, Path::new("/empty"), target, false).map(drop)
        }
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
        MountOp::Dev { target } => dev(old, new, target, tmpfs_size),
        MountOp::Overlay {
            lower,
            target,
            upper,
        } => overlay(old, new, base, lower, target, upper),
        MountOp::CopyFile { source, target } => copy_file(old, new, base, source, target),
    };
    done.map(|()| None)
}

/// Binds `source` (beneath `old`) on `target` (beneath `new`); returns the source's device and
/// inode.
fn bind(
    old: BorrowedFd<'_>,
    new: &NewRoot<'_>,
    source: &Path,
    target: &Path,
    writable: bool,
) -> Result<(u64, u64), SetupError> {
    let rel = relative(source).map_err(fail("invalid mount source", source))?;
    let src = sys::openat2(old, &rel, libc::O_PATH, sys::RESOLVE_IN_ROOT)
        .map_err(fail("cannot open mount source", source))?;
    let st = nix::sys::stat::fstat(src.as_raw_fd())
        .map_err(|e| fail("cannot stat mount source", source)(e.into()))?;
    let is_dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
    let tree = sys::clone_tree(src.as_fd(), true).map_err(fail("cannot bind", source))?;
    if !writable {
        // mount_setattr only adds RDONLY: the flags the host locked (nosuid, nodev, ...) stay as they were.
        sys::set_attr(tree.as_fd(), sys::MOUNT_ATTR_RDONLY, 0, true)
            .map_err(fail("cannot make read-only the bind of", source))?;
    }
    attach(new, &tree, target, is_dir)?;
    Ok((st.st_dev, st.st_ino))
}

/// Moves the detached mount `tree` onto `target` beneath the new root, creating the mount point.
fn attach(
    new: &NewRoot<'_>,
    tree: &OwnedFd,
    target: &Path,
    is_dir: bool,
) -> Result<(), SetupError> {
    let point = mount_point(new, target, is_dir)?;
    sys::move_mount(tree.as_fd(), point.as_fd()).map_err(fail("cannot mount on", target))?;
    new.mounted_on(target);
    Ok(())
}

fn symlink(new: &NewRoot<'_>, link_to: &Path, target: &Path) -> Result<(), SetupError> {
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
