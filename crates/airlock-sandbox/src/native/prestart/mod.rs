//! A native sandbox's init cloned while airlock plans its sandbox.
//!
//! Making the namespaces is the largest single step of a launch here (~1.5 ms, most of it the
//! network namespace), and the kernel does it inside the `clone` call of whoever clones. So as
//! soon as the network mode is known, airlock forks a starter, which clones init with
//! `CLONE_PARENT` (init is airlock's child, as a plain clone's is), hands airlock init's pidfd and
//! exits; the namespaces are made on the other CPU while airlock plans. Init writes its own id
//! maps (the user's ids onto themselves: what the kernel lets the namespace's owner write from
//! either side) and waits in its new namespaces, holding nothing of the host and able to do
//! nothing but read its launch socket; the launch then sends it `G` with the plan, as a memfd
//! (`stage::encode`, the bwrap stage's format), and it goes on as a freshly cloned init does.
//!
//! A launch that does not happen (a bad config, another backend) drops the [`Prestart`], which
//! kills init and waits for it. A spec whose namespaces or ids differ from the ones init was
//! cloned with is never handed to it, and a starter that could not clone is not an error here:
//! in both cases the launch clones a fresh init (and reports what fails, if it does).

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::PathBuf;

use nix::sys::signal::{SigSet, SigmaskHow, sigprocmask};

use super::creds::DroppedGroups;
use super::init::Init;
use super::launch::{self, LaunchError};
use super::sys::{self, Cloned};
use super::{ahead, child, net};
use crate::spec::SandboxSpec;
use airlock_config::NetworkMode;

mod init;

use init::init_main;

/// An init being cloned, or waiting for its plan (see the module).
pub struct Prestart {
    /// The starter's pid and airlock's end of init's launch socket, until a launch takes them.
    pending: Option<(libc::pid_t, OwnedFd)>,
    /// The starter, once its word is read, until it is reaped: at the session's end when a launch
    /// took init ([`Prestart::take_for`]), else when this is dropped.
    starter: Option<libc::pid_t>,
    reap_at_the_end: bool,
    namespaces: libc::c_int,
    ids: (u32, u32),
    /// The project's record of its root ([`ahead`]), when the launch keeps one.
    record: Option<PathBuf>,
}

impl Prestart {
    /// Forks the starter that clones an init into the namespaces of a sandbox on `network`, for
    /// this user. Returns at once.
    ///
    /// Must be called while the process is single-threaded.
    ///
    /// `record` is the project's record of its last root ([`ahead`]): when it says so, init
    /// builds that root while airlock plans.
    pub fn begin(network: NetworkMode, record: Option<PathBuf>) -> Result<Prestart, LaunchError> {
        Prestart::begin_with(launch::namespaces_for(network), record)
    }

    /// [`Prestart::begin`] as early as a launch knows its project, before it has read the config
    /// that gives the network mode: when `record` says to build its root ahead, with the
    /// namespaces that root's sandbox had. `None` when it does not (or the fork failed): the
    /// launch begins one once it knows the network mode, if it is native.
    pub fn from_record(record: PathBuf) -> Option<Prestart> {
        let host = ahead::builds_ahead_on_host_network(&record)?;
        let network = match host {
            true => NetworkMode::Host,
            false => NetworkMode::None,
        };
        Prestart::begin(network, Some(record)).ok()
    }

    /// Whether this init was cloned with the namespaces of a sandbox on `network`.
    pub fn fits(&self, network: NetworkMode) -> bool {
        self.namespaces == launch::namespaces_for(network)
    }

