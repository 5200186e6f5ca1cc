//! Steps 1 and 2 of a launch, in the parent: clone (or take a prestarted init), write the id
//! maps, start the gates; step 6, the supervision, is `supervise.rs`.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};
use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};

use super::cgroup::Cgroup;
use super::child::{self, ChildPlan};
use super::creds::{self, DroppedGroups};
use super::init::Init;
use super::report::Report;
use super::supervise::{Terminal, say, supervise};
use super::sys::{self, Cloned};
use super::tty::{RawMode, TtyPlan};
use crate::spec::SandboxSpec;
use crate::state::OverlayLease;

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
pub(super) const TERMINAL: [Signal; 2] = [Signal::SIGWINCH, Signal::SIGCONT];

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
/// still be going on, and the port service's threads may still be stopping: both are handed to
/// [`crate::session::end_later`], and [`crate::session::end_the_rest`] waits for them.
///
/// Raises this process's descriptor limit to the hard limit first (for the egress proxy the gates
/// serve); the workload gets the limit this process had.
///
/// Must be called while the process is single-threaded (the child allocates after the clone); the
/// gates may start threads, since they are called after the clone.
pub fn run(spec: &SandboxSpec, gates: &mut dyn Gates) -> Result<Outcome, LaunchError> {
    run_with(spec, gates, Start::Clone, None)
}

/// [`run`] with an init cloned ahead ([`super::prestart::Prestart`]), or a fresh clone when
/// `prestart` is `None` or was made for other namespaces; and with the session's overlay `lease`,
/// which is let go once the sandbox's overlays are unmounted (by the closer after this process's
/// exit, or once init has been waited for).
pub fn run_prestarted(
    spec: &SandboxSpec,
    gates: &mut dyn Gates,
    prestart: Option<super::prestart::Prestart>,
    lease: Option<OverlayLease>,
) -> Result<Outcome, LaunchError> {
    run_with(
        spec,
        gates,
        prestart.map_or(Start::Clone, Start::Prestarted),
        lease,
    )
}

/// How the sandbox's init comes to be.
pub(crate) enum Start<'a> {
    /// Cloned by this process into new namespaces (native).
    Clone,
    /// Cloned already, waiting for its plan ([`super::prestart`]); cloned anew when the spec
    /// needs other namespaces.
    Prestarted(super::prestart::Prestart),
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
    lease: Option<OverlayLease>,
) -> Result<Outcome, LaunchError> {
    let mut plan = ChildPlan::new(spec).map_err(LaunchError::Plan)?;
    let cgroup = limit_group(spec)?;
    let _ = std::fs::remove_file(spec.state_root.join(OOM_MARKER));
    plan.fd_limit = creds::raise_fd_limit();
    plan.tty = TtyPlan::detect();
    let (parent_end, child_end) = launch_socket()?;

    let mut previous = SigSet::empty();
    sigprocmask(
        SigmaskHow::SIG_BLOCK,
        Some(&supervised_signals()),
        Some(&mut previous),
    )
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
        lease.as_ref(),
        &mut init,
    );
    drop(raw);
    if let Some(cgroup) = cgroup {
        // The group empties when init is gone.
        if let Some(init) = init.as_mut() {
            init.wait();
        }
        report_events(spec, cgroup.finish());
    } else if let Some(mut init) = init {
        // Its exit (the kernel tearing down its namespaces) overlaps the session's own end.
        crate::session::end_later(move || init.wait());
    }
    if let Some(lease) = lease {
        // After init's end: the overlays are unmounted by then, unless the closer holds them, and
        // then it holds a copy of the lease too, which it lets go after their unmount.
        crate::session::end_later(move || drop(lease));
    }
    let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&previous), None);
    result
}

/// The launch socket: the supervisor's end and init's (`SOCK_SEQPACKET`, one message per report).
pub(super) fn launch_socket() -> Result<(OwnedFd, OwnedFd), LaunchError> {
    socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| LaunchError::Start(e.into()))
}

/// What the supervisor blocks while it supervises (its signalfd takes them), and what init starts
/// with blocked: the forwarded signals, SIGCHLD, and the terminal's.
pub(super) fn supervised_signals() -> SigSet {
    let mut blocked = SigSet::empty();
    for s in FORWARDED.into_iter().chain(TERMINAL) {
        blocked.add(s);
    }
    blocked.add(Signal::SIGCHLD);
    blocked
}

/// The namespaces a sandbox of `spec` gets (`clone` flags): all but the network one with
/// `--network host`.
pub fn namespaces(spec: &SandboxSpec) -> libc::c_int {
    namespaces_for(spec.network)
}

