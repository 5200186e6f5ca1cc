//! `airlock overlay-handoff`: revdiff's annotations into the shared temp directory, safely.
//!
//! The shared temp directory is writable from the sandbox, which can make any name in it a
//! symlink (to `~/.bashrc`), a FIFO, or a hard link. The host side therefore never opens an
//! existing name there for writing: each file is unlinked and created anew with `O_EXCL |
//! O_NOFOLLOW` relative to the directory's descriptor, so the bytes land in an inode airlock
//! just made, whatever the sandbox placed at that name.

use std::ffi::CString;
use std::fs;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The most annotation bytes handed over (revdiff's output is text a person wrote).
pub const MAX_OUTPUT_BYTES: u64 = 16 << 20;

/// How often a name is re-created when the sandbox puts something back at it in between.
const ATTEMPTS: usize = 8;

/// Copies `private_output` (removed afterwards; missing counts as empty) to `shared/output`,
/// then creates `shared/sentinel`. Both names must be plain file names.
pub fn handoff(
    private_output: &Path,
    shared: &Path,
    output: &str,
    sentinel: Option<&str>,
) -> io::Result<()> {
    for name in std::iter::once(output).chain(sentinel) {
        if !plain_name(name) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{name:?} is not a plain file name"),
            ));
        }
    }
    let mut bytes = Vec::new();
    match fs::File::open(private_output) {
        Ok(file) => {
            file.take(MAX_OUTPUT_BYTES).read_to_end(&mut bytes)?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let _ = fs::remove_file(private_output);
    let dir = open_dir(shared)?;
    create_fresh(&dir, output, &bytes)?;
    if let Some(sentinel) = sentinel {
        create_fresh(&dir, sentinel, b"")?;
    }
    Ok(())
}

/// A name [`handoff`] writes: one component, letters, digits and `._-`, not `.` or `..`.
pub fn plain_name(name: &str) -> bool {
    (1..=255).contains(&name.len())
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

fn cstring(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    let c = cstring(path.as_os_str().as_bytes())?;
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: `c` is a valid C string; the result is checked.
    let fd = unsafe { libc::open(c.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Removes whatever is at `name` in `dir` and creates a new file there holding `bytes`.
fn create_fresh(dir: &OwnedFd, name: &str, bytes: &[u8]) -> io::Result<()> {
    let c = cstring(name.as_bytes())?;
    for _ in 0..ATTEMPTS {
        // SAFETY: valid descriptor and C string; the result is checked.
        let unlinked = unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) };
        if unlinked < 0 {
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::NotFound {
                return Err(err);
            }
        }
        let flags = libc::O_WRONLY
            | libc::O_CREAT
            | libc::O_EXCL
            | libc::O_NOFOLLOW
            | libc::O_NONBLOCK
            | libc::O_CLOEXEC;
        // SAFETY: as above; mode is an unsigned int as openat's variadic argument expects.
        let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags, 0o600 as libc::c_uint) };
        if fd < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::AlreadyExists {
                continue;
            }
            return Err(err);
        }
        // SAFETY: `fd` was just opened and is owned here.
        let mut file = fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        return io::Write::write_all(&mut file, bytes);
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!("{name} kept being re-created in the shared temp directory"),
    ))
}
