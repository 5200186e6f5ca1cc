//! The detached closer: a process that holds the last reference to a few of a launch's
//! descriptors and closes them after this process has exited, so its exit does not wait for
//! those closes.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use super::sys::close_all_but;

/// A process that will hold the last reference to a few descriptors and close them, so this
/// process does not wait for those closes: an inotify instance, whose last close waits out an RCU
/// grace period, and a sandbox's mount namespace, whose last close unmounts its tree.
///
/// The process shares this one's memory (`CLONE_VM`, like a thread, but with its own copy of the
/// descriptor table) and only makes raw system calls on its own stack, so it costs no copy of the
/// address space and no exec. Two pipes order the hand-over: the child closes every descriptor
/// it copied except `fds` and then says so (`done`), so once [`DetachedCloser::start`] returns it
/// holds no lock, socket or pipe of this process; it exits once this process has closed its own
/// copies and then dropped the `DetachedCloser` (or exited: the kernel closes the pipe then), so
/// its exit is the last close. Sharing the memory, a closer still there when this process exits
/// also takes the address space's teardown off this process's exit
/// ([`crate::session::let_go_at_exit`]). Nobody reaps it; it is a zombie until this process
/// exits, and then its new parent reaps it.
///
/// Started early (while the sandbox runs), it takes the clone off the way out.
pub struct DetachedCloser {
    /// Only held: its close lets the closer go.
    _dropped: OwnedFd,
}

/// An order for a closer's end, for a sandbox with persistent overlays: once let go, the closer
/// waits for `after` (a pidfd: the sandbox's init) to report its process's end, then closes
/// `first` (the sandbox's mount namespace: that close unmounts the overlays), and only then exits,
/// closing the rest (the overlay lease, which is free once the overlays are unmounted).
pub struct Sequence<'a> {
    pub after: BorrowedFd<'a>,
    pub first: BorrowedFd<'a>,
}

impl DetachedCloser {
    /// The most descriptors one closer holds besides a [`Sequence`]'s.
    pub const MAX_FDS: usize = 2;