    fn begin_with(
        namespaces: libc::c_int,
        record: Option<PathBuf>,
    ) -> Result<Prestart, LaunchError> {
        let (sock, child_end) = launch::launch_socket()?;
        let record_c = record
            .as_deref()
            .and_then(|p| CString::new(p.as_os_str().as_bytes()).ok());
        let ids = (
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
        );
        let cpus = Cpus::now();
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
            start(
                namespaces,
                ids,
                &sock,
                child_end,
                record_c.as_deref(),
                &cpus,
            )
        }
        let forked = std::io::Error::last_os_error();
        if starter > 0 {
            cpus.run_elsewhere(starter);
        }
        let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&previous), None);
        if starter < 0 {
            return Err(LaunchError::Start(forked));
        }
        Ok(Prestart {
            pending: Some((starter, sock)),
            starter: None,
            reap_at_the_end: false,
            namespaces,
            ids,
            record,
        })
    }

    /// Init and its launch socket, `G` sent with the plan, if `spec` is what init was cloned for
    /// and the starter cloned it; else `None`, and init is gone. A root init built ahead is used
    /// when it is `spec`'s ([`ahead::Report::confirms`]); when it is not, init is killed and
    /// `None` returned too. With the record to write back once the workload may run.
    pub(super) fn take_for(
        mut self,
        spec: &SandboxSpec,
        plan: impl Fn(bool) -> Vec<u8>,
    ) -> Result<Taken, LaunchError> {
        let planned = self
            .record
            .is_some()
            .then(|| ahead::root_bytes(spec))
            .flatten();
        let record = self.record.take();
        self.reap_at_the_end = true;
        // With a root to build ahead, the sources are looked up and `G` encoded before the
        // starter is waited for: it reports `P` at once but exits only once it has made init's
        // network namespace, which init joins before it can report its root anyway.
        let early = record
            .is_some()
            .then(|| (ahead::Sources::now(spec), plan(true)));
        let taken = |init, outcome| Taken {
            init,
            record: record.map(|path| {
                let host = spec.network == NetworkMode::Host;
                ahead::Record::new(path, planned.clone(), host, outcome)
            }),
        };
        let Some((mut init, sock, started)) = self.started() else {
            return Ok(taken(None, None));
        };
        // An init cloned without its network namespace for a root it does not build ahead never
        // gets one: it is of no use.
        let netless = started.net_later && !started.ahead;
        if launch::namespaces(spec) != self.namespaces
            || (spec.uid, spec.gid) != self.ids
            || netless
        {
            init.kill();
            return Ok(taken(None, None));
        }
        // Init's report is awaited; the sources were looked up while init may still be building.
        let (outcome, sent) = match (started.ahead, early) {
            (true, Some((sources, light))) => {
                // The plan goes ahead of `G` (`Q`): init decodes it while it waits for its
                // network namespace, and `G` comes bare once its root is confirmed.
                let ahead_sent = send_plan(&sock, PLAN, &light).is_ok();
                let report = ahead::Report::receive(sock.as_raw_fd(), &sources);
                let sent = if ahead_sent { Vec::new() } else { light };
                (Some(report.confirms(planned.as_deref(), &sources)), sent)
            }
            // The starter hands init a root only from the record.
            (true, None) => {
                init.kill();
                return Ok(taken(None, None));
            }
            (false, _) => (None, plan(false)),
        };
        if let Some(Err(_)) = &outcome {
            // Not this launch's root: a fresh init builds it.
            init.kill();
            return Ok(taken(None, outcome));
        }
        let go = || match sent.is_empty() {
            true => nix::sys::socket::send(
                sock.as_raw_fd(),
                &[child::GO],
                nix::sys::socket::MsgFlags::empty(),
            )
            .map(drop)
            .map_err(|e| LaunchError::Start(e.into())),
            false => send_plan(&sock, child::GO, &sent),
        };
        if let Err(e) = go() {
            init.kill();
            return Err(e);
        }
        Ok(taken(Some((init, sock)), outcome))
    }

    /// Init as the starter reported it. The starter reports `P` at once and exits only once it
    /// has made init's network namespace (its exit, ~0.1 ms of tearing down its copy of airlock's
    /// memory, was waited for here), so its word is read as soon as it is there; a starter that
    /// died without a word leaves the socket silent and its pidfd readable.
    fn started(&mut self) -> Option<(Init, OwnedFd, Started)> {
        let (starter, sock) = self.pending.take()?;
        self.starter = Some(starter);
        if !word_or_end(starter, &sock) {
            return None;
        }
        let (started, pidfd) = receive_started(sock.as_raw_fd())?;
        let init = Init {
            pid: started.pid,
            pidfd,
            bwrap: None,
            waited: false,
        };
        Some((init, sock, started))
    }
}

/// What [`Prestart::take_for`] hands the launch.
pub(super) struct Taken {
    /// Init and the launch socket, `G` sent; `None`: the launch clones a fresh init.
    pub init: Option<(Init, OwnedFd)>,
    /// The project's record of its root, to write back.
    pub record: Option<ahead::Record>,
}

