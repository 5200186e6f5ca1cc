//! The container outlives a killed airlock unless someone stops it: the engine's `run` is only a
//! client (conmon keeps the container), so SIGKILL of airlock, or of airlock and the client,
//! leaves the workload running. A forked watchdog holds the read end of a pipe whose write end
//! only airlock holds; when the pipe closes without airlock's "done" byte (airlock died), it
//! runs `<engine> kill <name>`. Native's sandbox dies with airlock by PR_SET_PDEATHSIG instead.

use std::io::Read as _;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};

/// airlock's end of the watchdog's pipe; [`Watchdog::done`] tells it the session ended.
pub(super) struct Watchdog {
    pipe: Option<OwnedFd>,
    pid: nix::unistd::Pid,
}

impl Watchdog {
    /// Forks the watchdog for the container `kill` (an engine command) stops. Must be called
    /// while this process is single-threaded (the child runs Rust code, then execs).
    pub(super) fn start(mut kill: Command) -> Result<Watchdog, String> {
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| format!("cannot make the container's watchdog pipe: {e}"))?;
        kill.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: the caller guarantees a single-threaded process.
        match unsafe { nix::unistd::fork() }
            .map_err(|e| format!("cannot fork the container's watchdog: {e}"))?
        {
            nix::unistd::ForkResult::Child => {
                drop(write);
                watch(read, kill);
            }
            nix::unistd::ForkResult::Parent { child } => {
                drop(read);
                Ok(Watchdog {
                    pipe: Some(write),
                    pid: child,
                })
            }
        }
    }

    /// The session ended as it should: the watchdog exits without stopping anything.
    pub(super) fn done(mut self) {
        if let Some(pipe) = self.pipe.take() {
            let _ = nix::unistd::write(&pipe, b"d");
        }
        let _ = nix::sys::wait::waitpid(self.pid, None);
    }
}

/// In the child: no signal from a terminal or a process group ends it, it keeps no descriptor
/// but the pipe (and /dev/null as 0-2), and it waits; EOF without the byte means airlock died.
fn watch(read: OwnedFd, mut kill: Command) -> ! {
    // SAFETY: plain system calls in the single-threaded child.
    unsafe {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
            libc::signal(sig, libc::SIG_IGN);
        }
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
        }
        // The pipe at 3, everything above closed (airlock's sockets and files stay airlock's).
        let fd = 3;
        if read.as_raw_fd() != fd {
            libc::dup2(read.as_raw_fd(), fd);
        }
        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        libc::syscall(libc::SYS_close_range, fd + 1, libc::c_uint::MAX, 0);
        let mut pipe = std::fs::File::from_raw_fd(fd);
        let mut byte = [0u8; 1];
        let said_done = matches!(pipe.read(&mut byte), Ok(1));
        if !said_done {
            let _ = kill.exec();
        }
        libc::_exit(0)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // Without `done` (an error path or a panic): the pipe closes and the watchdog stops the
        // container, failing closed.
        drop(self.pipe.take());
    }
}
