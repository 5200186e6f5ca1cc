//! What the sandbox's init reports on the launch socket (errors, warnings, the workload's end, and
//! the descriptors it hands over: the egress listener, the pty, the seccomp listener, the watches).

use std::os::fd::{AsFd as _, AsRawFd, OwnedFd};

use super::closer::{DetachedCloser, Sequence};
use super::launch::{LaunchError, Outcome};

/// What the sandbox reported on the launch socket.
#[derive(Default)]
pub(crate) struct Report {
    error: Option<String>,
    stopped: Option<String>,
    outcome: Option<Outcome>,
    pub(super) listener: Option<std::net::TcpListener>,
    /// The keeper's inotify instance, held so that its teardown happens off the exit path, and
    /// the closer that will hold its last reference (started while the sandbox runs).
    watches: Option<OwnedFd>,
    /// The sandbox's mount namespace, when the session does not wait for its unmounting
    /// ([`Report::hold_mounts`]): the closer holds it too, so init's exit leaves it mounted.
    mounts: Option<OwnedFd>,
    /// The overlay lease and init's pidfd, when the mounts hold persistent overlays: the closer
    /// lets the lease go only after init's end and the mounts' unmount.
    lease: Option<(OwnedFd, OwnedFd)>,
    closer: Option<DetachedCloser>,
    /// The master of the sandbox's pty, for the relay.
    pub(super) tty: Option<OwnedFd>,
    /// The listener of the workload's seccomp filter (refused namespace calls).
    pub(super) seccomp: Option<OwnedFd>,
    /// Where the keeper's index goes (the state root), when it runs.
    pub(super) index: Option<std::path::PathBuf>,
    index_failed: bool,
    /// The receive buffer, allocated once (it is large enough for the keeper's index).
    buf: Vec<u8>,
}

/// A message from the sandbox's init, for the host's terminal: it can name paths the workload
/// chose, so control characters are escaped.
fn from_sandbox(bytes: &[u8]) -> String {
    airlock_config::printable(&String::from_utf8_lossy(bytes))
}

/// The largest message on the launch socket (the keeper's index is the big one).
const MESSAGE_CAP: usize = super::keeper::INDEX_MESSAGE_CAP + 4096;

impl Report {
    /// A report whose keeper index goes to `index` (the state root's), when the keeper runs.
    pub(crate) fn new(index: Option<&std::path::Path>) -> Report {
        Report {
            index: index.map(Into::into),
            ..Report::default()
        }
    }

    /// Holds `mounts` (the sandbox's mount namespace) for a detached closer, which lets the tree
    /// go once this process has exited ([`crate::session::let_go_at_exit`]): init's exit then
    /// skips unmounting it (~0.4 ms here, which the supervisor waited for). With `lease` (the
    /// overlay lease and init's pidfd: the tree holds persistent overlays), the closer waits for
    /// init's end, unmounts the tree and only then lets the lease go, so the session's end does
    /// not wait for the overlays' unmount (which syncs their upper file system).
    pub(crate) fn hold_mounts(&mut self, mounts: OwnedFd, lease: Option<(OwnedFd, OwnedFd)>) {
        self.mounts = Some(mounts);
        self.lease = lease;
    }

    /// Reads one message; false once the socket has nothing more to give.
    pub(crate) fn read(&mut self, sock: &OwnedFd) -> bool {
        let mut buf = std::mem::take(&mut self.buf);
        buf.resize(MESSAGE_CAP, 0);
        let more = self.read_into(sock, &mut buf);
        self.buf = buf;
        more
    }