    /// Starts the closer with its own copies of `fds` (at most [`DetachedCloser::MAX_FDS`]) and
    /// of `sequence`'s, which orders its end.
    pub fn start(
        fds: &[BorrowedFd<'_>],
        sequence: Option<Sequence<'_>>,
    ) -> io::Result<DetachedCloser> {
        const STACK: usize = 16 * 1024;
        #[repr(C)]
        struct Closer {
            /// `fds`, the sequence's, `dropped` and `done` (`dropped` also fills the slots left
            /// free: a duplicate is fine).
            keep: [RawFd; DetachedCloser::MAX_FDS + 4],
            dropped: RawFd,
            done: RawFd,
            /// The sequence's descriptors, or -1.
            after: RawFd,
            first: RawFd,
        }
        extern "C" fn closer(arg: *mut libc::c_void) -> libc::c_int {
            // SAFETY: `arg` points at a leaked `Closer` that is never freed or written again.
            let c = unsafe { &*(arg as *const Closer) };
            // SAFETY: close_range, close, read and ppoll only touch this process's own copy of
            // the table and its own stack; with valid ranges and descriptors none of them fails
            // (ppoll on a pidfd with no timeout returns once the process has ended; nothing
            // signals this process), so errno (shared with the parent thread) is untouched. read
            // returns 0 once the parent has closed the write end.
            unsafe {
                close_all_but(c.keep);
                libc::syscall(libc::SYS_close, c.done);
                let mut byte = 0u8;
                libc::syscall(
                    libc::SYS_read,
                    c.dropped,
                    &mut byte as *mut u8 as *mut libc::c_void,
                    1usize,
                );
                if c.after >= 0 {
                    let mut poll = libc::pollfd {
                        fd: c.after,
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    libc::syscall(
                        libc::SYS_ppoll,
                        &mut poll as *mut libc::pollfd,
                        1usize,
                        std::ptr::null::<libc::timespec>(),
                        std::ptr::null::<libc::sigset_t>(),
                        0usize,
                    );
                }
                if c.first >= 0 {
                    // Its last close: the kernel's cleanup runs before this call returns.
                    libc::syscall(libc::SYS_close, c.first);
                }
            }
            0
        }
        if fds.len() > DetachedCloser::MAX_FDS {
            return Err(io::Error::other(format!(
                "a detached closer holds at most {} descriptors, not {}",
                DetachedCloser::MAX_FDS,
                fds.len()
            )));
        }
        let (dropped_read, dropped_write) = pipe()?;
        let (done_read, done_write) = pipe()?;
        let mut keep = [dropped_read.as_raw_fd(); DetachedCloser::MAX_FDS + 4];
        keep[0] = done_write.as_raw_fd();
        let (after, first) = sequence
            .as_ref()
            .map_or((-1, -1), |s| (s.after.as_raw_fd(), s.first.as_raw_fd()));
        if after >= 0 {
            keep[2] = after;
            keep[3] = first;
        }
        for (slot, fd) in keep[4..].iter_mut().zip(fds) {
            *slot = fd.as_raw_fd();
        }
        let arg: &'static Closer = Box::leak(Box::new(Closer {
            keep,
            dropped: dropped_read.as_raw_fd(),
            done: done_write.as_raw_fd(),
            after,
            first,
        }));
        // The stack must outlive the child, which may outlive this call (and this process).
        let stack: &'static mut [u8] = Box::leak(vec![0u8; STACK].into_boxed_slice());
        let top = (stack.as_mut_ptr() as usize + STACK) & !15;
        // SAFETY: `closer` only makes raw system calls on the fresh stack above and reads the leaked
        // `Closer`, neither ever freed; CLONE_VM without CLONE_FILES gives it a copy of the descriptor
        // table; exit signal 0.
        let pid = unsafe {
            libc::clone(
                closer,
                top as *mut libc::c_void,
                libc::CLONE_VM,
                arg as *const Closer as *mut libc::c_void,
            )
        };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        drop(dropped_read);
        drop(done_write);
        // The new process is queued on whichever CPU looked idlest at the clone, often the
        // sandbox's, behind its workload: this process then waited ~1.3 ms for it (measured), the
        // other CPU idle. On this CPU it runs as soon as this process waits; afterwards it gets
        // this process's CPUs back.
        let ours = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).ok();
        let pinned = this_cpu()
            .and_then(|here| {
                nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(pid), &here).ok()
            })
            .is_some();
        let mut byte = [0u8; 1];
        loop {
            // SAFETY: reading one byte into a local buffer from a pipe this function owns.
            let n = unsafe { libc::read(done_read.as_raw_fd(), byte.as_mut_ptr().cast(), 1) };
            if n >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                break;
            }
        }
        if let (true, Some(ours)) = (pinned, ours) {
            let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(pid), &ours);
        }
        Ok(DetachedCloser {
            _dropped: dropped_write,
        })
    }
}

