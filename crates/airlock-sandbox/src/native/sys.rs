//! Thin wrappers over the system calls the launch needs that nix does not cover: the new mount API
//! (open_tree, move_mount, mount_setattr, fsopen/fsconfig/fsmount), openat2, pivot_root, clone with a
//! pidfd. Each returns `io::Result` and never allocates, so they are safe between fork and exec.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

// Stable kernel ABI values (include/uapi/linux/mount.h, openat2.h), spelled out because not every libc
// release exports them for every target.
const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x04;
const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;
pub const MOUNT_ATTR_RDONLY: u64 = 0x01;
const FSCONFIG_SET_STRING: libc::c_uint = 1;
const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
const FSOPEN_CLOEXEC: libc::c_uint = 1;
const FSMOUNT_CLOEXEC: libc::c_uint = 1;
pub use airlock_config::hostfs::{RESOLVE_BENEATH, RESOLVE_IN_ROOT, RESOLVE_NO_SYMLINKS};

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

fn check(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn owned(ret: libc::c_long) -> io::Result<OwnedFd> {
    let fd = check(ret)? as RawFd;
    // SAFETY: the kernel just returned this descriptor to us and nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub use airlock_config::hostfs::openat2;

/// A detached copy of the mount tree at `fd` (recursive when `recursive`).
pub fn clone_tree(fd: BorrowedFd<'_>, recursive: bool) -> io::Result<OwnedFd> {
    let mut flags =
        OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | libc::AT_EMPTY_PATH as libc::c_uint;
    if recursive {
        flags |= libc::AT_RECURSIVE as libc::c_uint;
    }
    // SAFETY: an empty C string with AT_EMPTY_PATH operates on the fd itself.
    owned(unsafe { libc::syscall(libc::SYS_open_tree, fd.as_raw_fd(), c"".as_ptr(), flags) })
}

/// Sets (and clears) mount attributes on the detached or attached tree at `fd`.
pub fn set_attr(fd: BorrowedFd<'_>, set: u64, clear: u64, recursive: bool) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    let mut flags = libc::AT_EMPTY_PATH as libc::c_uint;
    if recursive {
        flags |= libc::AT_RECURSIVE as libc::c_uint;
    }
    // SAFETY: valid pointers for the duration of the call.
    check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd.as_raw_fd(),
            c"".as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })
    .map(drop)
}

/// Attaches the detached tree `from` on top of the file or directory `to` (both fds).
pub fn move_mount(from: BorrowedFd<'_>, to: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: empty paths with the *_EMPTY_PATH flags operate on the fds.
    check(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            from.as_raw_fd(),
            c"".as_ptr(),
            to.as_raw_fd(),
            c"".as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    })
    .map(drop)
}

pub const MOUNT_ATTR_NOSUID: u64 = 0x02;
pub const MOUNT_ATTR_NODEV: u64 = 0x04;
pub const MOUNT_ATTR_NOEXEC: u64 = 0x08;

const FSCONFIG_SET_FLAG: libc::c_uint = 0;

/// A new, detached filesystem instance (`fsopen` + options + `fsmount` with `attrs`). An option
/// with an empty value is a flag (`FSCONFIG_SET_FLAG`).
pub fn new_fs(fstype: &CStr, options: &[(&CStr, &CStr)], attrs: u64) -> io::Result<OwnedFd> {
    // SAFETY: valid C strings for the duration of each call.
    let ctx = owned(unsafe { libc::syscall(libc::SYS_fsopen, fstype.as_ptr(), FSOPEN_CLOEXEC) })?;
    for (key, value) in options {
        let (cmd, value) = if value.is_empty() {
            (FSCONFIG_SET_FLAG, std::ptr::null())
        } else {
            (FSCONFIG_SET_STRING, value.as_ptr())
        };
        // SAFETY: valid C strings (or null for a flag) for the duration of the call.
        check(unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                ctx.as_raw_fd(),
                cmd,
                key.as_ptr(),
                value,
                0,
            )
        })?;
    }
    check(unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            ctx.as_raw_fd(),
            FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_char>(),
            0,
        )
    })?;
    owned(unsafe { libc::syscall(libc::SYS_fsmount, ctx.as_raw_fd(), FSMOUNT_CLOEXEC, attrs) })
}

/// `pivot_root(new_root, put_old)`.
pub fn pivot_root(new_root: &CStr, put_old: &CStr) -> io::Result<()> {
    // SAFETY: valid C strings.
    check(unsafe { libc::syscall(libc::SYS_pivot_root, new_root.as_ptr(), put_old.as_ptr()) })
        .map(drop)
}

/// A pidfd of the process `pid` (readable once it has exited; no pid-reuse race from here on).
pub fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open(pid, 0) returns a new descriptor or -1.
    owned(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) })
}

/// Sends `signal` through a pidfd (no pid-reuse race).
pub fn pidfd_send_signal(pidfd: BorrowedFd<'_>, signal: i32) -> io::Result<()> {
    // SAFETY: a null siginfo asks the kernel to fill in the usual kill() information.
    check(unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            signal,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    })
    .map(drop)
}

