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
//! Order, failing closed: the exec wrapper waits for the supervisor's go on the go socket
//! ([`GO_PATH`](super::exec::GO_PATH), `go.rs`) before it runs the command, and [`start`] returns only
//! after the helper's first pass; a helper that cannot start fails the launch (the container is
//! killed, no go said), and one that cannot keep a rule later kills the container. It reports
//! on a socket pair as native's init does, and native's [`Report`] reads it: `R` ready, `E`
//! could not start, `F` stopped the sandbox, `W` a warning, `H` the index of hidden files.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};

use crate::hide::HideSpec;
use crate::native::keeper::Keeper;
use crate::native::report::Report;
use crate::native::{send, sys};

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
            // Native's report reader: `E` and `F` kept, `W` printed, `H` written to the index.
            let mut report = Report::new(Some(&hide.index));
            // The first word is `R` (ready), `E` (why not), or nothing (the helper died).
            let said = wait_readable(&ours) && report.read(&ours);
            if let Some(error) = report.take_error() {
                let _ = nix::sys::wait::waitpid(child, None);
                return Err(error);
            }
            if !said {
                let _ = nix::sys::wait::waitpid(child, None);
                return Err("the keeper ended before it hid the project's files".into());
            }
            let sock = std::sync::Arc::new(ours);
            let (tx, stopped) = mpsc::channel();
            let reader = sock.clone();
            std::thread::Builder::new()
                .name("keeper".into())
                .spawn(move || {
                    while wait_readable(&reader) && report.read(&reader) {}
                    let _ = tx.send(report.take_stopped());
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

/// Blocks until `sock` has a message, or its peer is gone (then a read says so).
fn wait_readable(sock: &OwnedFd) -> bool {
    loop {
        let mut fds = [PollFd::new(sock.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => return true,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return false,
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
    let container = match sys::pidfd_open(pid) {
        Ok(fd) => fd,
        Err(e) => return fail(format!("cannot watch the container's process {pid}: {e}")),
    };
    // The host's procfs: the container's has no `self` for a process outside its pid namespace.
    let proc = match std::fs::File::open("/proc") {
        Ok(f) => f,
        Err(e) => return fail(format!("cannot open /proc: {e}")),
    };
    // SAFETY: this child is single-threaded and uses no other descriptor; stderr stays.
    unsafe { sys::close_all_but([sock.as_raw_fd(), container.as_raw_fd(), proc.as_raw_fd(), 2]) };
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
    send(sock.as_raw_fd(), b'R', b"");
    keeper.report(sock.as_raw_fd());
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
            keeper.report(sock.as_raw_fd());
        }
    }
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
