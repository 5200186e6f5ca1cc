//! File operations on the host inside trees a sandbox can write (the project, a sandbox's layers).
//!
//! Anything there may have been planted by the workload: a symlink pointing at a file of the
//! user's, a FIFO that blocks a reader forever, a device, a file of many gigabytes. So these
//! helpers never follow a symlink (`O_NOFOLLOW`, `openat2` with `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`), never block on open (`O_NONBLOCK`), check the
//! type on the opened descriptor (`fstat`), and cap what they read.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io::{self, Read as _};
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

pub const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
pub const RESOLVE_NO_SYMLINKS: u64 = 0x04;
pub const RESOLVE_BENEATH: u64 = 0x08;
pub const RESOLVE_IN_ROOT: u64 = 0x10;

#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// What an opened path turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    /// A FIFO, socket or device.
    Special,
}

impl Kind {
    pub fn of(mode: libc::mode_t) -> Kind {
        match mode & libc::S_IFMT {
            libc::S_IFREG => Kind::File,
            libc::S_IFDIR => Kind::Dir,
            libc::S_IFLNK => Kind::Symlink,
            _ => Kind::Special,
        }
    }
}

fn cstring(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// `openat2(dir, path, flags | O_CLOEXEC, resolve)`. It allocates nothing, so the sandbox's own
/// setup (between clone and exec) uses it too.
pub fn openat2(dir: BorrowedFd<'_>, path: &CStr, flags: i32, resolve: u64) -> io::Result<OwnedFd> {
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve,
    };
    // SAFETY: valid fd, C string and struct of the size passed.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor this function owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// `openat2(dir, rel, flags)` resolving only beneath `dir`, through no symlink of any kind.
/// Kernels without `openat2` (before 5.6) get a refusal rather than a weaker lookup.
pub fn open_beneath(dir: BorrowedFd<'_>, rel: &Path, flags: i32) -> io::Result<OwnedFd> {
    openat2(
        dir,
        &cstring(rel)?,
        flags | libc::O_NOFOLLOW,
        RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    )
}

/// Opens `path` without following a final symlink and without blocking (FIFOs, devices).
pub fn open_nofollow(path: &Path, flags: i32) -> io::Result<OwnedFd> {
    open_nonblocking(path, flags | libc::O_NOFOLLOW)
}

fn open_nonblocking(path: &Path, flags: i32) -> io::Result<OwnedFd> {
    let c = cstring(path)?;
    // SAFETY: valid C string.
    let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC | libc::O_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor this function owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The type of what `fd` refers to.
pub fn kind(fd: BorrowedFd<'_>) -> io::Result<Kind> {
    // SAFETY: a zeroed stat is a valid out-buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd and buffer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Kind::of(st.st_mode))
}

/// The contents of a regular file of at most `limit` bytes, read from an already opened fd.
pub fn read_fd(fd: OwnedFd, limit: u64, path: &Path) -> io::Result<Vec<u8>> {
    let found = kind(fd.as_fd())?;
    if found != Kind::File {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is not a regular file ({}); replace it with one or remove it",
                path.display(),
                describe(found)
            ),
        ));
    }
    let mut bytes = Vec::new();
    File::from(fd).take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is larger than {limit} bytes", path.display()),
        ));
    }
    Ok(bytes)
}

/// The contents of the regular file at `path` (a final symlink is refused, FIFOs and devices are
/// refused without blocking), at most `limit` bytes.
pub fn read_regular(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let fd = open_nofollow(path, libc::O_RDONLY).map_err(|e| {
        if e.raw_os_error() == Some(libc::ELOOP) {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} is a symlink; airlock does not follow it",
                    path.display()
                ),
            )
        } else {
            e
        }
    })?;
    read_fd(fd, limit, path)
}

/// Like [`read_regular`], but a symlink is followed: for files of the user's own that dotfile
/// managers link (the global config), where only FIFOs, devices and size are a concern.
pub fn read_regular_following(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    read_fd(open_nonblocking(path, libc::O_RDONLY)?, limit, path)
}

/// A word for a kind, for messages.
pub fn describe(kind: Kind) -> &'static str {
    match kind {
        Kind::File => "a file",
        Kind::Dir => "a directory",
        Kind::Symlink => "a symlink",
        Kind::Special => "a FIFO, socket or device",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_are_read_and_everything_else_refused_without_blocking() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("f");
        std::fs::write(&file, "hello").expect("write");
        assert_eq!(read_regular(&file, 5).expect("read"), b"hello");
        assert!(read_regular(&file, 4).is_err(), "over the cap");
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&file, &link).expect("symlink");
        let e = read_regular(&link, 100).expect_err("symlink");
        assert!(e.to_string().contains("symlink"), "{e}");
        let fifo = dir.path().join("p");
        let c = cstring(&fifo).expect("c");
        // SAFETY: valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_regular(&fifo, 100).expect_err("fifo");
        assert!(e.to_string().contains("FIFO"), "{e}");
        assert!(read_regular(dir.path(), 100).is_err(), "directory");
    }

    #[test]
    fn lookups_beneath_refuse_symlinks_and_escapes() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("a")).expect("a");
        std::fs::write(dir.path().join("a/f"), "x").expect("f");
        std::os::unix::fs::symlink("a", dir.path().join("l")).expect("l");
        let root = File::open(dir.path()).expect("root");
        assert!(open_beneath(root.as_fd(), Path::new("a/f"), libc::O_RDONLY).is_ok());
        for bad in ["l/f", "../x", "/etc/passwd"] {
            assert!(
                open_beneath(root.as_fd(), Path::new(bad), libc::O_RDONLY).is_err(),
                "{bad}"
            );
        }
    }
}
