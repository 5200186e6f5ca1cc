//! Steps 1, 2 and 6 of a launch, in the parent: clone, write the id maps, then supervise.

use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};

use super::cgroup::Cgroup;
use super::child::{self, ChildPlan};
use super::creds::{self, DroppedGroups};
use super::init::{ENDING, Init};
use super::notify::Listener;
use super::report::Report;
use super::sys::{self, Cloned};
use super::tty::{RawMode, Relay, TtyPlan};
use crate::spec::SandboxSpec;

/// How the workload ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Exited(i32),
    Signaled(i32),
}

/// Why a launch failed before the workload could run.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(
        "user namespaces are not available ({0}); enable them (sysctl user.max_user_namespaces=15000, \
         and kernel.unprivileged_userns_clone=1 or kernel.apparmor_restrict_unprivileged_userns=0 where \
         those exist), then check with `airlock doctor`"
    )]
    NoUserNamespaces(io::Error),
    #[error("{0}")]
    Plan(String),
    #[error("cannot start the sandbox: {0}")]
    Start(io::Error),
    #[error("cannot write the sandbox's {file}: {source}")]
    IdMap {
        file: &'static str,
        source: io::Error,
    },
    #[error("sandbox setup failed: {0}")]
    Setup(String),
    #[error("the sandbox's init ended without reporting the workload's status")]
    Lost,
    #[error("the sandbox was stopped: {0}")]
    Stopped(String),
}

/// The signals a supervisor passes on to what it supervises (and blocks while it waits).
pub(crate) const FORWARDED: [Signal; 4] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// What the supervisor does itself for the relay: a new window size, a continue after a stop.
const TERMINAL: [Signal; 2] = [Signal::SIGWINCH, Signal::SIGCONT];

/// The gates the supervisor runs for a sandbox while it lives (the egress proxy for now).
pub trait Gates {
    /// Serve the egress proxy on `listener`, a socket inside the sandbox's network namespace.
    /// Called once in proxy mode, before the workload can connect; an error stops the sandbox.
    fn serve_egress(&mut self, listener: std::net::TcpListener) -> Result<(), String>;

    /// Called once right after the sandbox is cloned, before it may run the workload: threads
    /// can start now (the socket filters'). An error stops the sandbox.
    fn started(&mut self) -> Result<(), String> {
        Ok(())
    }

    /// Called once the sandbox has ended (its every process gone), before the port forwards and
    /// the control socket are stopped: tell the gates' threads to stop too, so they wind down
    /// meanwhile instead of one after the other. Nothing is joined here; the session's finish
    /// does that.
    fn ended(&mut self) {}

    /// A remote container's `.git`, unpacked as data into `staged` (host-private, trusted in
    /// nothing): bring its branches back into the project's repository. Returns the lines to
    /// tell the developer. Without a git tool, nothing comes back.
    fn bring_back_git(&mut self, staged: &std::path::Path) -> Vec<String> {
        let _ = staged;
        Vec::new()
    }
}

/// No gates: for host and none network modes.
pub struct NoGates;

impl Gates for NoGates {
    fn serve_egress(&mut self, _listener: std::net::TcpListener) -> Result<(), String> {
        Err("this launch has no egress proxy configured".into())
    }
}

/// Launches `spec` with the native backend and waits for its workload. It returns once every
/// process of the sandbox is gone; init's own exit (the kernel tearing down its namespaces) may
/// still be going on, and [`reap_ended`] waits for it.
///
/// Raises this process's descriptor limit to the hard limit first (for the egress proxy the gates
/// serve); the workload gets the limit this process had.
///
/// Must be called while the process is single-threaded (the child allocates after the clone); the
/// gates may start threads, since they are called after the clone.
pub fn run(spec: &SandboxSpec, gates: &mut dyn Gates) -> Result<Outcome, LaunchError> {
    run_with(spec, gates, Start::Clone)
}

/// How the sandbox's init comes to be.
pub(crate) enum Start<'a> {
    /// Cloned by this process into new namespaces (native).
    Clone,
    /// Run by bubblewrap as its command: the stage (the bwrap backend).
    Bwrap {
        program: &'a std::path::Path,
        rendered: crate::backend::bwrap::render::Rendered,
    },
}

