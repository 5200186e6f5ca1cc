//! Directory-descriptor operations for walking an upper dir and the host tree it is applied to.
//!
//! Both trees are treated as hostile: the upper was written by the sandbox, and a host directory
//! can be swapped for a symlink at any time. So every lookup is by name relative to an open
//! directory, with `O_NOFOLLOW`, or beneath a root with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`
//! ([`airlock_config::hostfs`]); types are read with `AT_SYMLINK_NOFOLLOW` or on the opened fd;
//! nothing is opened in a way that blocks (FIFOs) and no write goes through an existing name.

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd as _, AsRawFd as _, FromRawFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use airlock_config::hostfs;

/// How deep a walk or a removal goes; past it an entry is refused (PATH_MAX allows ~2000 levels).
pub(super) const MAX_DEPTH: usize = 256;

/// What a directory entry is, read without following it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Type {
    File,
    Dir,
    Symlink,
    /// An overlayfs whiteout: a character device 0:0.
    Whiteout,
    Fifo,
    Socket,
    Device,
}

/// The metadata of one entry (an `lstat`, or an `fstat` of the opened entry).
#[derive(Debug, Clone, Copy)]
pub(super) struct Meta {
    pub kind: Type,
    /// All mode bits below the file type (permissions, setuid, setgid, sticky).
    pub mode: u32,
    pub uid: u32,
    pub size: u64,
    pub mtime: libc::timespec,
}

impl Meta {
    fn of(st: &libc::stat) -> Meta {
        let kind = match st.st_mode & libc::S_IFMT {
            libc::S_IFREG => Type::File,
            libc::S_IFDIR => Type::Dir,
            libc::S_IFLNK => Type::Symlink,
            libc::S_IFCHR if st.st_rdev == 0 => Type::Whiteout,
            libc::S_IFIFO => Type::Fifo,
            libc::S_IFSOCK => Type::Socket,
            _ => Type::Device,
        };
        Meta {
            kind,
            mode: st.st_mode & 0o7777,
            uid: st.st_uid,
            size: st.st_size as u64,
            mtime: libc::timespec {
                tv_sec: st.st_mtime,
                tv_nsec: st.st_mtime_nsec,
            },
        }
    }

    /// Whether the setuid or setgid bit is set.
    pub fn setid(&self) -> bool {
        self.mode & (libc::S_ISUID | libc::S_ISGID) != 0
    }
}

