//! The supervisor's answer to a refused namespace call. Without `[sandbox] nested_namespaces`, the
//! seccomp filter hands `unshare`/`clone` with `CLONE_NEW*` to the supervisor
//! (`SECCOMP_RET_USER_NOTIF`); it answers EPERM, as the plain filter would, and says once per
//! session which key allows it. bwrap's own message blames the kernel ("No permissions to create
//! new namespace, likely because the kernel does not allow non-privileged user namespaces"), which
//! is wrong inside airlock.

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

/// What the supervisor prints the first time.
pub const HINT: &str = "airlock: this sandbox refused to create a namespace (unshare or clone: bwrap, \
`unshare`, an agent's own sandbox); set [sandbox] nested_namespaces = true in airlock's config to \
allow nested sandboxes (docs/security.md)";

/// The listener of the workload's filter.
pub struct Listener {
    fd: OwnedFd,
    /// Buffers the size the kernel uses for a notification and a response (it may be newer than
    /// libc's structs), in u64 words so the structs' alignment holds.
    notif: Vec<u64>,
    resp: Vec<u64>,
    said: bool,
}

fn words(bytes: usize) -> usize {
    bytes.div_ceil(8)
}

impl Listener {
    pub fn new(fd: OwnedFd) -> Listener {
        // SAFETY: SECCOMP_GET_NOTIF_SIZES fills the struct; zeroed is a valid starting value.
        let mut sizes: libc::seccomp_notif_sizes = unsafe { std::mem::zeroed() };
        let known = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_GET_NOTIF_SIZES,
                0 as libc::c_uint,
                &mut sizes as *mut libc::seccomp_notif_sizes,
            )
        } == 0;
        let (notif, resp) = if known {
            (
                usize::from(sizes.seccomp_notif),
                usize::from(sizes.seccomp_notif_resp),
            )
        } else {
            (0, 0)
        };
        let notif = notif.max(std::mem::size_of::<libc::seccomp_notif>());
        let resp = resp.max(std::mem::size_of::<libc::seccomp_notif_resp>());
        Listener {
            fd,
            notif: vec![0; words(notif)],
            resp: vec![0; words(resp)],
            said: false,
        }
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        use std::os::fd::AsFd as _;
        self.fd.as_fd()
    }

    /// Answers one pending call with EPERM; the hint the first time, else `None`.
    pub fn answer(&mut self) -> Option<&'static str> {
        self.notif.fill(0);
        // SAFETY: the buffer is zeroed (the kernel requires it) and at least the kernel's size.
        let got = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV,
                self.notif.as_mut_ptr(),
            )
        };
        if got != 0 {
            // ENOENT: the caller was interrupted or died; nothing to answer.
            return None;
        }
        // SAFETY: the kernel wrote a seccomp_notif at the buffer's start.
        let id = unsafe { (*self.notif.as_ptr().cast::<libc::seccomp_notif>()).id };
        self.resp.fill(0);
        // SAFETY: the buffer is large enough and aligned for a seccomp_notif_resp.
        unsafe {
            let resp = &mut *self.resp.as_mut_ptr().cast::<libc::seccomp_notif_resp>();
            resp.id = id;
            resp.error = -libc::EPERM;
            resp.val = 0;
            resp.flags = 0;
        }
        // SAFETY: as above.
        let sent = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SEND,
                self.resp.as_mut_ptr(),
            )
        };
        // A caller that went away meanwhile gives ENOENT; nothing else can fail with this answer.
        let _ = sent;
        (!std::mem::replace(&mut self.said, true)).then_some(HINT)
    }
}
