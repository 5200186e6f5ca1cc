//! The sandbox's init as the supervisor holds it: signalled, waited for, and after a native
//! sandbox's end waited for late (its namespaces' teardown overlaps the end of the session).

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use super::sys;

/// The sandbox's init as the supervisor holds it: its pid on the host and a pidfd (signals, the
/// end), and for the bwrap backend the bwrap process, reaped after it.
pub(crate) struct Init {
    pub pid: libc::pid_t,
    pub pidfd: OwnedFd,
    pub bwrap: Option<std::process::Child>,
    /// Waited for already.
    pub waited: bool,
}

impl Init {
    /// Kills the sandbox and waits for it (a launch that cannot go on).
    pub(crate) fn kill(&mut self) {
        let _ = sys::pidfd_send_signal(self.pidfd.as_fd(), libc::SIGKILL);
        self.wait();
    }

    /// Waits for init (a child of this process in native) and then for bwrap; once.
    pub(crate) fn wait(&mut self) {
        if std::mem::replace(&mut self.waited, true) {
            return;
        }
        wait_pidfd(&self.pidfd);
        if let Some(bwrap) = self.bwrap.as_mut() {
            let _ = bwrap.wait();
        }
    }

    /// Whether init is PID 1 of the sandbox (native's clone; under bwrap, bwrap's own init is):
    /// its end report then comes once every other process of the sandbox is gone
    /// (`child.rs::end`), so the sandbox has ended when it arrives.
    pub(super) fn reports_the_end(&self) -> bool {
        self.bwrap.is_none()
    }
}

fn wait_pidfd(pidfd: &OwnedFd) {
    // SAFETY: siginfo is plain data; waitid with P_PIDFD reaps exactly this child.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    loop {
        let ret = unsafe {
            libc::waitid(
                libc::P_PIDFD,
                pidfd.as_raw_fd() as libc::id_t,
                &mut info,
                libc::WEXITED,
            )
        };
        if ret == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
    }
}