/// [`run`], with the sandbox's init started as `start` says; the rest of the launch (id maps for
/// a clone, limits, forwards, gates, supervision) is the same for both.
pub(crate) fn run_with(
    spec: &SandboxSpec,
    gates: &mut dyn Gates,
    start: Start<'_>,
) -> Result<Outcome, LaunchError> {
    let mut plan = ChildPlan::new(spec).map_err(LaunchError::Plan)?;
    let cgroup = limit_group(spec)?;
    let _ = std::fs::remove_file(spec.state_root.join(OOM_MARKER));
    plan.fd_limit = creds::raise_fd_limit();
    plan.tty = TtyPlan::detect();
    let (parent_end, child_end) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| LaunchError::Start(e.into()))?;

    let mut blocked = SigSet::empty();
    for s in FORWARDED {
        blocked.add(s);
    }
    blocked.add(Signal::SIGCHLD);
    for s in TERMINAL {
        blocked.add(s);
    }
    let mut previous = SigSet::empty();
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&blocked), Some(&mut previous))
        .map_err(|e| LaunchError::Start(e.into()))?;
    // Before the clone, so keys typed while the sandbox starts wait for the pty unechoed.
    let raw = plan.tty.as_ref().and_then(RawMode::enter);
    let mut init = None;
    let result = clone_and_wait(
        spec,
        &plan,
        (parent_end, child_end),
        gates,
        raw.as_ref(),
        cgroup.as_ref(),
        start,
        &mut init,
    );
    drop(raw);
    if let Some(cgroup) = cgroup {
        // The group empties when init is gone.
        if let Some(init) = init.as_mut() {
            init.wait();
        }
        report_events(spec, cgroup.finish());
    } else if let Some(init) = init {
        ENDING.lock().unwrap_or_else(|e| e.into_inner()).push(init);
    }
    let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&previous), None);
    result
}

/// The namespaces a sandbox of `spec` gets (`clone` flags): all but the network one with
/// `--network host`.
pub fn namespaces(spec: &SandboxSpec) -> libc::c_int {
    let mut flags = libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS;
    if spec.network != airlock_config::NetworkMode::Host {
        flags |= libc::CLONE_NEWNET;
    }
    flags
}

/// Starts init, starts the gates, supervises. `init` holds it afterwards unless it was waited for.
#[allow(clippy::too_many_arguments)]
fn clone_and_wait(
    spec: &SandboxSpec,
    plan: &ChildPlan,
    (parent_end, child_end): (OwnedFd, OwnedFd),
    gates: &mut dyn Gates,
    raw: Option<&RawMode>,
    cgroup: Option<&Cgroup>,
    start: Start<'_>,
    slot: &mut Option<Init>,
) -> Result<Outcome, LaunchError> {
    let init = slot.insert(match start {
        Start::Clone => clone_init(spec, plan, &parent_end, child_end)?,
        Start::Bwrap { program, rendered } => crate::backend::bwrap::spawn::start(
            program,
            &rendered,
            &super::stage::encode(spec, plan.tty.as_ref(), plan.fd_limit),
            &parent_end,
            child_end,
        )?,
    });
    let pid = init.pid;
    // The id maps are written (bwrap wrote its own): init builds the root while the gates start.
    send_go(&parent_end, child::GO, init)?;
    if let Some(Err(e)) = cgroup.map(|c| c.add(pid)) {
        // Limits that were asked for hold, or the sandbox does not run.
        init.kill();
        return Err(LaunchError::Setup(format!(
            "{e}; [sandbox.resources] cannot be applied, so the sandbox was not started"
        )));
    }
    // Before the gates start threads: the forwards' helper is forked while this is one thread.
    let ports = match crate::ports::PortService::start(spec, pid) {
        Ok(ports) => ports,
        Err(e) => {
            // A host port in use (or no way into the sandbox's network): nothing ran yet.
            init.kill();
            return Err(LaunchError::Setup(e));
        }
    };
    if let Err(e) = gates.started() {
        // Fail closed: the gates this sandbox was planned with serve it, or it does not run.
        init.kill();
        return Err(LaunchError::Setup(e));
    }
    send_go(&parent_end, child::RUN, init)?;
    let index = spec.hide.as_ref().map(|h| h.index.as_path());
    let terminal = plan.tty.as_ref().map(|plan| Terminal { plan, raw });
    for warning in ports.warnings() {
        say(&format!("airlock: warning: {warning}"), raw.is_some());
    }
    let outcome = supervise(init, &parent_end, gates, index, terminal);
    gates.ended();
    // Every forward ends with the sandbox: listeners closed, relays shut, the helper gone.
    drop(ports);
    outcome
}

