//! The probe: the half of the escape suite that runs inside the sandbox.
//!
//! `<exe> probe <action> [args]` makes one attempt with plain syscalls and prints exactly one line,
//! `PROBE ok <detail>` (exit 0) or `PROBE denied <ERRNO> <detail>` (exit 1); a usage error exits 2.
//! Raw system calls run in a forked child, so a seccomp rule that kills instead of failing is
//! reported as `denied KILLED(<signal>)` rather than taking the probe down with it.

mod files;
mod kernel;
mod net;
mod procs;
pub(crate) mod sockets;
mod tty;

use std::ffi::{CString, OsStr};
use std::fs;
use std::io::{self, Write as _};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::net::UnixStream;

use self::files::*;
use self::kernel::*;
use self::net::*;
use self::procs::*;
use self::sockets::*;
use self::tty::*;

/// Exit status of a probe whose attempt succeeded.
pub const OK: i32 = 0;
/// Exit status of a probe whose attempt was refused.
pub const DENIED: i32 = 1;
/// Exit status of a probe that was called wrongly.
pub const USAGE: i32 = 2;

pub(super) const TIOCSTI: u64 = 0x5412;
pub(super) const TIOCLINUX: u64 = 0x541C;
pub(super) const TIOCSETD: u64 = 0x5423;
/// Bits above the 32 the kernel reads from an ioctl request; a filter comparing all 64 misses them.
pub(super) const HIGH_BITS: u64 = 0xdead_0001_0000_0000;
/// Why an attempt failed: an errno name (`EPERM`) or `KILLED(<signal>)`.
pub(super) struct Denial {
    pub(super) name: String,
    pub(super) what: String,
}

pub(super) type Attempt = Result<String, Denial>;

pub(super) fn denial(what: impl Into<String>, err: &io::Error) -> Denial {
    Denial {
        name: errno_name(err.raw_os_error().unwrap_or(0)),
        what: what.into(),
    }
}

pub(super) fn last_denial(what: impl Into<String>) -> Denial {
    denial(what, &io::Error::last_os_error())
}

/// The symbolic name of an errno value, e.g. `EPERM`.
pub fn errno_name(errno: i32) -> String {
    format!("{:?}", nix::errno::Errno::from_raw(errno))
}