    fn read_into(&mut self, sock: &OwnedFd, buf: &mut [u8]) -> bool {
        use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
        let mut cmsg = nix::cmsg_space!([std::os::fd::RawFd; 1]);
        let mut iov = [std::io::IoSliceMut::new(buf)];
        let (n, passed) = match recvmsg::<()>(
            sock.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(msg) if msg.bytes == 0 => return false,
            Ok(msg) => {
                let mut passed = None;
                if let Ok(cmsgs) = msg.cmsgs() {
                    for c in cmsgs {
                        if let ControlMessageOwned::ScmRights(fds) = c {
                            passed = fds.first().copied();
                        }
                    }
                }
                (msg.bytes, passed)
            }
            Err(_) => return false,
        };
        let code = |b: &[u8]| {
            b.get(..4)
                .and_then(|b| b.try_into().ok())
                .map(i32::from_le_bytes)
        };
        match buf[0] {
            b'E' if self.error.is_none() => self.error = Some(from_sandbox(&buf[1..n])),
            b'N' => {
                // SAFETY: as for 'L' below: SCM_RIGHTS just installed it, we own it.
                self.watches = passed
                    .map(|fd| unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) });
                // While the workload starts, not on the way out (without one, `outcome` makes it).
                if self.watches.is_some() {
                    self.closer = self.start_closer();
                }
            }
            b'T' => {
                // SAFETY: as for 'L' below.
                self.tty =
                    passed.map(|fd| unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
            }
            b'U' => {
                // SAFETY: as for 'L' below.
                self.seccomp =
                    passed.map(|fd| unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
            }
            b'F' => self.stopped = Some(from_sandbox(&buf[1..n])),
            b'W' => eprintln!("airlock: warning: {}", from_sandbox(&buf[1..n])),
            b'H' => self.write_index(&buf[1..n]),
            b'X' => self.outcome = code(&buf[1..n]).map(Outcome::Exited),
            b'S' => self.outcome = code(&buf[1..n]).map(Outcome::Signaled),
            b'L' => {
                // SAFETY: SCM_RIGHTS just installed this descriptor in our table; we own it now.
                self.listener = passed.map(|fd| unsafe {
                    <std::net::TcpListener as std::os::fd::FromRawFd>::from_raw_fd(fd)
                });
            }
            _ => {}
        }
        true
    }

    fn write_index(&mut self, body: &[u8]) {
        let Some(path) = &self.index else {
            return;
        };
        if let Err(e) = crate::hide::write_index(path, body)
            && !std::mem::replace(&mut self.index_failed, true)
        {
            eprintln!(
                "airlock: warning: cannot record the hidden files in {}: {e}; the next launch \
                 finds them again by walking the project",
                path.display()
            );
        }
    }

    /// Whether the workload's end (`X`, `S`) has arrived.
    pub(crate) fn has_outcome(&self) -> bool {
        self.outcome.is_some()
    }

    /// The first `E` message's text (a setup that failed), taken.
    pub(crate) fn take_error(&mut self) -> Option<String> {
        self.error.take()
    }

    /// The `F` message's text (the keeper stopped the sandbox), taken.
    pub(crate) fn take_stopped(&mut self) -> Option<String> {
        self.stopped.take()
    }

    /// A closer for what this report holds, if anything; None when it cannot start (each copy
    /// here is then closed as before: init's exit unmounts the tree).
    fn start_closer(&self) -> Option<DetachedCloser> {
        // Beside the watches: the lease (let go last), or the mounts (let go at the closer's exit).
        let (beside, sequence) = match (&self.lease, &self.mounts) {
            (Some((lease, init)), Some(mounts)) => (
                Some(lease),
                Some(Sequence {
                    after: init.as_fd(),
                    first: mounts.as_fd(),
                }),
            ),
            _ => (self.mounts.as_ref(), None),
        };
        let fds: Vec<_> = [self.watches.as_ref(), beside]
            .into_iter()
            .flatten()
            .map(|fd| fd.as_fd())
            .collect();
        if fds.is_empty() && sequence.is_none() {
            return None;
        }
        DetachedCloser::start(&fds, sequence).ok()
    }

    pub(super) fn outcome(mut self) -> Result<Outcome, LaunchError> {
        // Closing the watches here would wait out an RCU grace period (~15 ms) on the way out, and
        // the mounts would be unmounted while the session's end waits.
        let closer = self.closer.take().or_else(|| self.start_closer());
        drop((self.watches.take(), self.mounts.take(), self.lease.take()));
        if let Some(closer) = closer {
            crate::session::let_go_at_exit(closer);
        }
        if let Some(stopped) = self.stopped {
            return Err(LaunchError::Stopped(stopped));
        }
        match (self.error, self.outcome) {
            (Some(error), _) => Err(LaunchError::Setup(error)),
            (None, Some(outcome)) => Ok(outcome),
            (None, None) => Err(LaunchError::Lost),
        }
    }
}
