//! The hide keeper for a container on this machine: native's keeper ([`Keeper`]), run by a
//! forked helper of the supervisor inside the container's mount namespace.
//!
//! An engine fixes its mounts when the container starts, and the kernel drops a mask (or the
//! sanitised `.git/config` bound over the project's) when the host replaces the file under it
//! by a rename. So, as native's init does, the helper keeps the rules for the whole session: it
//! joins the container's user namespace (rootless podman) and mount namespace, where it holds
//! every capability the workload dropped, hides what the rules name, then watches the project.
//! It lives in the host's pid namespace, so nothing in the container can see, signal or trace it.
//!
//! Order, failing closed: the exec wrapper waits for the supervisor's go
//! ([`GO_PATH`](super::exec::GO_PATH)) before it runs the command, and [`start`] returns only
//! after the helper's first pass; a helper that cannot start fails the launch (the container is
//! killed, no go said), and one that cannot keep a rule later kills the container. It reports on a socket pair, as native's init does: `R` ready, `E` could not
//! start, `F` stopped the sandbox, `W` a warning, `H` the index of hidden files.

use std::io::IoSlice;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::socket::{AddressFamily, MsgFlags, SockFlag, SockType, socketpair};

use crate::hide::HideSpec;
use crate::native::keeper::{INDEX_MESSAGE_CAP, Keeper};
use crate::native::sys;

/// How long the helper may take to end once the container has.
const END_WAIT: Duration = Duration::from_secs(2);

/// A running keeper: its helper, and the thread that reads what it reports.
pub(super) struct Running {
    sock: std::sync::Arc<OwnedFd>,
    pid: nix::unistd::Pid,
    /// Why the keeper stopped the sandbox, if it did (sent once the helper's socket closes).
    stopped: mpsc::Receiver<Option<String>>,
}

/// Starts the keeper of `hide` in the container whose first process is `pid`; returns when every
/// rule is applied, or why it could not be.
///
/// The helper is forked: the caller's other threads, if any, hold no lock it takes (it only
/// makes system calls, allocates, and never prints).
pub(super) fn start(pid: libc::pid_t, hide: &HideSpec) -> Result<Running, String> {
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| format!("cannot make the keeper's socket: {e}"))?;
    let parent = nix::unistd::getpid();
    // SAFETY: the child takes no lock another thread could hold (see the doc comment).
    match unsafe { nix::unistd::fork() }.map_err(|e| format!("cannot fork the keeper: {e}"))? {
        nix::unistd::ForkResult::Child => {
            drop(ours);
            let code = helper(theirs, parent, pid, hide);
            // SAFETY: _exit skips the parent's atexit handlers and buffers, as a forked child must.
            unsafe { libc::_exit(code) }
        }
        nix::unistd::ForkResult::Parent { child } => {
            drop(theirs);
            let mut buf = vec![0u8; INDEX_MESSAGE_CAP + 4096];
            let first = receive(&ours, &mut buf);
            match first {
                Some(b'R') => {}
                Some(b'E') => {
                    let _ = nix::sys::wait::waitpid(child, None);
                    return Err(text(&buf));
                }
                _ => {
                    let _ = nix::sys::wait::waitpid(child, None);
                    return Err("the keeper ended before it hid the project's files".into());
                }
            }
            let sock = std::sync::Arc::new(ours);
            let (tx, stopped) = mpsc::channel();
            let reader = sock.clone();
            let index = hide.index.clone();
            std::thread::Builder::new()
                .name("keeper".into())
                .spawn(move || {
                    let _ = tx.send(read_reports(&reader, &index, &mut buf));
                })
                .map_err(|e| format!("cannot start the keeper's reader: {e}"))?;
            Ok(Running {
                sock,
                pid: child,
                stopped,
            })
        }
    }
}