/// Runs one probe action; returns the process exit status.
pub fn run(args: &[String]) -> i32 {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // A setuid-root copy exists only for the euid check: never be a root tool for anything else.
    // SAFETY: getuid/geteuid cannot fail.
    if unsafe { libc::geteuid() != libc::getuid() } && args != ["euid"] {
        eprintln!("probe: running setuid, only `euid` is allowed");
        return USAGE;
    }
    let attempt = match args.as_slice() {
        ["read", path] => read(path),
        ["write", path] => write(path, false),
        ["write-p", path] => write(path, true),
        ["open-write", path] => open_write(path),
        ["rename", from, to] => fs::rename(from, to)
            .map(|()| format!("renamed {from} to {to}"))
            .map_err(|e| denial(format!("rename {from} {to}"), &e)),
        ["unlink", path] => fs::remove_file(path)
            .map(|()| format!("unlinked {path}"))
            .map_err(|e| denial(format!("unlink {path}"), &e)),
        ["stat", path] => fs::symlink_metadata(path)
            .map(|m| format!("{path} exists ({:?})", m.file_type()))
            .map_err(|e| denial(format!("stat {path}"), &e)),
        ["swap-symlink", target, link, ready, stop] => swap_symlink(target, link, ready, stop),
        ["cwd"] => std::env::current_dir()
            .map(|d| format!("cwd={}", d.display()))
            .map_err(|e| denial("getcwd", &e)),
        ["kill", signal, pid] => kill(signal, pid),
        ["take-over-others"] => procs::take_over_others(),
        ["reach-fds", whose @ ("others" | "self")] => procs::reach_fds(whose),
        ["euid"] => Ok(ids()),
        ["status", fields @ ..] if !fields.is_empty() => status_fields(fields),
        ["fork"] => in_child("fork", || 0),
        ["spawn", program] => std::process::Command::new(program)
            .status()
            .map(|s| format!("spawned {program}: {s}"))
            .map_err(|e| denial(format!("spawn {program}"), &e)),
        ["tiocsti"] => tiocsti(TIOCSTI),
        ["tiocsti-high"] => tiocsti(TIOCSTI | HIGH_BITS),
        ["tioclinux"] => tioclinux(),
        ["tiocgwinsz"] => tiocgwinsz(),
        ["tiocsetd"] => tiocsetd(TIOCSETD),
        ["tiocsetd-high"] => tiocsetd(TIOCSETD | HIGH_BITS),
        ["tiocgetd"] => tiocgetd(),
        ["io-uring-setup"] => io_uring_setup(),
        ["io-uring-enter"] => io_uring_enter(),
        ["io-uring-register"] => io_uring_register(),
        ["socket-errnos", how, names @ ..] if !names.is_empty() => match How::parse(how) {
            Some(how) => socket_errnos(how, names),
            None => {
                eprintln!("probe: socket-errnos wants real, pair or unknown-type, not {how:?}");
                return USAGE;
            }
        },
        ["chmod-same", path] => chmod_same(path),
        ["chown-same", path] => chown_same(path),
        ["read-bytes", path, n] => read_bytes(path, n),
        ["groups"] => groups(),
        ["keyctl"] => raw_syscall("keyctl(KEYCTL_GET_KEYRING_ID)", || unsafe {
            libc::syscall(libc::SYS_keyctl, 0, -3, 0)
        }),
        ["add-key"] => add_key(),
        ["request-key"] => request_key(),
        ["bpf"] => raw_syscall("bpf(invalid command)", || unsafe {
            libc::syscall(libc::SYS_bpf, 0xffff, 0, 0)
        }),
        ["setns"] => raw_syscall("setns(-1)", || unsafe {
            libc::syscall(libc::SYS_setns, -1, 0)
        }),
        ["unshare-user"] => raw_syscall("unshare(CLONE_NEWUSER)", || unsafe {
            libc::syscall(libc::SYS_unshare, libc::CLONE_NEWUSER)
        }),
        ["clone-newuser"] => clone_newuser(),
        ["clone3"] => raw_syscall("clone3(NULL, 0)", || unsafe {
            libc::syscall(libc::SYS_clone3, 0, 0)
        }),
        ["x32-unshare"] => x32_unshare(),
        ["mount-tmpfs", dir] => mount_tmpfs(dir),
        ["fsopen"] => fsopen(),
        ["umount", path] => umount(path),
        ["connect-tcp", addr] => connect_tcp(addr),
        ["connect-abstract", name] => connect_abstract(name),
        ["connect-unix", path] => UnixStream::connect(path)
            .map(|_| format!("connected to {path}"))
            .map_err(|e| denial(format!("connect {path}"), &e)),
        ["loopback-self"] => loopback_self(),
        ["tiocsti-stdin"] => raw_syscall("ioctl(0 = inherited terminal, TIOCSTI)", || {
            let byte: u8 = b'#';
            // SAFETY: `byte` is valid for the kernel to read.
            unsafe { libc::syscall(libc::SYS_ioctl, 0, TIOCSTI, &byte as *const u8) }
        }),
        ["tiocsti-stdin-high"] => {
            raw_syscall("ioctl(0 = inherited terminal, TIOCSTI | high bits)", || {
                let byte: u8 = b'#';
                // SAFETY: as above.
                unsafe {
                    libc::syscall(libc::SYS_ioctl, 0, TIOCSTI | HIGH_BITS, &byte as *const u8)
                }
            })
        }
        ["winsize-stdin"] => winsize(0),
        ["tty-stdin"] => tty_stdin(),
        ["fchmod-stdin", mode] => fchmod_stdin(mode),
        ["fds"] => open_fds(),
        ["read-at", fd, rel] => read_at(fd, rel),
        ["read-fd", fd] => read_fd(fd),
        ["read-via-proc-roots", path] => read_via_proc_roots(path),
        ["find-env", name] => find_env(name),
        _ => {
            eprintln!("probe: unknown action or wrong arguments: {args:?}");
            return USAGE;
        }
    };
    let mut out = io::stdout().lock();
    let code = match attempt {
        Ok(detail) => {
            let _ = writeln!(out, "PROBE ok {detail}");
            OK
        }
        Err(d) => {
            let _ = writeln!(out, "PROBE denied {} {}", d.name, d.what);
            DENIED
        }
    };
    let _ = out.flush();
    code
}

/// Runs `f` in a forked child and reports how it ended: exit 0 is success, any other exit status is
/// the errno, a signal is a kill (e.g. by a seccomp `KILL` action).
pub(super) fn in_child(what: &str, f: impl FnOnce() -> i32) -> Attempt {
    // SAFETY: the probe is single-threaded, so the child may run ordinary code before `_exit`.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(last_denial(format!("fork for {what}")));
    }
    if pid == 0 {
        let code = f();
        // SAFETY: ends the child without running the parent's atexit handlers or destructors.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: `status` is a valid out-pointer for this call.
    if unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        return Err(last_denial(format!("waitpid for {what}")));
    }
    if libc::WIFSIGNALED(status) {
        return Err(Denial {
            name: format!("KILLED({})", libc::WTERMSIG(status)),
            what: what.into(),
        });
    }
    match libc::WEXITSTATUS(status) {
        0 => Ok(format!("{what} succeeded")),
        errno => Err(Denial {
            name: errno_name(errno),
            what: what.into(),
        }),
    }
}

/// The exit status a child reports for the errno of the call that just failed.
pub(super) fn errno_exit() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(255)
        .clamp(1, 255)
}

pub(super) fn raw_syscall(what: &str, call: impl FnOnce() -> libc::c_long) -> Attempt {
    in_child(what, || if call() >= 0 { 0 } else { errno_exit() })
}

pub(super) fn cstring(s: &str) -> Result<CString, Denial> {
    CString::new(OsStr::new(s).as_bytes()).map_err(|_| Denial {
        name: "EINVAL".into(),
        what: format!("NUL in {s:?}"),
    })
}