fn cname(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn check(ret: libc::c_int) -> io::Result<()> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn fstat(fd: &OwnedFd) -> io::Result<Meta> {
    // SAFETY: a zeroed stat is a valid out-buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd and buffer.
    check(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(Meta::of(&st))
}

/// An open directory; every operation names an entry directly in it.
#[derive(Debug)]
pub(super) struct DirFd(OwnedFd);

impl DirFd {
    /// The absolute `path` with no symlink anywhere on it (each component checked by the kernel,
    /// from `/`): for host paths airlock planned as canonical, so a link there is a change.
    pub fn open_no_symlinks(path: &Path) -> io::Result<DirFd> {
        let slash = File::open("/")?;
        let rel = path
            .strip_prefix("/")
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        if rel.as_os_str().is_empty() {
            return Ok(DirFd(slash.into()));
        }
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NONBLOCK;
        hostfs::open_beneath(slash.as_fd(), rel, flags).map(DirFd)
    }

    /// `path` as the user's own paths resolve (its parents may be links: `$XDG_DATA_HOME` in
    /// dotfiles), only its last component not followed: airlock's state root.
    pub fn open_trusted(path: &Path) -> io::Result<DirFd> {
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW;
        hostfs::open_nofollow(path, flags).map(DirFd)
    }

    /// The directory at `rel` beneath this one, through no symlink (`rel` empty: this one again).
    pub fn beneath(&self, rel: &Path) -> io::Result<DirFd> {
        if rel.as_os_str().is_empty() {
            return self.0.try_clone().map(DirFd);
        }
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NONBLOCK;
        hostfs::open_beneath(self.0.as_fd(), rel, flags).map(DirFd)
    }

    /// `name`'s metadata, not following it; `None` when there is no such entry.
    pub fn stat(&self, name: &OsStr) -> io::Result<Option<Meta>> {
        let c = cname(name)?;
        // SAFETY: a zeroed stat is a valid out-buffer.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid fd, C string and buffer.
        let ret = unsafe {
            libc::fstatat(
                self.0.as_raw_fd(),
                c.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        match check(ret) {
            Ok(()) => Ok(Some(Meta::of(&st))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The names in this directory (not `.` and `..`), sorted. Only names are held, one
    /// directory at a time, so memory follows the widest directory, not the size of the tree.
    pub fn names(&self) -> io::Result<Vec<OsString>> {
        let mut dir = nix::dir::Dir::from(self.0.try_clone()?).map_err(io::Error::from)?;
        let mut names = Vec::new();
        for entry in dir.iter() {
            let entry = entry.map_err(io::Error::from)?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." {
                names.push(OsStr::from_bytes(name).to_owned());
            }
        }
        names.sort();
        Ok(names)
    }

    /// Whether overlayfs marked this directory opaque (it replaced the lower's directory of that
    /// name): `user.overlay.opaque` (a user-namespace mount, `userxattr`, as airlock's are) or
    /// `trusted.overlay.opaque`, = "y". The sandbox cannot set these: overlayfs stores an
    /// `overlay.*` xattr set through the mount as `user.overlay.overlay.*` (checked on 6.18).
    pub fn opaque(&self) -> bool {
        ["user.overlay.opaque", "trusted.overlay.opaque"]
            .iter()
            .any(|name| self.xattr(name).as_deref() == Some(b"y".as_slice()))
    }

    fn xattr(&self, name: &str) -> Option<Vec<u8>> {
        let c = CString::new(name).ok()?;
        let mut buf = [0u8; 16];
        // SAFETY: valid fd, C string and buffer of the length passed.
        let n = unsafe {
            libc::fgetxattr(
                self.0.as_raw_fd(),
                c.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        (n >= 0).then(|| buf[..n as usize].to_vec())
    }

    /// Opens the regular file `name` for reading: no link followed, no blocking, and its type
    /// and metadata read from the opened fd, so what is checked is what is read.
    pub fn open_file(&self, name: &OsStr) -> io::Result<(File, Meta)> {
        let c = cname(name)?;
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
        // SAFETY: valid fd and C string.
        let raw = unsafe { libc::openat(self.0.as_raw_fd(), c.as_ptr(), flags) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor owned here.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let meta = fstat(&fd)?;
        if meta.kind != Type::File {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        Ok((File::from(fd), meta))
    }

    /// Where the symlink `name` points (its text; never followed).
    pub fn readlink(&self, name: &OsStr) -> io::Result<PathBuf> {
        nix::fcntl::readlinkat(Some(self.0.as_raw_fd()), name)
            .map(PathBuf::from)
            .map_err(io::Error::from)
    }

    /// Removes the non-directory entry `name` (a link itself, never its target).
    pub fn unlink(&self, name: &OsStr) -> io::Result<()> {
        let c = cname(name)?;
        // SAFETY: valid fd and C string.
        check(unsafe { libc::unlinkat(self.0.as_raw_fd(), c.as_ptr(), 0) })
    }

    /// Removes the empty directory `name`.
    pub fn rmdir(&self, name: &OsStr) -> io::Result<()> {
        let c = cname(name)?;
        // SAFETY: valid fd and C string.
        check(unsafe { libc::unlinkat(self.0.as_raw_fd(), c.as_ptr(), libc::AT_REMOVEDIR) })
    }

    /// Creates the directory `name` with `mode` exactly (the umask not applied).
    pub fn mkdir(&self, name: &OsStr, mode: u32) -> io::Result<()> {
        let c = cname(name)?;
        // SAFETY: valid fd and C string.
        check(unsafe { libc::mkdirat(self.0.as_raw_fd(), c.as_ptr(), 0o700) })?;
        let made = self.beneath(Path::new(name))?;
        // SAFETY: valid fd.
        check(unsafe { libc::fchmod(made.0.as_raw_fd(), mode as libc::mode_t) })
    }

    /// Removes `name` whatever it is; a directory with everything in it. Nothing is followed:
    /// each directory is entered by fd with `O_NOFOLLOW`, links are unlinked themselves. An entry
    /// owned by someone other than `uid` stops the removal; the error names the entry that failed,
    /// relative to this directory.
    pub fn remove_tree(
        &self,
        name: &OsStr,
        uid: u32,
        depth: usize,
    ) -> Result<(), (PathBuf, io::Error)> {
        let at = |e: io::Error| (PathBuf::from(name), e);
        let Some(meta) = self.stat(name).map_err(at)? else {
            return Ok(());
        };
        if meta.uid != uid {
            let e = io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("owned by uid {}, not by you (uid {uid})", meta.uid),
            );
            return Err(at(e));
        }
        if meta.kind != Type::Dir {
            return self.unlink(name).map_err(at);
        }
        if depth >= MAX_DEPTH {
            let e = io::Error::other(format!("more than {MAX_DEPTH} levels of directories"));
            return Err(at(e));
        }
        let dir = self.beneath(Path::new(name)).map_err(at)?;
        for child in dir.names().map_err(at)? {
            dir.remove_tree(&child, uid, depth + 1)
                .map_err(|(rel, e)| (Path::new(name).join(rel), e))?;
        }
        self.rmdir(name).map_err(at)
    }

    /// Puts a new regular file holding `from`'s bytes at `name`, with `mode` and `mtime`: written
    /// to a fresh temp file in this directory (`O_CREAT | O_EXCL | O_NOFOLLOW`), then renamed
    /// over `name`, so `name` is the old file or the whole new one, never half of it; whatever
    /// `name` was (a link included) is replaced, never written through. Not synced: see
    /// [`DirFd::sync_fs`].
    pub fn replace_file(
        &self,
        name: &OsStr,
        from: &mut File,
        mode: Option<u32>,
        mtime: Option<libc::timespec>,
    ) -> io::Result<()> {
        let (temp, mut file) = self.create_temp()?;
        let written = (|| {
            io::copy(from, &mut file)?;
            if let Some(mode) = mode {
                // SAFETY: valid fd.
                check(unsafe { libc::fchmod(file.as_raw_fd(), mode as libc::mode_t) })?;
            }
            if let Some(mtime) = mtime {
                let times = [
                    libc::timespec {
                        tv_sec: 0,
                        tv_nsec: libc::UTIME_OMIT,
                    },
                    mtime,
                ];
                // SAFETY: valid fd and an array of two timespecs.
                check(unsafe { libc::futimens(file.as_raw_fd(), times.as_ptr()) })?;
            }
            let (t, n) = (cname(&temp)?, cname(name)?);
            let fd = self.0.as_raw_fd();
            // SAFETY: valid fds and C strings.
            check(unsafe { libc::renameat(fd, t.as_ptr(), fd, n.as_ptr()) })
        })();
        if written.is_err() {
            let _ = self.unlink(&temp);
        }
        written
    }

    /// Flushes the file system this directory is on (`syncfs`): one call for a directory's
    /// worth of new files, where an `fsync` each cost ~4 ms a file here.
    pub fn sync_fs(&self) -> io::Result<()> {
        // SAFETY: valid fd.
        check(unsafe { libc::syncfs(self.0.as_raw_fd()) })
    }

    fn create_temp(&self) -> io::Result<(OsString, File)> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        for _ in 0..16 {
            let seq = SEQ.fetch_add(1, Ordering::Relaxed);
            let name = OsString::from(format!(".airlock-apply.{}.{seq}", std::process::id()));
            let c = cname(&name)?;
            let flags = libc::O_WRONLY
                | libc::O_CREAT
                | libc::O_EXCL
                | libc::O_NOFOLLOW
                | libc::O_NONBLOCK
                | libc::O_CLOEXEC;
            // SAFETY: valid fd and C string; the mode is the unsigned int openat reads.
            let raw = unsafe {
                libc::openat(self.0.as_raw_fd(), c.as_ptr(), flags, 0o600 as libc::c_uint)
            };
            if raw >= 0 {
                // SAFETY: a fresh descriptor owned here.
                return Ok((name, File::from(unsafe { OwnedFd::from_raw_fd(raw) })));
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::AlreadyExists {
                return Err(e);
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "no free temp file name",
        ))
    }
}

/// Whether two open files hold the same bytes (compared in chunks, never whole in memory).
pub(super) fn same_content(a: &mut File, b: &mut File) -> io::Result<bool> {
    use io::Read as _;
    let (mut x, mut y) = (vec![0u8; 64 << 10], vec![0u8; 64 << 10]);
    loop {
        let n = read_full(a, &mut x)?;
        let m = read_full(b, &mut y)?;
        if n != m || x[..n] != y[..m] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }

    fn read_full(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
        let mut got = 0;
        while got < buf.len() {
            match file.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(got)
    }
}