impl Drop for Prestart {
    fn drop(&mut self) {
        if let Some((mut init, _, _)) = self.started() {
            init.kill();
        }
        if let Some(starter) = self.starter.take() {
            match self.reap_at_the_end {
                true => crate::session::end_later(move || reap(starter)),
                false => reap(starter),
            }
        }
    }
}

/// Waits until `sock` has the starter's word or the starter has ended; whether the word is there.
fn word_or_end(starter: libc::pid_t, sock: &OwnedFd) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd as _;
    // SAFETY: pidfd_open on this process's own child, not yet reaped; the result is owned below.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, starter, 0) };
    if raw < 0 {
        // No pidfd (a kernel before 5.3): the starter's exit says it has said all it will.
        reap(starter);
        return true;
    }
    // SAFETY: a pidfd just opened, ours alone.
    let pidfd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw as RawFd) };
    loop {
        let mut fds = [
            PollFd::new(sock.as_fd(), PollFlags::POLLIN),
            PollFd::new(pidfd.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return false,
            Ok(_) => {}
        }
        let ready = |f: &PollFd| f.revents().is_some_and(|r| !r.is_empty());
        if ready(&fds[0]) {
            return true;
        }
        if ready(&fds[1]) {
            // Ended: its word, if it said one, came before its exit.
            return false;
        }
    }
}

/// Reaps the starter, this process's child (once; a second call finds nothing).
fn reap(starter: libc::pid_t) {
    let mut status = 0;
    // SAFETY: waits for the starter forked by this process.
    while unsafe { libc::waitpid(starter, &mut status, 0) } < 0
        && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
    {}
}

/// The starter: clone init as airlock's child into `namespaces` (init writes its id maps, `ids`
/// onto themselves, and builds the root of the `record` it inherits, when there is one), report
/// its pid and pidfd (`P`) on init's end `sock` and exit; or report why not (`E`).
///
/// With a root to build ahead, init is cloned without its network namespace, the most costly
/// to make (~1 ms here): the starter makes it afterwards, on airlock's CPU (which plans meanwhile
/// and has time to spare), while init builds the root on the other, and hands it over (`M`).
/// Init joins it before it reports its root, and runs nothing without it.
fn start(
    namespaces: libc::c_int,
    ids: (u32, u32),
    ours: &OwnedFd,
    sock: OwnedFd,
    record: Option<&CStr>,
    cpus: &Cpus,
) -> ! {
    let fd = sock.as_raw_fd();
    // A forked child may run first on airlock's CPU (airlock preempted until it blocks); so the
    // starter moves itself before anything else, as airlock moves it when airlock runs first.
    cpus.run_elsewhere(0);
    // Dropped for good: the starter only clones and exits.
    if let Err(e) = DroppedGroups::for_clone() {
        child::die(fd, &e.to_string());
    }
    let record = record.and_then(ahead::open_for_build);
    let net_later = record.is_some() && namespaces & libc::CLONE_NEWNET != 0;
    let cloned = match net_later {
        true => namespaces & !libc::CLONE_NEWNET,
        false => namespaces,
    };
    // SAFETY: the starter is single-threaded (a fork of a single-threaded process).
    match unsafe { sys::clone_process(cloned | libc::CLONE_PARENT) } {
        Ok(Cloned::Child) => {
            // SAFETY: init's copy of airlock's end; closing is all this does.
            unsafe { libc::close(ours.as_raw_fd()) };
            init_main(sock, net_later, record, ids, cpus.allowed)
        }
        Ok(Cloned::Parent { pid, pidfd }) => {
            let ahead = record.is_some();
            drop(record);
            let started = Started {
                pid,
                ahead,
                net_later,
            };
            let _ = sys::send_with_fd(fd, &started.encode(), pidfd.as_raw_fd());
            if ahead && net_later {
                cpus.run_here();
                match net::make_in_user_ns_of(&pidfd) {
                    Ok(net) => {
                        let _ = sys::send_with_fd(ours.as_raw_fd(), &[NET], net.as_raw_fd());
                    }
                    // Init makes its own.
                    Err(_) => child::send(ours.as_raw_fd(), NET, &[]),
                }
            }
            // SAFETY: _exit skips destructors, as every early exit after a fork does.
            unsafe { libc::_exit(0) }
        }
        Err(e) => child::die(fd, &format!("cannot start the sandbox: {e}")),
    }
}

