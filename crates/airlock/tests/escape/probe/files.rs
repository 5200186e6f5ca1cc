//! Files: reading and writing paths, and what inherited file descriptors reach.

use std::fs;
use std::io;
use std::os::fd::{FromRawFd as _, OwnedFd};
use std::path::Path;

use super::{Attempt, cstring, denial, last_denial};

pub(super) fn read(path: &str) -> Attempt {
    let bytes = fs::read(path).map_err(|e| denial(format!("read {path}"), &e))?;
    let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned();
    Ok(format!("read {path}: {} bytes {shown:?}", bytes.len()))
}

pub(super) fn write(path: &str, make_parents: bool) -> Attempt {
    if make_parents && let Some(parent) = Path::new(path).parent() {
        fs::create_dir_all(parent)
            .map_err(|e| denial(format!("mkdir -p {}", parent.display()), &e))?;
    }
    fs::write(path, b"airlock-escape\n").map_err(|e| denial(format!("write {path}"), &e))?;
    Ok(format!("wrote {path}"))
}

/// Opens an existing file for writing without truncating or writing, so a broken sandbox
/// changes nothing even on a host file like `/etc/passwd`.
pub(super) fn open_write(path: &str) -> Attempt {
    fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map(|_| format!("opened {path} for writing"))
        .map_err(|e| denial(format!("open {path} O_WRONLY"), &e))
}

/// chmod to the mode `path` already has: refused on a read-only mount (EROFS) or by ownership
/// (EPERM), and a no-op for the file where it is allowed, so the host's node never changes mode.
pub(super) fn chmod_same(path: &str) -> Attempt {
    use std::os::unix::fs::PermissionsExt as _;
    let meta = fs::metadata(path).map_err(|e| denial(format!("stat {path}"), &e))?;
    let mode = meta.permissions().mode() & 0o7777;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .map(|()| format!("chmod {mode:o} {path}"))
        .map_err(|e| denial(format!("chmod {mode:o} {path}"), &e))
}

/// chown to the owner and group `path` already has; a no-op where it is allowed, as above.
pub(super) fn chown_same(path: &str) -> Attempt {
    use std::os::unix::fs::MetadataExt as _;
    let meta = fs::metadata(path).map_err(|e| denial(format!("stat {path}"), &e))?;
    let (uid, gid) = (meta.uid(), meta.gid());
    std::os::unix::fs::chown(path, Some(uid), Some(gid))
        .map(|()| format!("chown {uid}:{gid} {path}"))
        .map_err(|e| denial(format!("chown {uid}:{gid} {path}"), &e))
}

/// Reads `n` bytes from `path` (a device that never ends, like /dev/zero).
pub(super) fn read_bytes(path: &str, n: &str) -> Attempt {
    let n: usize = n.parse().unwrap_or(0);
    let mut file = fs::File::open(path).map_err(|e| denial(format!("open {path}"), &e))?;
    let mut buf = vec![0u8; n];
    io::Read::read_exact(&mut file, &mut buf).map_err(|e| denial(format!("read {path}"), &e))?;
    Ok(format!("read {n} bytes from {path}"))
}

/// Lists this process's open fds (`fd=target`), leaving out the one reading `/proc/self/fd`.
pub(super) fn open_fds() -> Attempt {
    let dir = fs::read_dir("/proc/self/fd").map_err(|e| denial("read /proc/self/fd", &e))?;
    let mut fds: Vec<(u32, String)> = dir
        .filter_map(Result::ok)
        .filter_map(|e| {
            let fd: u32 = e.file_name().to_str()?.parse().ok()?;
            let target = fs::read_link(e.path()).ok()?.display().to_string();
            Some((fd, target))
        })
        .filter(|(_, target)| !(target.starts_with("/proc/") && target.ends_with("/fd")))
        .collect();
    fds.sort();
    let shown: Vec<String> = fds.iter().map(|(fd, t)| format!("{fd}={t}")).collect();
    Ok(format!("fds {}", shown.join(" ")))
}

/// Reads `rel` relative to an inherited directory fd: a host directory fd that survives into
/// the sandbox reaches past every mount.
pub(super) fn read_at(fd: &str, rel: &str) -> Attempt {
    let fd: libc::c_int = fd.parse().unwrap_or(-1);
    let rel_c = cstring(rel)?;
    // SAFETY: a valid NUL-terminated path; the result is owned below.
    let file = unsafe { libc::openat(fd, rel_c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if file < 0 {
        return Err(last_denial(format!("openat({fd}, {rel})")));
    }
    // SAFETY: `file` is a fresh fd this function owns.
    let mut file = fs::File::from(unsafe { OwnedFd::from_raw_fd(file) });
    let mut bytes = Vec::new();
    io::Read::read_to_end(&mut file, &mut bytes).map_err(|e| denial("read", &e))?;
    let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned();
    Ok(format!(
        "read {rel} via fd {fd}: {} bytes {shown:?}",
        bytes.len()
    ))
}

/// Reads from an inherited fd directly (a host file opened by whoever started airlock).
pub(super) fn read_fd(fd: &str) -> Attempt {
    let fd: libc::c_int = fd.parse().unwrap_or(-1);
    let mut bytes = vec![0u8; 4096];
    // SAFETY: `bytes` is a valid buffer of the given length.
    // pread at 0: the open file description (and its offset) is shared with the host side.
    let n = unsafe { libc::pread(fd, bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if n < 0 {
        return Err(last_denial(format!("read({fd})")));
    }
    bytes.truncate(n as usize);
    let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned();
    Ok(format!("read fd {fd}: {} bytes {shown:?}", bytes.len()))
}

/// Keeps replacing `link` with a symlink to `target` (made beside it, then renamed over it) until
/// `stop` exists, creating `ready` after the first attempt: a tight loop racing whatever the host
/// does with `link` meanwhile. A refused swap is counted, not fatal (a defence may refuse it).
pub(super) fn swap_symlink(target: &str, link: &str, ready: &str, stop: &str) -> Attempt {
    let tmp = format!("{link}.swap");
    let (mut swapped, mut refused) = (0u64, 0u64);
    for round in 0u64.. {
        let _ = fs::remove_file(&tmp);
        let swap = std::os::unix::fs::symlink(target, &tmp).and_then(|()| fs::rename(&tmp, link));
        if swap.is_ok() {
            swapped += 1;
        } else {
            refused += 1;
        }
        if round == 0 {
            fs::write(ready, "").map_err(|e| denial(format!("write {ready}"), &e))?;
        }
        if round % 16 == 0 && Path::new(stop).exists() {
            break;
        }
    }
    let _ = fs::remove_file(&tmp);
    Ok(format!(
        "replaced {link} with a symlink to {target} {swapped} times ({refused} refused)"
    ))
}