/// Sends init one of its go bytes ([`child::GO`], [`child::RUN`]). An init that has already
/// ended (a setup error it reported) is not an error here: `supervise` collects its report.
fn send_go(sock: &OwnedFd, byte: u8, init: &mut Init) -> Result<(), LaunchError> {
    match nix::unistd::write(sock, &[byte]) {
        Ok(_) | Err(nix::errno::Errno::EPIPE) => Ok(()),
        Err(e) => {
            init.kill();
            Err(LaunchError::Start(e.into()))
        }
    }
}

/// Native: clones init into new namespaces and writes its id maps.
fn clone_init(
    spec: &SandboxSpec,
    plan: &ChildPlan,
    parent_end: &OwnedFd,
    child_end: OwnedFd,
) -> Result<Init, LaunchError> {
    let groups = DroppedGroups::for_clone().map_err(LaunchError::Start)?;
    // SAFETY: the caller guarantees a single-threaded process; the child never returns.
    let cloned = unsafe { sys::clone_process(namespaces(spec)) };
    if let Ok(Cloned::Child) = cloned {
        // SAFETY: the child's copy of the parent's end; closing it is all this does.
        unsafe { libc::close(parent_end.as_raw_fd()) };
        child::main(plan, child_end)
    }
    if let Some(groups) = groups {
        groups.restore();
    }
    let (pid, pidfd) = match cloned {
        Ok(Cloned::Child) => unreachable!("the child never returns from child::main"),
        Ok(Cloned::Parent { pid, pidfd }) => (pid, pidfd),
        Err(e) => {
            return Err(match e.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EINVAL) | Some(libc::ENOSPC)
                | Some(libc::EUSERS) => LaunchError::NoUserNamespaces(e),
                _ => LaunchError::Start(e),
            });
        }
    };
    drop(child_end);
    let mut init = Init {
        pid,
        pidfd,
        bwrap: None,
        waited: false,
    };
    if let Err(e) = write_id_maps(pid, spec.uid, spec.gid) {
        init.kill();
        return Err(e);
    }
    Ok(init)
}

/// The sandbox's cgroup when `[sandbox.resources]` limits anything; an error refuses the launch.
fn limit_group(spec: &SandboxSpec) -> Result<Option<Cgroup>, LaunchError> {
    let l = &spec.limits;
    if l.memory.is_none() && l.cpus_milli.is_none() && l.pids.is_none() {
        return Ok(None);
    }
    let parent = super::cgroup::own_group_here().map_err(LaunchError::Setup)?;
    let name = format!("{}.{}", spec.name, std::process::id());
    Cgroup::create(&parent, l, &name).map_err(LaunchError::Setup)
}

/// Says what the limits stopped, and records an OOM kill for `sandboxes list`.
fn report_events(spec: &SandboxSpec, events: super::cgroup::Events) {
    if events.oom_kills > 0 {
        let limit = spec.limits.memory.unwrap_or(0) >> 20;
        eprintln!(
            "airlock: the sandbox ran out of memory: the kernel killed {} process(es) at the \
             {limit} MiB limit ([sandbox.resources] memory)",
            events.oom_kills
        );
        let _ = std::fs::write(
            spec.state_root.join(OOM_MARKER),
            format!("{}\n", events.oom_kills),
        );
    }
    if events.pids_refused > 0 {
        eprintln!(
            "airlock: {} fork(s) were refused at the process limit ([sandbox.resources] pids = {})",
            events.pids_refused,
            spec.limits.pids.unwrap_or(0)
        );
    }
}

pub use crate::state::OOM_MARKER;

/// The caller's terminal, when the sandbox got a pty for it.
struct Terminal<'a> {
    plan: &'a TtyPlan,
    raw: Option<&'a RawMode>,
}

/// Step 2: `setgroups` = deny first (required before gid_map for an unprivileged caller), then the
/// caller's own uid and gid mapped to themselves.
fn write_id_maps(pid: libc::pid_t, uid: u32, gid: u32) -> Result<(), LaunchError> {
    let proc = format!("/proc/{pid}");
    let write = |file: &'static str, text: String| {
        fs::write(format!("{proc}/{file}"), text)
            .map_err(|source| LaunchError::IdMap { file, source })
    };
    write("setgroups", "deny".into())?;
    write("uid_map", format!("{uid} {uid} 1\n"))?;
    write("gid_map", format!("{gid} {gid} 1\n"))?;
    Ok(())
}

/// Step 6: forward signals, relay the terminal, collect the workload's status, wait for init.
fn supervise(
    init: &mut Init,
    sock: &OwnedFd,
    gates: &mut dyn Gates,
    index: Option<&std::path::Path>,
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
    let mut report = Report::new(index);
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
fn say(line: &str, raw: bool) {
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
