//! Sockets in the sandbox's network namespace, made by a helper process.
//!
//! Why a helper: the supervisor's one clone made the sandbox's user namespace and its network
//! namespace together, so the supervisor's uid owns that user namespace and holds every capability
//! in it. But `setns(CLONE_NEWNET)` also wants CAP_SYS_ADMIN in the caller's *own* user namespace,
//! which an unprivileged supervisor does not have in the initial one; entering the sandbox's user
//! namespace first gives it, and `setns(CLONE_NEWUSER)` is refused to a multithreaded process,
//! which the supervisor is (the egress proxy, the relays). A `setns` on a helper thread would so
//! work only as root. So a forked, single-threaded helper joins the sandbox's user and network
//! namespaces once, drops every capability, and answers each request with a fresh TCP socket
//! passed back with SCM_RIGHTS. A socket keeps the namespace it was made in: the supervisor binds
//! or connects it itself. The helper never joins the sandbox's mount or pid namespace, so it sees
//! none of its files and the workload can neither see nor signal it. (Asking the sandbox's init
//! for sockets would work too, but would put a request loop inside the sandbox.)
//!
//! The helper may be forked while other threads run, so everything it does after `fork` is a raw
//! system call on stack memory: no allocation, no lock. It exits when its channel closes, which
//! the kernel does when the supervisor dies, however it dies.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// The helper's name in `ps` (`/proc/<pid>/comm`).
pub const HELPER_NAME: &str = "airlock-netns";
const HELPER_NAME_C: &std::ffi::CStr = c"airlock-netns";

/// How long the helper may take to join the namespaces or answer one request.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// The sandbox's user and network namespaces, and the helper that makes sockets in them.
pub(crate) struct Netns {
    /// None when the sandbox is in this process's user namespace (a container of a rootful
    /// engine, run by root): `setns` into one's own user namespace is refused.
    user: Option<OwnedFd>,
    net: OwnedFd,
    /// None once stopped: no helper is started again.
    helper: Mutex<Option<Option<Helper>>>,
}

struct Helper {
    pid: libc::pid_t,
    chan: OwnedFd,
}

impl Netns {
    /// Holds the namespaces of the sandbox whose first process is `init` (the supervisor's own
    /// child, or a container's first process).
    pub fn open(init: libc::pid_t) -> io::Result<Netns> {
        let open = |ns: &str| File::open(format!("/proc/{init}/ns/{ns}")).map(OwnedFd::from);
        let user = open("user")?;
        let ours = nix::sys::stat::stat("/proc/self/ns/user")?;
        let theirs = nix::sys::stat::fstat(user.as_raw_fd())?;
        let same = theirs.st_ino == ours.st_ino && theirs.st_dev == ours.st_dev;
        Ok(Netns {
            user: (!same).then_some(user),
            net: open("net")?,
            helper: Mutex::new(Some(None)),
        })
    }

    /// Starts the helper now (while the supervisor is still single-threaded, at launch).
    pub fn start(&self) -> io::Result<()> {
        let mut guard = self.helper.lock().unwrap_or_else(PoisonError::into_inner);
        let helper = guard.as_mut().ok_or_else(stopped)?;
        if helper.is_none() {
            *helper = Some(Helper::spawn(self)?);
        }
        Ok(())
    }

    /// Stops the helper (killed and reaped) for good: the session is ending.
    pub fn stop(&self) {
        let helper = self
            .helper
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop(helper);
    }

    /// A new IPv4 TCP socket (blocking, close-on-exec) in the sandbox's network namespace.
    pub fn socket(&self) -> io::Result<OwnedFd> {
        let mut guard = self.helper.lock().unwrap_or_else(PoisonError::into_inner);
        let helper = guard.as_mut().ok_or_else(stopped)?;
        let mut last = None;
        for _ in 0..2 {
            if helper.is_none() {
                *helper = Some(Helper::spawn(self)?);
            }
            match helper.as_ref().map(Helper::socket) {
                Some(Ok(Answer::Socket(fd))) => return Ok(fd),
                Some(Ok(Answer::Errno(e))) => return Err(io::Error::from_raw_os_error(e)),
                // The helper is gone (killed by hand?): start another, once.
                Some(Err(e)) => {
                    *helper = None;
                    last = Some(e);
                }
                None => {}
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("the netns helper did not answer")))
    }
}

fn stopped() -> io::Error {
    io::Error::other("the session is ending")
}

