//! `realpath`, in three system calls.
//!
//! glibc's `realpath` (what `std::fs::canonicalize` calls) resolves a path by calling `readlink` on
//! every prefix of it, each walked from `/` again: `/home/me/.local/share/airlock` costs six
//! `readlink`s and twenty-one component lookups. A launch resolves a few dozen paths (the home,
//! the project, the state directories, every symlink among the system paths and `/etc` entries),
//! which came to ~190 `readlink` calls before the sandbox could start.
//!
//! Here the kernel resolves the path once, opening it with `O_PATH` (no read permission needed,
//! nothing of the file is opened), and `/proc/self/fd/<n>` names what it resolved to. The answer
//! is the same as `realpath`'s: every symlink followed, the last one included, `..` taken after
//! the link before it; a missing component is `ENOENT`. Where that answer cannot be had (no
//! `/proc`, a file deleted meanwhile, a name longer than `PATH_MAX`, something that is not a
//! path such as a pipe behind `/proc/self/fd/0`), this falls back to `std::fs::canonicalize`.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::path::{Path, PathBuf};

/// The absolute path `path` resolves to, every symlink followed (`realpath`).
pub fn canonicalize(path: impl AsRef<Path>) -> io::Result<PathBuf> {
    let path = path.as_ref();
    let Ok(c_path) = CString::new(path.as_os_str().as_bytes()) else {
        return std::fs::canonicalize(path);
    };
    // SAFETY: a valid C string; the descriptor is owned right below.
    let fd = unsafe { libc::open(c_path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        let error = io::Error::last_os_error();
        return match error.raw_os_error() {
            // What realpath says too, without asking it again.
            Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP | libc::EACCES) => Err(error),
            _ => std::fs::canonicalize(path),
        };
    }
    // SAFETY: just opened, ours alone.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    match fd_path(&fd) {
        Some(resolved) => Ok(resolved),
        None => std::fs::canonicalize(path),
    }
}

/// The path the kernel has for `fd`, when it is one: absolute, whole, and not of a deleted file.
fn fd_path(fd: &OwnedFd) -> Option<PathBuf> {
    let link = CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
    // SAFETY: reads at most buf.len() bytes into a live buffer.
    let n = unsafe { libc::readlink(link.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    let n = usize::try_from(n).ok()?;
    // A name as long as the buffer may have been cut.
    if n == 0 || n >= buf.len() {
        return None;
    }
    buf.truncate(n);
    // A file unlinked since it was opened is named "<path> (deleted)"; a pipe or a socket is
    // "pipe:[<inode>]": neither is what realpath answers.
    if buf[0] != b'/' || buf.ends_with(b" (deleted)") {
        return None;
    }
    Some(PathBuf::from(std::ffi::OsString::from_vec(buf)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both answers, or both errors (their kinds), for `path`.
    fn same_as_realpath(path: &Path) {
        match (canonicalize(path), std::fs::canonicalize(path)) {
            (Ok(ours), Ok(theirs)) => assert_eq!(ours, theirs, "{}", path.display()),
            (Err(ours), Err(theirs)) => {
                assert_eq!(ours.kind(), theirs.kind(), "{}", path.display())
            }
            (ours, theirs) => panic!("{}: {ours:?} vs {theirs:?}", path.display()),
        }
    }

    #[test]
    fn resolves_as_realpath_does() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("a/b/c")).unwrap();
        std::fs::write(root.join("a/b/c/file"), "x").unwrap();
        let link = |target: &str, at: &str| std::os::unix::fs::symlink(target, root.join(at));
        link("a/b", "to-b").unwrap();
        link("c/file", "a/b/to-file").unwrap();
        link("../../a", "a/b/c/up").unwrap();
        link(&root.join("a/b/c").display().to_string(), "absolute").unwrap();
        link("missing", "dangling").unwrap();
        link("loop-2", "loop-1").unwrap();
        link("loop-1", "loop-2").unwrap();
        for rel in [
            "",
            ".",
            "a",
            "a/b/c/file",
            "to-b",
            "to-b/to-file",
            "to-b/c/..",
            "to-b/c/up/b/c/up",
            "absolute/../c",
            "a/./b//c/",
            "dangling",
            "loop-1",
            "missing",
            "missing/below",
            "a/b/c/file/",
            "a/b/c/file/below",
        ] {
            same_as_realpath(&root.join(rel));
        }
        same_as_realpath(Path::new("/"));
        same_as_realpath(Path::new("/proc/self"));
        same_as_realpath(Path::new(""));
    }

    #[test]
    fn a_relative_path_is_taken_from_the_current_directory() {
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            canonicalize(Path::new(".")).unwrap(),
            std::fs::canonicalize(&cwd).unwrap()
        );
    }

    #[test]
    fn what_is_not_a_path_gets_realpaths_answer() {
        let mut fds = [0; 2];
        // SAFETY: a two-int array for the kernel to fill; both ends owned right below.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let (r, _w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        same_as_realpath(Path::new(&format!("/proc/self/fd/{}", r.as_raw_fd())));
    }
}
