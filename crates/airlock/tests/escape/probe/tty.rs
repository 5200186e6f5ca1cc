//! Terminals: TIOCSTI/TIOCLINUX injection, line disciplines and the window size.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};

use super::{Attempt, Denial, TIOCLINUX, denial, errno_exit, in_child, last_denial, raw_syscall};

/// A pseudo-terminal pair: the master fd and the slave's path.
pub(super) fn open_pty() -> Result<(OwnedFd, CString), Denial> {
    // SAFETY: plain libc calls on a fresh fd; `buf` outlives `ptsname_r`.
    unsafe {
        let fd = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(last_denial("posix_openpt"));
        }
        let master = OwnedFd::from_raw_fd(fd);
        if libc::grantpt(fd) != 0 || libc::unlockpt(fd) != 0 {
            return Err(last_denial("grantpt/unlockpt"));
        }
        let mut buf = [0 as libc::c_char; 128];
        let rc = libc::ptsname_r(fd, buf.as_mut_ptr(), buf.len());
        if rc != 0 {
            return Err(denial("ptsname_r", &io::Error::from_raw_os_error(rc)));
        }
        Ok((master, std::ffi::CStr::from_ptr(buf.as_ptr()).to_owned()))
    }
}

/// TIOCSTI on a pty that is the caller's controlling terminal, the one case the kernel allows
/// (with `dev.tty.legacy_tiocsti = 1`); so only a filter can make it fail here.
pub(super) fn tiocsti(request: u64) -> Attempt {
    let (_master, slave) = open_pty()?;
    in_child(&format!("ioctl(ctty, {request:#x} TIOCSTI)"), || {
        // SAFETY: in the forked child: become a session leader, then the first tty opened
        // becomes the controlling terminal.
        unsafe {
            if libc::setsid() < 0 {
                return errno_exit();
            }
            let fd = libc::open(slave.as_ptr(), libc::O_RDWR);
            if fd < 0 {
                return errno_exit();
            }
            let byte: u8 = b' ';
            // The raw syscall passes all 64 bits of `request` to the filter.
            if libc::syscall(libc::SYS_ioctl, fd, request, &byte as *const u8) < 0 {
                return errno_exit();
            }
        }
        0
    })
}

pub(super) fn tioclinux() -> Attempt {
    let (master, _) = open_pty()?;
    let fd = master.as_raw_fd();
    raw_syscall("ioctl(pty, TIOCLINUX)", || {
        let subcode: u8 = 7; // TIOCL_GETSHIFTSTATE: read-only
        // SAFETY: `subcode` is a valid byte for the kernel to read and write.
        unsafe { libc::syscall(libc::SYS_ioctl, fd, TIOCLINUX, &subcode as *const u8) }
    })
}

/// TIOCSETD to N_TTY on a fresh pty: the discipline it already has, so even where it is allowed
/// (on the host) nothing changes; a filter must refuse it before the kernel looks.
pub(super) fn tiocsetd(request: u64) -> Attempt {
    let (master, _) = open_pty()?;
    let fd = master.as_raw_fd();
    raw_syscall(&format!("ioctl(pty, {request:#x} TIOCSETD, N_TTY)"), || {
        let n_tty: libc::c_int = 0;
        // SAFETY: TIOCSETD reads an int from a valid pointer.
        unsafe { libc::syscall(libc::SYS_ioctl, fd, request, &n_tty as *const libc::c_int) }
    })
}

/// TIOCGETD: reading the line discipline stays allowed.
pub(super) fn tiocgetd() -> Attempt {
    let (master, _) = open_pty()?;
    let mut ldisc: libc::c_int = -1;
    // SAFETY: TIOCGETD writes an int into a valid pointer.
    if unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCGETD, &mut ldisc) } != 0 {
        return Err(last_denial("ioctl(pty, TIOCGETD)"));
    }
    Ok(format!("ldisc={ldisc}"))
}

pub(super) fn tiocgwinsz() -> Attempt {
    let (master, _) = open_pty()?;
    winsize(master.as_raw_fd())
}

pub(super) fn winsize(fd: libc::c_int) -> Attempt {
    // SAFETY: an all-zero winsize is valid, and TIOCGWINSZ fills it.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    if unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) } != 0 {
        return Err(last_denial(format!("ioctl({fd}, TIOCGWINSZ)")));
    }
    Ok(format!("winsize={}x{}", ws.ws_row, ws.ws_col))
}

/// Which terminal stdin is: its name, and the device numbers of the devpts it lives on.
pub(super) fn tty_stdin() -> Attempt {
    use std::os::unix::fs::MetadataExt as _;
    let mut name = [0 as libc::c_char; 128];
    // SAFETY: ttyname_r writes a NUL-terminated name into the local buffer.
    let rc = unsafe { libc::ttyname_r(0, name.as_mut_ptr(), name.len()) };
    if rc != 0 {
        return Err(denial("ttyname_r(0)", &io::Error::from_raw_os_error(rc)));
    }
    // SAFETY: ttyname_r succeeded, so the buffer holds a C string.
    let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }.to_string_lossy();
    let meta = std::fs::metadata("/proc/self/fd/0").map_err(|e| denial("stat fd 0", &e))?;
    Ok(format!(
        "ttyname={name} dev={} rdev={}",
        meta.dev(),
        meta.rdev()
    ))
}

/// fchmod on the terminal the probe was given as stdin (a developer's pty, if inherited).
pub(super) fn fchmod_stdin(mode: &str) -> Attempt {
    let mode = u32::from_str_radix(mode, 8).map_err(|_| Denial {
        name: "EINVAL".into(),
        what: format!("not an octal mode: {mode}"),
    })?;
    raw_syscall(&format!("fchmod(0, {mode:o})"), || {
        // SAFETY: fchmod on a descriptor the probe holds.
        unsafe { libc::syscall(libc::SYS_fchmod, 0, mode) }
    })
}
