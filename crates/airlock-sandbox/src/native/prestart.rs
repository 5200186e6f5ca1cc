//! A native sandbox's init cloned while airlock plans its sandbox.
//!
//! Making the namespaces is the largest single step of a launch here (~1.5 ms, most of it the
//! network namespace), and the kernel does it inside the `clone` call of whoever clones. So as
//! soon as the network mode is known, airlock forks a starter, which clones init with
//! `CLONE_PARENT` (init is airlock's child, as a plain clone's is), hands airlock init's pidfd and
//! exits; the namespaces are made on the other CPU while airlock plans. Init waits in its new
//! namespaces, holding nothing of the host and able to do nothing but read its launch socket; the
//! launch then writes its id maps and sends it `G` with the plan, as a memfd (`stage::encode`, the
//! bwrap stage's format), and it goes on as a freshly cloned init does.
//!
//! A launch that does not happen (a bad config, another backend) drops the [`Prestart`], which
//! kills init and waits for it. A spec whose namespaces or ids differ from the ones init was
//! cloned with is never handed to it, and a starter that could not clone is not an error here:
//! in both cases the launch clones a fresh init (and reports what fails, if it does).

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use nix::sys::signal::{SigSet, SigmaskHow, sigprocmask};

use super::child;
use super::creds::DroppedGroups;
use super::init::Init;
use super::launch::{self, LaunchError};
use super::sys::{self, Cloned};
use crate::spec::SandboxSpec;
use airlock_config::NetworkMode;

/// An init being cloned, or waiting for its plan (see the module).
pub struct Prestart {
    /// The starter's pid and airlock's end of init's launch socket, until a launch takes them.
    pending: Option<(libc::pid_t, OwnedFd)>,
    namespaces: libc::c_int,
    ids: (u32, u32),
}

impl Prestart {
    /// Forks the starter that clones an init into the namespaces of a sandbox on `network`, for
    /// this user. Returns at once.
    ///
    /// Must be called while the process is single-threaded.
    pub fn begin(network: NetworkMode) -> Result<Prestart, LaunchError> {
        let (sock, child_end) = launch::launch_socket()?;
        let namespaces = launch::namespaces_for(network);
        let ids = (
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
        );
        // Init starts with the signals a supervisor passes on blocked, as a launch's init does
        // (its signalfd takes them); this process gets its own mask back at once.
        let mut previous = SigSet::empty();
        sigprocmask(
            SigmaskHow::SIG_BLOCK,
            Some(&launch::supervised_signals()),
            Some(&mut previous),
        )
        .map_err(|e| LaunchError::Start(e.into()))?;
        // SAFETY: the caller is single-threaded; the starter only clones, reports and exits.
        let starter = unsafe { libc::fork() };
        if starter == 0 {
            // SAFETY: the starter's copy of airlock's end; init must not hold it.
            unsafe { libc::close(sock.as_raw_fd()) };
            start(namespaces, child_end)
        }
        let forked = std::io::Error::last_os_error();
        let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&previous), None);
        if starter < 0 {
            return Err(LaunchError::Start(forked));
        }
        Ok(Prestart {
            pending: Some((starter, sock)),
            namespaces,
            ids,
        })
    }

    /// Init and its launch socket, its id maps written and `G` sent with the plan, if `spec` is
    /// what init was cloned for and the starter cloned it; else `None`, and init is gone.
    pub(super) fn take_for(
        mut self,
        spec: &SandboxSpec,
        plan: &[u8],
    ) -> Result<Option<(Init, OwnedFd)>, LaunchError> {
        let Some((mut init, sock)) = self.started() else {
            return Ok(None);
        };
        if launch::namespaces(spec) != self.namespaces || (spec.uid, spec.gid) != self.ids {
            init.kill();
            return Ok(None);
        }
        let sent = launch::write_id_maps(init.pid, spec.uid, spec.gid)
            .and_then(|()| send_plan(&sock, plan));
        if let Err(e) = sent {
            init.kill();
            return Err(e);
        }
        Ok(Some((init, sock)))
    }

    /// Init as the starter reported it: the starter is waited for first (it reports before it
    /// exits), so a starter that died without a word leaves no read waiting on init's end.
    fn started(&mut self) -> Option<(Init, OwnedFd)> {
        let (starter, sock) = self.pending.take()?;
        let mut status = 0;
        // SAFETY: waits for the starter forked above, this process's child.
        while unsafe { libc::waitpid(starter, &mut status, 0) } < 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
        {}
        let (pid, pidfd) = receive_started(sock.as_raw_fd())?;
        let init = Init {
            pid,
            pidfd,
            bwrap: None,
            waited: false,
        };
        Some((init, sock))
    }
}