impl Running {
    /// After the container ended: the helper's last reports, and why it stopped the sandbox,
    /// if it did. A helper that does not end by itself within [`END_WAIT`] is stopped.
    pub(super) fn finish(self) -> Option<String> {
        let stopped = match self.stopped.recv_timeout(END_WAIT) {
            Ok(stopped) => stopped,
            Err(_) => {
                let _ = nix::sys::socket::shutdown(
                    self.sock.as_raw_fd(),
                    nix::sys::socket::Shutdown::Both,
                );
                let _ = nix::sys::signal::kill(self.pid, nix::sys::signal::Signal::SIGKILL);
                self.stopped.recv().ok().flatten()
            }
        };
        let _ = nix::sys::wait::waitpid(self.pid, None);
        stopped
    }
}

/// The reports after `R`, until the helper's socket closes: warnings printed, the index written.
fn read_reports(sock: &OwnedFd, index: &Path, buf: &mut [u8]) -> Option<String> {
    let mut stopped = None;
    let mut index_failed = false;
    while let Some(kind) = receive(sock, buf) {
        match kind {
            b'F' => stopped = Some(text(buf)),
            b'W' => eprintln!("airlock: warning: {}", text(buf)),
            b'H' => {
                let body = &buf[1..message_len(buf)];
                if let Err(e) = crate::hide::write_index(index, body)
                    && !std::mem::replace(&mut index_failed, true)
                {
                    eprintln!(
                        "airlock: warning: cannot record the hidden files in {}: {e}; the next \
                         launch finds them again by walking the project",
                        index.display()
                    );
                }
            }
            _ => {}
        }
    }
    stopped
}

/// One message into `buf` (its length stored after it, see [`message_len`]); its kind, or None
/// once the socket is closed.
fn receive(sock: &OwnedFd, buf: &mut [u8]) -> Option<u8> {
    let cap = buf.len() - std::mem::size_of::<usize>();
    loop {
        match nix::sys::socket::recv(sock.as_raw_fd(), &mut buf[..cap], MsgFlags::empty()) {
            Ok(0) => return None,
            Ok(n) => {
                buf[cap..].copy_from_slice(&n.to_ne_bytes());
                return Some(buf[0]);
            }
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return None,
        }
    }
}

fn message_len(buf: &[u8]) -> usize {
    let cap = buf.len() - std::mem::size_of::<usize>();
    let mut n = [0u8; std::mem::size_of::<usize>()];
    n.copy_from_slice(&buf[cap..]);
    usize::from_ne_bytes(n).min(cap)
}

/// The text of the message in `buf`, for the host's terminal: it can name paths the workload
/// chose, so control characters are escaped.
fn text(buf: &[u8]) -> String {
    airlock_config::printable(&String::from_utf8_lossy(&buf[1..message_len(buf)]))
}

fn send(sock: RawFd, kind: u8, body: &[u8]) -> bool {
    let head = [kind];
    let iov = [IoSlice::new(&head), IoSlice::new(body)];
    nix::sys::socket::sendmsg::<()>(sock, &iov, &[], MsgFlags::empty(), None).is_ok()
}