/// Closes every descriptor but `keep` (a duplicate is fine), with raw `close_range` calls on a
/// stack copy: safe in a forked child, which must hold nothing else of the supervisor's (host
/// listeners, the terminal, the watchdog's pipe, which must close when airlock dies).
///
/// # Safety
/// Every other descriptor of this process is closed: call it only where nothing else uses one (a
/// freshly forked, single-threaded child).
pub unsafe fn close_all_but<const N: usize>(mut keep: [RawFd; N]) {
    keep.sort_unstable();
    let mut from: u32 = 0;
    for fd in keep {
        let fd = fd as u32;
        if fd > from {
            // SAFETY: close_range only closes descriptors.
            unsafe { libc::syscall(libc::SYS_close_range, from, fd - 1, 0u32) };
        }
        from = fd + 1;
    }
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_close_range, from, u32::MAX, 0u32) };
}

/// The result of [`clone_process`] in each process.
pub enum Cloned {
    Parent { pid: libc::pid_t, pidfd: OwnedFd },
    Child,
}

/// fork-like `clone(2)` with extra namespace flags, returning a pidfd to the parent.
///
/// # Safety
/// The caller must be single-threaded, or the child must only make async-signal-safe calls.
pub unsafe fn clone_process(namespaces: libc::c_int) -> io::Result<Cloned> {
    let mut pidfd: libc::c_int = -1;
    let flags = (namespaces | libc::CLONE_PIDFD | libc::SIGCHLD) as libc::c_ulong;
    // x86_64: clone(flags, stack, parent_tid, child_tid, tls); aarch64: clone(flags, stack, parent_tid,
    // tls, child_tid). The pidfd goes to parent_tid on both; a null stack means fork semantics.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone,
            flags,
            std::ptr::null_mut::<libc::c_void>(),
            &mut pidfd as *mut libc::c_int,
            std::ptr::null_mut::<libc::c_void>(),
            0usize,
        )
    };
    let pid = check(ret)? as libc::pid_t;
    if pid == 0 {
        return Ok(Cloned::Child);
    }
    // SAFETY: CLONE_PIDFD stored a fresh descriptor that we now own.
    Ok(Cloned::Parent {
        pid,
        pidfd: unsafe { OwnedFd::from_raw_fd(pidfd) },
    })
}

/// Starts a process that shares this one's memory and runs `body` on a stack of its own while
/// this process waits (`CLONE_VM | CLONE_VFORK`, as `posix_spawn` does), until `body` execs or
/// exits; returns the new process's pid. No copy of the address space is made, and none is torn
/// down at the exec.
///
/// # Safety
///
/// The caller must be single-threaded. `body` must end in `execve` or `_exit` and must not drop,
/// move or free anything of this process's (the memory is the same): it may allocate (this
/// process is stopped, so the allocator is not used concurrently), and what it allocates stays.
pub unsafe fn spawn_shared(body: &mut dyn FnMut() -> i32) -> io::Result<libc::pid_t> {
    const STACK: usize = 256 << 10;
    extern "C" fn trampoline(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` is the `&mut &mut dyn FnMut` below, alive while the parent waits.
        let body = unsafe { &mut *(arg as *mut &mut dyn FnMut() -> i32) };
        body()
    }
    let mut stack = vec![0u8; STACK];
    let top = (stack.as_mut_ptr() as usize + STACK) & !15;
    let mut body = body;
    // SAFETY: the child runs `trampoline` on `stack`, which outlives it: with CLONE_VFORK this call
    // returns only after the child has exec'd or exited.
    let pid = unsafe {
        libc::clone(
            trampoline,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &mut body as *mut &mut dyn FnMut() -> i32 as *mut libc::c_void,
        )
    };
    drop(stack);
    check(pid as libc::c_long).map(|p| p as libc::pid_t)
}

/// Sends `head` with the descriptor `fd` (SCM_RIGHTS) as one message on the launch socket.
pub(crate) fn send_with_fd(sock: RawFd, head: &[u8], fd: RawFd) -> io::Result<()> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let fds = [fd];
    sendmsg::<()>(
        sock,
        &[io::IoSlice::new(head)],
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        None,
    )
    .map(drop)
    .map_err(io::Error::from)
}

/// Receives one message into `buf` and the descriptor it carried, if any (close-on-exec); its
/// length, 0 at the other end's close. EINTR is retried.
pub(crate) fn recv_with_fd(
    sock: RawFd,
    buf: &mut [u8],
    flags: nix::sys::socket::MsgFlags,
) -> io::Result<(usize, Option<OwnedFd>)> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    loop {
        let mut cmsg = nix::cmsg_space!([RawFd; 1]);
        let mut iov = [io::IoSliceMut::new(buf)];
        let msg = match recvmsg::<()>(
            sock,
            &mut iov,
            Some(&mut cmsg),
            flags | MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
            Ok(msg) => msg,
        };
        let mut passed = None;
        for c in msg.cmsgs().map_err(io::Error::from)? {
            if let ControlMessageOwned::ScmRights(fds) = c {
                // SAFETY: SCM_RIGHTS just installed these in this process; we own them.
                passed = fds.first().map(|&fd| unsafe { OwnedFd::from_raw_fd(fd) });
            }
        }
        return Ok((msg.bytes, passed));
    }
}