/// The CPUs airlock may run on, and the one it runs on now.
///
/// A forked process starts on its parent's CPU, and the scheduler here either left the starter
/// waiting there behind airlock for ~2 ms while the other CPU idled, or ran it first, airlock
/// waiting ~1 ms for the CPU while the starter cloned init. So the starter is placed on another
/// CPU of airlock's set, by whichever of the two runs first. Init, which it clones there (and
/// which builds the root ahead there), stays there until it starts the workload, and then gets
/// the whole set back ([`ChildPlan::cpus`]): airlock's messages wake it (a unix socket's wakeups
/// are "sync", the waker said to sleep next), and the scheduler placed it on airlock's CPU, where
/// it ran while airlock waited (plan decoded, setup after `G`) and its own CPU idled.
struct Cpus {
    allowed: Option<nix::sched::CpuSet>,
    now: Option<usize>,
}

impl Cpus {
    fn now() -> Cpus {
        // SAFETY: sched_getcpu has no preconditions.
        let now = usize::try_from(unsafe { libc::sched_getcpu() }).ok();
        let allowed = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).ok();
        Cpus { allowed, now }
    }

    /// Moves `pid` (0: the caller) to another CPU of the set; nothing when there is none.
    fn run_elsewhere(&self, pid: libc::pid_t) {
        let (Some(allowed), Some(now)) = (&self.allowed, self.now) else {
            return;
        };
        let other = (0..nix::sched::CpuSet::count())
            .find(|&cpu| cpu != now && allowed.is_set(cpu).unwrap_or(false));
        let mut one = nix::sched::CpuSet::new();
        if let Some(cpu) = other
            && one.set(cpu).is_ok()
        {
            let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(pid), &one);
        }
    }

    /// Moves the calling process (the starter) to airlock's CPU.
    fn run_here(&self) {
        let mut one = nix::sched::CpuSet::new();
        if let Some(now) = self.now
            && one.set(now).is_ok()
        {
            let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &one);
        }
    }
}

/// The starter's `P` report: init's pid, whether it builds a root ahead, and whether it was
/// cloned without its network namespace (made by the starter).
struct Started {
    pid: libc::pid_t,
    ahead: bool,
    net_later: bool,
}

impl Started {
    fn encode(&self) -> [u8; 6] {
        let [a, b, c, d] = self.pid.to_le_bytes();
        let flags = u8::from(self.ahead) | u8::from(self.net_later) << 1;
        [b'P', a, b, c, d, flags]
    }
}

/// The starter's `P` report, already queued, and init's pidfd; `None` for anything else.
fn receive_started(sock: RawFd) -> Option<(Started, OwnedFd)> {
    let mut buf = [0u8; 64];
    let (n, pidfd) =
        sys::recv_with_fd(sock, &mut buf, nix::sys::socket::MsgFlags::MSG_DONTWAIT).ok()?;
    match buf.get(..n)? {
        [b'P', a, b, c, d, flags] => Some((
            Started {
                pid: libc::pid_t::from_le_bytes([*a, *b, *c, *d]),
                ahead: flags & 1 != 0,
                net_later: flags & 2 != 0,
            },
            pidfd?,
        )),
        _ => None,
    }
}

/// `G` or `Q` (`head`), with the plan in a memfd.
fn send_plan(sock: &OwnedFd, head: u8, plan: &[u8]) -> Result<(), LaunchError> {
    let memfd = crate::backend::bwrap::spawn::memfd("airlock-plan", plan)?;
    sys::send_with_fd(sock.as_raw_fd(), &[head], memfd.as_raw_fd()).map_err(LaunchError::Start)
}

/// The starter's second message, when init was cloned without its network namespace: the
/// namespace to join, or none (init makes its own).
const NET: u8 = b'M';
/// How long init waits for that namespace before it makes its own (the starter died).
const NET_WAIT_MS: u16 = 2000;
/// The supervisor's plan sent ahead of `G` to an init building its root ahead (a memfd, as `G`
/// carries it): init decodes it while it waits, and the `G` that follows comes without one.
const PLAN: u8 = b'Q';