/// The helper, in the forked child; returns its exit code.
fn helper(sock: OwnedFd, parent: nix::unistd::Pid, pid: libc::pid_t, hide: &HideSpec) -> i32 {
    let fail = |why: String| {
        send(sock.as_raw_fd(), b'E', why.as_bytes());
        1
    };
    // SAFETY: plain system calls in the single-threaded child. The terminal's signals are the
    // supervisor's to pass on; the helper dies with the supervisor.
    unsafe {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
            libc::signal(sig, libc::SIG_IGN);
        }
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        // It holds a copy of the supervisor's memory: nobody may trace it or read its /proc.
        libc::prctl(libc::PR_SET_DUMPABLE, 0);
    }
    if nix::unistd::getppid() != parent {
        return 1;
    }
    // Opened on the host before any namespace is joined: the container's first process (no pid
    // reuse from here on).
    let container = match pidfd_open(pid) {
        Ok(fd) => fd,
        Err(e) => return fail(format!("cannot watch the container's process {pid}: {e}")),
    };
    // The host's procfs: the container's has no `self` for a process outside its pid namespace.
    let proc = match std::fs::File::open("/proc") {
        Ok(f) => f,
        Err(e) => return fail(format!("cannot open /proc: {e}")),
    };
    close_others(&[sock.as_raw_fd(), container.as_raw_fd(), proc.as_raw_fd()]);
    if let Err(e) = super::enter::join(
        pid,
        "mnt",
        nix::sched::CloneFlags::CLONE_NEWNS,
        "use an engine of your own (rootless podman, or run airlock as root), --backend native, \
         or [sandbox] hide_env_files = false and no hide globs in a project that is not a git \
         repository",
    ) {
        return fail(e);
    }
    if exited(&container) {
        return fail("the container ended before its files were hidden".into());
    }
    // Joining the mount namespace moved the working directory to its root: back to the host's
    // procfs, which the keeper then names relatively.
    if let Err(e) = nix::unistd::fchdir(proc.as_raw_fd()) {
        return fail(format!("cannot enter the host's /proc: {e}"));
    }
    // The root we got is the one the container's process has (the engine names the pid once
    // its runtime has built the root; this makes sure, since masks on any other tree would not
    // be seen inside).
    if !same_file(&format!("{pid}/root"), "/") {
        return fail(
            "the container's root is not the one its process has; the launch stops rather than \
             hide files where the container does not look"
                .into(),
        );
    }
    let mut keeper = match Keeper::start_with_proc(hide, Path::new(".")) {
        Ok(k) => k,
        Err(e) => return fail(e.0),
    };
    if !send(sock.as_raw_fd(), b'R', b"") {
        return 1;
    }
    report(&mut keeper, &sock);
    loop {
        let (events, done) = {
            let mut fds = [
                PollFd::new(keeper.fd(), PollFlags::POLLIN),
                PollFd::new(sock.as_fd(), PollFlags::POLLIN),
                PollFd::new(container.as_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(_) => return 1,
            }
            let ready = |f: &PollFd| f.revents().is_some_and(|r| !r.is_empty());
            (ready(&fds[0]), ready(&fds[1]) || ready(&fds[2]))
        };
        // The supervisor is done with us, or the container ended: nothing left to keep.
        if done {
            return 0;
        }
        if events {
            if let Err(e) = keeper.handle() {
                // A file that must be hidden and cannot be: the sandbox stops (fail closed).
                let _ = sys::pidfd_send_signal(container.as_fd(), libc::SIGKILL);
                send(sock.as_raw_fd(), b'F', e.0.as_bytes());
                return 1;
            }
            report(&mut keeper, &sock);
        }
    }
}

fn report(keeper: &mut Keeper, sock: &OwnedFd) {
    if let Some(warning) = keeper.take_warning() {
        send(sock.as_raw_fd(), b'W', warning.as_bytes());
    }
    if let Some(index) = keeper.take_index() {
        send(sock.as_raw_fd(), b'H', &index);
    }
}

fn pidfd_open(pid: libc::pid_t) -> std::io::Result<OwnedFd> {
    // SAFETY: pidfd_open(pid, 0) returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned it; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Whether two paths name one file (device and inode).
fn same_file(a: &str, b: &str) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Whether the process behind `pidfd` has ended (it is readable then).
fn exited(pidfd: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(pidfd.as_fd(), PollFlags::POLLIN)];
    poll(&mut fds, PollTimeout::ZERO).is_ok_and(|n| n > 0)
}

/// Closes every descriptor from 3 up but `keep` (the supervisor's sockets, pipes and files
/// stay the supervisor's: the watchdog's pipe, above all, must close when airlock dies).
fn close_others(keep: &[RawFd]) {
    let mut keep: Vec<RawFd> = keep.iter().copied().filter(|&fd| fd >= 3).collect();
    keep.sort_unstable();
    let mut from: RawFd = 3;
    for fd in keep.into_iter().chain(std::iter::once(RawFd::MAX)) {
        if fd > from {
            // SAFETY: closing descriptors this single-threaded child does not use.
            unsafe {
                libc::syscall(
                    libc::SYS_close_range,
                    from as libc::c_uint,
                    (fd - 1) as libc::c_uint,
                    0,
                )
            };
        }
        from = fd.saturating_add(1);
    }
}
