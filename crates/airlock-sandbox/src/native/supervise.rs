//! Step 6 of a launch, in the supervisor: signals passed on, the terminal relayed, init's reports
//! read, the end awaited.

use std::os::fd::{AsFd, OwnedFd};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

use super::init::Init;
use super::launch::{FORWARDED, Gates, LaunchError, Outcome, TERMINAL};
use super::notify::Listener;
use super::report::Report;
use super::sys;
use super::tty::{RawMode, Relay, TtyPlan};

/// The caller's terminal, when the sandbox got a pty for it.
pub(super) struct Terminal<'a> {
    pub(super) plan: &'a TtyPlan,
    pub(super) raw: Option<&'a RawMode>,
}

/// Step 6: forward signals, relay the terminal, collect the workload's status, wait for init.
pub(super) fn supervise(
    init: &mut Init,
    sock: &OwnedFd,
    gates: &mut dyn Gates,
    mut report: Report,
    terminal: Option<Terminal<'_>>,
) -> Result<Outcome, LaunchError> {
    let mut handled = SigSet::empty();
    for s in FORWARDED {
        handled.add(s);
    }
    if terminal.is_some() {
        for s in TERMINAL {
            handled.add(s);
        }
    }
    let sfd = SignalFd::with_flags(&handled, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
        .map_err(|e| LaunchError::Start(e.into()))?;
    let mut relay: Option<Relay> = None;
    let mut listener: Option<Listener> = None;
    let raw = terminal.as_ref().is_some_and(|t| t.raw.is_some());
    let mut sock_open = true;
    loop {
        let mut fds = vec![
            PollFd::new(init.pidfd.as_fd(), PollFlags::POLLIN),
            PollFd::new(sfd.as_fd(), PollFlags::POLLIN),
        ];
        let sock_at = if sock_open {
            push(&mut fds, sock.as_fd(), PollFlags::POLLIN)
        } else {
            None
        };
        let (master, stdin) = relay.as_ref().map(Relay::interest).unwrap_or_default();
        let master_at = master
            .and_then(|(fd, events)| push(&mut fds, fd, PollFlags::from_bits_truncate(events)));
        let stdin_at = stdin.and_then(|fd| push(&mut fds, fd, PollFlags::POLLIN));
        let listener_at = listener
            .as_ref()
            .and_then(|l| push(&mut fds, l.fd(), PollFlags::POLLIN));
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(LaunchError::Start(e.into())),
        }
        let ready = |i: Option<usize>| {
            i.and_then(|i| fds.get(i))
                .and_then(|f| f.revents())
                .is_some_and(|r| !r.is_empty())
        };
        let (init_done, signal_ready) = (ready(Some(0)), ready(Some(1)));
        let (sock_ready, master_ready, stdin_ready) =
            (ready(sock_at), ready(master_at), ready(stdin_at));
        let listener_events = listener_at
            .and_then(|i| fds.get(i))
            .and_then(|f| f.revents())
            .unwrap_or(PollFlags::empty());
        drop(fds);
        if listener_events.contains(PollFlags::POLLIN) {
            if let Some(hint) = listener.as_mut().and_then(Listener::answer) {
                say(hint, raw);
            }
        } else if listener_events.intersects(PollFlags::POLLHUP | PollFlags::POLLERR) {
            // Every process under the filter is gone: the listener would say so at every poll.
            listener = None;
        }
        if let Some(relay) = relay.as_mut() {
            if master_ready {
                relay.on_master();
            }
            if stdin_ready {
                relay.on_stdin();
            }
        }
        if sock_ready {
            sock_open = report.read(sock);
            if let (Some(master), Some(t)) = (report.tty.take(), terminal.as_ref()) {
                relay = Some(Relay::new(master, t.plan));
            }
            if let Some(fd) = report.seccomp.take() {
                listener = Some(Listener::new(fd));
            }
            if let Some(listener) = report.listener.take()
                && let Err(e) = gates.serve_egress(listener)
            {
                // Fail closed: a sandbox in proxy mode never runs without its proxy.
                init.kill();
                return Err(LaunchError::Setup(format!(
                    "cannot start the egress proxy: {e}"
                )));
            }
        }
        if signal_ready {
            while let Ok(Some(info)) = sfd.read_signal() {
                match Signal::try_from(info.ssi_signo as i32) {
                    Ok(Signal::SIGWINCH) => {
                        if let (Some(relay), Some(t)) = (relay.as_ref(), terminal.as_ref()) {
                            relay.on_resize(t.plan);
                        }
                    }
                    Ok(Signal::SIGCONT) => {
                        if let Some(raw) = terminal.as_ref().and_then(|t| t.raw) {
                            raw.reapply();
                        }
                    }
                    // The workload is in a session of its own, so a signal the terminal sent to
                    // this process group never reached it: init passes each one on, once.
                    _ => {
                        let _ = sys::pidfd_send_signal(init.pidfd.as_fd(), info.ssi_signo as i32);
                    }
                }
            }
        }
        // Native: init's report says every process but init is gone, and init only exits after
        // it. Its exit (the namespaces' teardown) is waited for at the session's end instead.
        let ended = init.reports_the_end() && report.has_outcome();
        if init_done || ended {
            if init_done {
                init.wait();
            }
            while report.read(sock) {}
            // A sandbox that ended before its pty reached the relay (a quick command on a busy
            // machine: one message is read per turn) still has its output in that pty.
            if let (None, Some(master), Some(t)) =
                (relay.as_ref(), report.tty.take(), terminal.as_ref())
            {
                relay = Some(Relay::new(master, t.plan));
            }
            if let Some(relay) = relay.as_mut() {
                relay.drain();
            }
            break;
        }
    }
    report.outcome()
}

/// One line for the developer on stderr; with the terminal in raw mode (the relay), `\r\n` ends it.
pub(super) fn say(line: &str, raw: bool) {
    use std::io::Write as _;
    let end = if raw { "\r\n" } else { "\n" };
    let _ = write!(std::io::stderr(), "{line}{end}");
}

/// Adds `fd` to a poll set; its index there.
fn push<'a>(
    fds: &mut Vec<PollFd<'a>>,
    fd: std::os::fd::BorrowedFd<'a>,
    events: PollFlags,
) -> Option<usize> {
    fds.push(PollFd::new(fd, events));
    Some(fds.len() - 1)
}