/// The CPU this thread runs on, as a set of one.
fn this_cpu() -> Option<nix::sched::CpuSet> {
    // SAFETY: sched_getcpu has no preconditions.
    let cpu = usize::try_from(unsafe { libc::sched_getcpu() }).ok()?;
    let mut one = nix::sched::CpuSet::new();
    one.set(cpu).ok()?;
    Some(one)
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the local array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 just returned these descriptors; nobody else owns them.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::os::fd::AsFd as _;

    fn flock(file: &File) -> bool {
        // SAFETY: flock on a descriptor this test owns.
        unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
    }

    #[test]
    fn the_detached_closer_holds_nothing_else_once_it_returns() {
        // In a forked child: other test threads spawn processes too, and each such fork holds a
        // copy of the lock's descriptor for a moment; the child has no other threads. (glibc's
        // fork leaves malloc usable in the child.)
        // SAFETY: the child only runs the checks below and exits.
        match unsafe { libc::fork() } {
            0 => {
                let ok = std::panic::catch_unwind(closer_rounds).is_ok();
                // SAFETY: ends the forked child without running the parent's exit handlers.
                unsafe { libc::_exit(if ok { 0 } else { 1 }) }
            }
            pid if pid > 0 => {
                let mut status = 0;
                // SAFETY: waits for the child forked above.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                assert!(
                    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
                    "the closer still held this process's lock (status {status})"
                );
            }
            _ => panic!("fork: {}", io::Error::last_os_error()),
        }
    }

    #[test]
    fn a_started_closer_holds_the_last_reference_until_it_is_let_go() {
        // Two descriptors (the watches and the mounts of a launch), and this process's CPU set
        // unchanged by the closer's pinning.
        let ours = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).expect("cpus");
        let ((read_a, write_a), (read_b, write_b)) = (pipe().expect("pipe"), pipe().expect("pipe"));
        let closer =
            DetachedCloser::start(&[write_a.as_fd(), write_b.as_fd()], None).expect("closer");
        drop((write_a, write_b));
        let mut polls = [&read_a, &read_b].map(|read| libc::pollfd {
            fd: read.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        // SAFETY: two valid pollfds.
        let ready = unsafe { libc::poll(polls.as_mut_ptr(), 2, 100) };
        assert_eq!(ready, 0, "a write end closed before the closer was let go");
        assert_eq!(
            nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).expect("cpus"),
            ours
        );
        drop(closer);
        for poll in &mut polls {
            // SAFETY: one valid pollfd.
            let ready = unsafe { libc::poll(poll, 1, 5000) };
            assert_eq!(ready, 1, "the closer never closed a write end");
            assert!(poll.revents & libc::POLLHUP != 0);
        }
    }

    #[test]
    fn a_sequenced_closer_waits_for_the_process_then_closes_first_then_the_rest() {
        // The launch's case: init (here `sleep`), the mount namespace (here a pipe's write end)
        // and the overlay lease (here a lock), which must stay held until `first` is closed.
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        // SAFETY: pidfd_open on a child this test owns and has not reaped.
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, child.id(), 0u32) };
        assert!(pidfd >= 0, "pidfd_open: {}", io::Error::last_os_error());
        // SAFETY: the kernel just returned this descriptor; nobody else owns it.
        let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
        let (first_read, first_write) = pipe().expect("pipe");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("lock");
        let lease = File::create(&path).expect("lock file");
        assert!(flock(&lease));
        let sequence = Sequence {
            after: pidfd.as_fd(),
            first: first_write.as_fd(),
        };
        let closer = DetachedCloser::start(&[lease.as_fd()], Some(sequence)).expect("closer");
        drop((first_write, lease, pidfd));
        drop(closer);
        let hung_up = || {
            let mut poll = libc::pollfd {
                fd: first_read.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd, no wait.
            unsafe { libc::poll(&mut poll, 1, 0) == 1 && poll.revents & libc::POLLHUP != 0 }
        };
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(!hung_up(), "`first` was closed while the process still ran");
        assert!(
            !flock(&File::open(&path).expect("reopen")),
            "the lease was let go while the process still ran"
        );
        child.kill().expect("kill");
        child.wait().expect("reap");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            if flock(&File::open(&path).expect("reopen")) {
                assert!(hung_up(), "the lease was let go before `first` was closed");
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the closer never let go of the lease"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    #[test]
    fn a_closer_takes_at_most_its_share_of_descriptors() {
        let null = File::open("/dev/null").expect("null");
        let fds = [null.as_fd(); DetachedCloser::MAX_FDS + 1];
        let e = DetachedCloser::start(&fds, None).err().expect("refused");
        assert!(
            e.to_string().contains("at most 2 descriptors, not 3"),
            "{e}"
        );
    }

    fn closer_rounds() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("lock");
        for _ in 0..200 {
            let held = File::create(&path).expect("lock file");
            assert!(flock(&held));
            let given = OwnedFd::from(File::open("/dev/null").expect("null"));
            let closer = DetachedCloser::start(&[given.as_fd()], None).expect("closer");
            drop(given);
            drop(closer);
            drop(held);
            // The lock is released only when every copy of its descriptor is closed.
            let again = File::open(&path).expect("reopen");
            assert!(flock(&again), "the closer still held this process's lock");
        }
    }
}