/// The namespaces of a sandbox on `network` (see [`namespaces`]).
pub(super) fn namespaces_for(network: airlock_config::NetworkMode) -> libc::c_int {
    let mut flags = libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS;
    if network != airlock_config::NetworkMode::Host {
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
    lease: Option<&OverlayLease>,
    slot: &mut Option<Init>,
) -> Result<Outcome, LaunchError> {
    let mut record = None;
    let (prestarted, start) = match start {
        Start::Prestarted(prestart) => {
            let encode = |built: bool| {
                // Init has the root already: the mounts are not sent again.
                let light;
                let sent = match built {
                    true => {
                        light = spec.without_mounts();
                        &light
                    }
                    false => spec,
                };
                super::stage::encode(sent, plan.tty.as_ref(), plan.fd_limit)
            };
            let taken = prestart.take_for(spec, encode)?;
            record = taken.record;
            (taken.init, Start::Clone)
        }
        other => (None, other),
    };
    let (init, parent_end) = match (prestarted, start) {
        // `G` went with the plan.
        (Some((init, sock)), _) => (slot.insert(init), sock),
        (None, Start::Bwrap { program, rendered }) => {
            let init = slot.insert(crate::backend::bwrap::spawn::start(
                program,
                &rendered,
                &super::stage::encode(spec, plan.tty.as_ref(), plan.fd_limit),
                &parent_end,
                child_end,
            )?);
            // bwrap wrote the id maps: init builds the root while the gates start.
            send_go(&parent_end, child::GO, init)?;
            (init, parent_end)
        }
        (None, _) => {
            let init = slot.insert(clone_init(spec, plan, &parent_end, child_end)?);
            // The id maps are written: init builds the root while the gates start.
            send_go(&parent_end, child::GO, init)?;
            (init, parent_end)
        }
    };
    let pid = init.pid;
    if let Some(Err(e)) = cgroup.map(|c| c.add(pid)) {
        // Limits that were asked for hold, or the sandbox does not run.
        init.kill();
        return Err(LaunchError::Setup(format!(
            "{e}; [sandbox.resources] cannot be applied, so the sandbox was not started"
        )));
    }
    // Before the gates start threads: the forwards' helper is forked while this is one thread.
    let mut ports = match crate::ports::PortService::start(spec, pid) {
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
    // While the workload starts on the other CPU.
    ports.serve();
    if let Some(record) = record {
        record.save();
    }
    let mut report = Report::new(spec.hide.as_ref().map(|h| h.index.as_path()));
    if let Some((mounts, lease)) = unmounted_last(spec, init, lease) {
        report.hold_mounts(mounts, lease);
    }
    let terminal = plan.tty.as_ref().map(|plan| Terminal { plan, raw });
    for warning in ports.warnings() {
        say(&format!("airlock: warning: {warning}"), raw.is_some());
    }
    let outcome = supervise(init, &parent_end, gates, report, terminal);
    ports.wind_down();
    gates.ended();
    // Every forward ends with the sandbox: listeners closed, relays shut, the helper gone, its
    // threads joined once the session's own end is done.
    crate::session::end_later(move || drop(ports));
    outcome
}

/// The sandbox's mount namespace, for [`Report::hold_mounts`]: native only (init is PID 1 and
/// reports the sandbox's end). With persistent overlays, only with copies of the overlay `lease`
/// and of init's pidfd beside it: an overlay's upper directory is free only once its mount is, so
/// whoever unmounts the tree lets the lease go after it. None when any cannot be had: init's exit
/// then unmounts the tree, and the lease waits for init.
fn unmounted_last(
    spec: &SandboxSpec,
    init: &Init,
    lease: Option<&OverlayLease>,
) -> Option<(OwnedFd, Option<(OwnedFd, OwnedFd)>)> {
    if !init.reports_the_end() {
        return None;
    }
    let lease = if spec.has_persistent_uppers() {
        let lease = lease?.try_clone_fd().ok()?;
        Some((lease, init.pidfd.try_clone().ok()?))
    } else {
        None
    };
    let mounts = std::fs::File::open(format!("/proc/{}/ns/mnt", init.pid)).ok()?;
    Some((OwnedFd::from(mounts), lease))
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

/// Step 2: `setgroups` = deny first (required before gid_map for an unprivileged caller), then the
/// caller's own uid and gid mapped to themselves.
pub(super) fn write_id_maps(pid: libc::pid_t, uid: u32, gid: u32) -> Result<(), LaunchError> {
    write_id_maps_in(&format!("/proc/{pid}"), uid, gid)
}

/// [`write_id_maps`] from inside the new user namespace, for the caller itself: the kernel lets
/// the namespace's owner map its own ids from either side.
pub(super) fn write_own_id_maps(uid: u32, gid: u32) -> Result<(), LaunchError> {
    write_id_maps_in("/proc/self", uid, gid)
}

fn write_id_maps_in(proc: &str, uid: u32, gid: u32) -> Result<(), LaunchError> {
    let write = |file: &'static str, text: String| {
        fs::write(format!("{proc}/{file}"), text)
            .map_err(|source| LaunchError::IdMap { file, source })
    };
    write("setgroups", "deny".into())?;
    write("uid_map", format!("{uid} {uid} 1\n"))?;
    write("gid_map", format!("{gid} {gid} 1\n"))?;
    Ok(())
}