impl Drop for Helper {
    fn drop(&mut self) {
        // SAFETY: our own child, reaped right after: the pid cannot have been reused.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }
}

enum Answer {
    Socket(OwnedFd),
    Errno(i32),
}

impl Helper {
    fn spawn(ns: &Netns) -> io::Result<Helper> {
        let mut pair = [0 as RawFd; 2];
        // SAFETY: a valid two-int array for the kernel to fill.
        if unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                pair.as_mut_ptr(),
            )
        } != 0
        {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both just created and ours alone.
        let (ours, theirs) =
            unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) };
        let (chan, net) = (theirs.as_raw_fd(), ns.net.as_raw_fd());
        let user = ns.user.as_ref().map_or(-1, |u| u.as_raw_fd());
        // Read before the fork: the child may not allocate.
        let last_cap = crate::native::caps::last_cap();
        // SAFETY: the child runs only `helper_main`, raw system calls on stack memory.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            // SAFETY: the forked child; never returns.
            unsafe { helper_main(chan, user, net, last_cap) }
        }
        drop(theirs);
        let helper = Helper { pid, chan: ours };
        set_timeout(&helper.chan, ANSWER_TIMEOUT)?;
        let mut buf = [0u8; 8];
        let n = recv(&helper.chan, &mut buf, &mut None)?;
        match (n, buf[0]) {
            (1, b'R') => Ok(helper),
            (5, b'E') => Err(io::Error::other(format!(
                "cannot enter the sandbox's network namespace: {}",
                io::Error::from_raw_os_error(i32::from_le_bytes([buf[1], buf[2], buf[3], buf[4]]))
            ))),
            _ => Err(io::Error::other(
                "the netns helper ended before it was ready",
            )),
        }
    }

    fn socket(&self) -> io::Result<Answer> {
        // SAFETY: one byte from a valid buffer.
        if unsafe {
            libc::send(
                self.chan.as_raw_fd(),
                b"s".as_ptr().cast(),
                1,
                libc::MSG_NOSIGNAL,
            )
        } != 1
        {
            return Err(io::Error::last_os_error());
        }
        let mut buf = [0u8; 8];
        let mut fd = None;
        let n = recv(&self.chan, &mut buf, &mut fd)?;
        match (n, buf[0], fd) {
            (1, b'S', Some(fd)) => Ok(Answer::Socket(fd)),
            (5, b'E', _) => Ok(Answer::Errno(i32::from_le_bytes([
                buf[1], buf[2], buf[3], buf[4],
            ]))),
            _ => Err(io::Error::other("the netns helper ended")),
        }
    }
}

fn set_timeout(fd: &OwnedFd, timeout: Duration) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_usec: 0,
    };
    // SAFETY: a valid timeval for SO_RCVTIMEO.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One message; a descriptor passed with it lands in `fd`. 0 bytes is an error (the helper is gone).
fn recv(chan: &OwnedFd, buf: &mut [u8], fd: &mut Option<OwnedFd>) -> io::Result<usize> {
    // SAFETY: CMSG_SPACE is a pure computation.
    const SPACE: usize = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    // u64 words keep the control buffer aligned for cmsghdr.
    let mut control = [0u64; SPACE.div_ceil(8)];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is plain data; every pointer set below outlives the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = SPACE as _;
    let n = loop {
        // SAFETY: as above.
        let n = unsafe { libc::recvmsg(chan.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            break n;
        }
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel filled msg_control; the macros walk it within msg_controllen.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        if !c.is_null() && (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS
        {
            let raw = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<RawFd>());
            *fd = Some(OwnedFd::from_raw_fd(raw));
        }
    }
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the netns helper ended",
        ));
    }
    Ok(n as usize)
}

/// The helper, after `fork`: raw system calls only.
///
/// # Safety
/// Call only in a freshly forked child; it never returns.
unsafe fn helper_main(chan: RawFd, user: RawFd, net: RawFd, last_cap: u32) -> ! {
    // SAFETY (whole body): plain system calls on valid descriptors and stack buffers.
    unsafe {
        // `user` is -1 when the sandbox shares this user namespace: nothing to join there.
        crate::native::sys::close_all_but([chan, if user < 0 { chan } else { user }, net]);
        if (user >= 0 && libc::setns(user, libc::CLONE_NEWUSER) != 0)
            || libc::setns(net, libc::CLONE_NEWNET) != 0
        {
            send_errno(chan);
            libc::_exit(1);
        }
        if user >= 0 {
            libc::close(user);
        }
        libc::close(net);
        // It only ever calls socket(2): it needs no capability, in any namespace.
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        if crate::native::caps::drop_all(last_cap).is_err() {
            send_errno(chan);
            libc::_exit(1);
        }
        libc::prctl(libc::PR_SET_NAME, HELPER_NAME_C.as_ptr(), 0, 0, 0);
        libc::send(chan, b"R".as_ptr().cast(), 1, libc::MSG_NOSIGNAL);
        let mut request = [0u8; 1];
        loop {
            let n = libc::recv(chan, request.as_mut_ptr().cast(), 1, 0);
            if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            if n <= 0 {
                libc::_exit(0);
            }
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            if fd < 0 {
                send_errno(chan);
                continue;
            }
            send_fd(chan, fd);
            libc::close(fd);
        }
    }
}

/// `E` and errno, little-endian.
unsafe fn send_errno(chan: RawFd) {
    // SAFETY: errno is thread-local; the buffer is on the stack.
    unsafe {
        let e = (*libc::__errno_location()).to_le_bytes();
        let msg = [b'E', e[0], e[1], e[2], e[3]];
        libc::send(chan, msg.as_ptr().cast(), msg.len(), libc::MSG_NOSIGNAL);
    }
}

/// `S` with `fd` attached.
unsafe fn send_fd(chan: RawFd, fd: RawFd) {
    const SPACE: usize = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    // u64 words keep the control buffer aligned for cmsghdr.
    let mut control = [0u64; SPACE.div_ceil(8)];
    let mut body = *b"S";
    let mut iov = libc::iovec {
        iov_base: body.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // SAFETY: stack buffers that outlive the call; the macros stay within msg_controllen.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = SPACE as _;
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<RawFd>(), fd);
        libc::sendmsg(chan, &msg, libc::MSG_NOSIGNAL);
    }
}
