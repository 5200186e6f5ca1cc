//! System calls the filter must refuse: keyrings, namespaces, the x32 ABI, mounts, io_uring.

#[cfg(not(target_arch = "x86_64"))]
use super::Denial;
use super::{Attempt, cstring, raw_syscall};

#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: libc::c_long = 0x4000_0000;

pub(super) fn add_key() -> Attempt {
    raw_syscall("add_key(user, KEY_SPEC_PROCESS_KEYRING)", || {
        let (kind, desc, payload) = (c"user", c"airlock-escape", b"x");
        // SAFETY: all pointers are valid NUL-terminated strings or a buffer of the given length.
        unsafe {
            libc::syscall(
                libc::SYS_add_key,
                kind.as_ptr(),
                desc.as_ptr(),
                payload.as_ptr(),
                payload.len(),
                -2, // KEY_SPEC_PROCESS_KEYRING
            )
        }
    })
}

pub(super) fn request_key() -> Attempt {
    raw_syscall("request_key(user, no-such-key)", || {
        let (kind, desc) = (c"user", c"airlock-escape-no-such-key");
        // SAFETY: valid NUL-terminated strings; a NULL callout means "do not upcall".
        unsafe { libc::syscall(libc::SYS_request_key, kind.as_ptr(), desc.as_ptr(), 0, 0) }
    })
}

pub(super) fn clone_newuser() -> Attempt {
    raw_syscall("clone(CLONE_NEWUSER)", || {
        // SAFETY: a fork-like clone (no new stack): the child only calls `_exit`.
        let pid = unsafe {
            libc::syscall(
                libc::SYS_clone,
                (libc::CLONE_NEWUSER | libc::SIGCHLD) as libc::c_ulong,
                0,
                0,
                0,
                0,
            )
        };
        if pid == 0 {
            // SAFETY: leaves the grandchild immediately.
            unsafe { libc::_exit(0) };
        }
        if pid < 0 {
            return -1;
        }
        let mut status = 0;
        // SAFETY: `status` is a valid out-pointer.
        unsafe { libc::waitpid(pid as libc::pid_t, &mut status, 0) };
        0
    })
}

#[cfg(target_arch = "x86_64")]
pub(super) fn x32_unshare() -> Attempt {
    // The x32 ABI shares x86_64's numbers with bit 30 set; a filter that only checks the
    // number would be bypassed, so the filter must refuse this whole ABI.
    raw_syscall("x32 unshare(CLONE_NEWUSER)", || unsafe {
        libc::syscall(X32_SYSCALL_BIT | libc::SYS_unshare, libc::CLONE_NEWUSER)
    })
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) fn x32_unshare() -> Attempt {
    Err(Denial {
        name: "ENOSYS".into(),
        what: "x32 exists only on x86_64".into(),
    })
}

/// Mounts a tmpfs and, if that worked, unmounts it at once: against a broken sandbox running as
/// root the mount would land on the host, and the suite must not leave it there.
pub(super) fn mount_tmpfs(dir: &str) -> Attempt {
    let target = cstring(dir)?;
    raw_syscall(&format!("mount tmpfs on {dir}"), || {
        // SAFETY: valid NUL-terminated strings and a NULL data pointer.
        let rc = unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                target.as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        if rc == 0 {
            // SAFETY: as above.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        }
        rc as libc::c_long
    })
}

pub(super) fn fsopen() -> Attempt {
    raw_syscall("fsopen(tmpfs)", || unsafe {
        libc::syscall(libc::SYS_fsopen, c"tmpfs".as_ptr(), 0)
    })
}

pub(super) fn umount(path: &str) -> Attempt {
    let target = cstring(path)?;
    raw_syscall(&format!("umount2({path}, MNT_DETACH)"), || unsafe {
        libc::umount2(target.as_ptr(), libc::MNT_DETACH) as libc::c_long
    })
}

/// `io_uring_setup(1, params)`: a ring that works would let every later operation pass beside the
/// filter. The ring is closed at once.
pub(super) fn io_uring_setup() -> Attempt {
    raw_syscall("io_uring_setup(1, zeroed params)", || {
        // struct io_uring_params is 120 bytes; all zero asks for the defaults.
        let mut params = [0u8; 120];
        // SAFETY: the kernel reads and writes `params`, which is large enough.
        let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, 1u32, params.as_mut_ptr()) };
        if fd >= 0 {
            // SAFETY: closing the ring just created.
            unsafe { libc::close(fd as libc::c_int) };
        }
        fd
    })
}

/// `io_uring_enter` on fd -1: EBADF from the kernel, unless the filter answers first.
pub(super) fn io_uring_enter() -> Attempt {
    raw_syscall("io_uring_enter(-1)", || unsafe {
        libc::syscall(libc::SYS_io_uring_enter, -1, 0, 0, 0, 0, 0)
    })
}

/// `io_uring_register` on fd -1: EBADF from the kernel, unless the filter answers first.
pub(super) fn io_uring_register() -> Attempt {
    raw_syscall("io_uring_register(-1)", || unsafe {
        libc::syscall(libc::SYS_io_uring_register, -1, 0, 0, 0)
    })
}