impl Drop for Prestart {
    fn drop(&mut self) {
        if let Some((mut init, _)) = self.started() {
            init.kill();
        }
    }
}

/// The starter: clone init as airlock's child into `namespaces`, report its pid and pidfd (`P`)
/// on `sock` and exit; or report why not (`E`).
fn start(namespaces: libc::c_int, sock: OwnedFd) -> ! {
    let fd = sock.as_raw_fd();
    // Dropped for good: the starter only clones and exits.
    if let Err(e) = DroppedGroups::for_clone() {
        child::die(fd, &e.to_string());
    }
    // SAFETY: the starter is single-threaded (a fork of a single-threaded process).
    match unsafe { sys::clone_process(namespaces | libc::CLONE_PARENT) } {
        Ok(Cloned::Child) => init_main(sock),
        Ok(Cloned::Parent { pid, pidfd }) => {
            report_started(fd, pid, &pidfd);
            // SAFETY: _exit skips destructors, as every early exit after a fork does.
            unsafe { libc::_exit(0) }
        }
        Err(e) => child::die(fd, &format!("cannot start the sandbox: {e}")),
    }
}

/// `P`, init's pid, and its pidfd.
fn report_started(sock: RawFd, pid: libc::pid_t, pidfd: &OwnedFd) {
    let mut head = vec![b'P'];
    head.extend_from_slice(&pid.to_le_bytes());
    let _ = sys::send_with_fd(sock, &head, pidfd.as_raw_fd());
}

/// The starter's `P` report, already queued: init's pid and pidfd; `None` for anything else.
fn receive_started(sock: RawFd) -> Option<(libc::pid_t, OwnedFd)> {
    let mut buf = [0u8; 64];
    let (n, pidfd) =
        sys::recv_with_fd(sock, &mut buf, nix::sys::socket::MsgFlags::MSG_DONTWAIT).ok()?;
    match buf.get(..n)? {
        [b'P', a, b, c, d] => Some((libc::pid_t::from_le_bytes([*a, *b, *c, *d]), pidfd?)),
        _ => None,
    }
}

/// `G`, with the plan in a memfd.
fn send_plan(sock: &OwnedFd, plan: &[u8]) -> Result<(), LaunchError> {
    let memfd = crate::backend::bwrap::spawn::memfd("airlock-plan", plan)?;
    sys::send_with_fd(sock.as_raw_fd(), &[child::GO], memfd.as_raw_fd()).map_err(LaunchError::Start)
}

/// A prestarted init's entry point: cloned before its sandbox was planned, it waits for `G` with its plan (a memfd: the tty, the descriptor limit, the spec, as the bwrap
/// stage gets it), then goes on as [`child::main`] does.
pub(super) fn init_main(sock: OwnedFd) -> ! {
    let fd = sock.as_raw_fd();
    child::detach(fd);
    let Some(plan_fd) = wait_for_plan(fd) else {
        // SAFETY: as in die(): the supervisor is gone or gave this init up.
        unsafe { libc::_exit(child::SETUP_FAILED) }
    };
    let (_, plan) = super::stage::read_plan(plan_fd, fd);
    child::build_and_init(&plan, fd)
}

/// `G` and the plan's descriptor from the supervisor; `None` for anything else (its end).
fn wait_for_plan(sock: RawFd) -> Option<OwnedFd> {
    let mut byte = [0u8; 1];
    let (n, plan) = sys::recv_with_fd(sock, &mut byte, nix::sys::socket::MsgFlags::empty()).ok()?;
    plan.filter(|_| n == 1 && byte[0] == child::GO)
}
