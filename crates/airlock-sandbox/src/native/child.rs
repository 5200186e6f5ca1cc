//! Steps 3 and 4 of a launch, inside the new namespaces: the sandbox's init (PID 1), which builds the
//! root and forks the workload (step 5, `workload.rs`).
//!
//! The parent was single-threaded when it cloned us, so allocating here is safe. Every failure is sent
//! to the parent as one `E` message on the launch socket before exiting; the parent prints it.

use std::ffi::CString;
use std::io::IoSlice;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

use std::os::fd::AsFd;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, fork};

use super::creds::FdLimit;
use super::keeper::Keeper;
use super::setup::Setup;
use super::tty::TtyPlan;
use super::{caps, rootfs, seccomp};
use crate::spec::{MountOp, SandboxSpec};
use airlock_config::NetworkMode;

/// Exit code of a workload whose sandbox could not be set up.
pub const SETUP_FAILED: i32 = 125;

/// Everything the child needs, prepared by the parent before the clone so errors surface early.
pub struct ChildPlan {
    pub mounts: Vec<MountOp>,
    pub hostname: String,
    /// `size=` of every writable tmpfs of the sandbox (`None`: the kernel's default).
    pub tmpfs_size: Option<CString>,
    pub network: NetworkMode,
    pub cwd: CString,
    pub argv: Vec<CString>,
    pub env: Vec<CString>,
    pub path: Vec<CString>,
    pub writable: Vec<PathBuf>,
    pub seccomp: seccomp::SeccompProgram,
    /// The same filter reporting refused namespace calls to the supervisor, tried first.
    pub seccomp_notifying: Option<seccomp::SeccompProgram>,
    pub last_cap: u32,
    /// The descriptor limit to give the workload (the supervisor raised its own).
    pub fd_limit: Option<FdLimit>,
    /// What init keeps hidden for the whole session.
    pub hide: Option<crate::hide::HideSpec>,
    /// Whether the Landlock write rules apply (see [`uses_landlock`]).
    pub landlock: bool,
    /// The caller's terminal, when the workload gets a pty for it.
    pub tty: Option<TtyPlan>,
    /// The bwrap stage: init is uid 0 of the user namespace that owns the mounts (so it can keep
    /// files hidden), and the workload gets a user namespace of its own below it, where it is
    /// `(uid, gid)` again. `None` in native, whose init and workload share one.
    pub own_user_ns: Option<(u32, u32)>,
    /// The CPUs airlock may run on, when init was kept on one of them until the workload starts
    /// (a prestarted init, [`super::prestart`]): given back to init right before it starts the
    /// workload, which inherits them.
    pub cpus: Option<nix::sched::CpuSet>,
}

/// Whether a sandbox gets the Landlock write layer. Not when an unprivileged caller asked for
/// nested namespaces: Landlock refuses mount(2) and pivot_root(2) to every process it restricts, so
/// bwrap or an agent's own sandbox could never set up its root. The read-only binds stay (they are
/// locked: a nested namespace cannot remount them writable). As root the layer stays even then:
/// root inside is host root by uid, and it is what keeps procfs files such as
/// `/proc/sysrq-trigger` from being written.
pub fn uses_landlock(spec: &SandboxSpec) -> bool {
    !(spec.seccomp.nested_namespaces && spec.uid != 0)
}

impl ChildPlan {
    pub fn new(spec: &SandboxSpec) -> Result<ChildPlan, String> {
        let c = |s: &str, what: &str| {
            CString::new(s).map_err(|_| format!("{what} contains a NUL byte: {s:?}"))
        };
        let argv = spec
            .argv
            .iter()
            .map(|a| c(a, "an argument"))
            .collect::<Result<Vec<_>, _>>()?;
        if argv.is_empty() {
            return Err("no command to run".into());
        }
        let env = spec
            .env
            .iter()
            .map(|(k, v)| c(&format!("{k}={v}"), "an environment variable"))
            .collect::<Result<Vec<_>, _>>()?;
        let path = spec
            .env
            .get("PATH")
            .map(String::as_str)
            .unwrap_or("/usr/local/bin:/usr/bin:/bin")
            .split(':')
            .filter(|d| !d.is_empty())
            .map(|d| c(d, "PATH"))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ChildPlan {
            mounts: spec.mounts.clone(),
            hostname: spec.hostname.clone(),
            tmpfs_size: (spec.limits.tmpfs_bytes > 0)
                .then(|| CString::new(spec.limits.tmpfs_bytes.to_string()).expect("digits")),
            network: spec.network,
            cwd: c(&spec.cwd.to_string_lossy(), "the working directory")?,
            argv,
            env,
            path,
            writable: spec.writable.clone(),
            seccomp: seccomp::build(spec.seccomp),
            seccomp_notifying: seccomp::build_notifying(spec.seccomp),
            last_cap: caps::last_cap(),
            fd_limit: None,
            hide: spec.hide.clone(),
            landlock: uses_landlock(spec),
            tty: None,
            own_user_ns: None,
            cpus: None,
        })
    }
}

/// Sends one message to the parent; losing it only loses detail, the exit code still tells.
pub fn send(sock: RawFd, kind: u8, body: &[u8]) {
    let head = [kind];
    let iov = [IoSlice::new(&head), IoSlice::new(body)];
    let _ =
        nix::sys::socket::sendmsg::<()>(sock, &iov, &[], nix::sys::socket::MsgFlags::empty(), None);
}

/// Sends one message carrying a file descriptor (SCM_RIGHTS); `what` names it in the error.
pub(super) fn send_fd(sock: RawFd, kind: u8, passed: RawFd, what: &str) {
    if let Err(e) = super::sys::send_with_fd(sock, &[kind], passed) {
        die(sock, &format!("cannot hand {what} to the supervisor: {e}"));
    }
}

/// The supervisor's first byte to init: the id maps are written, the root may be built.
pub(super) const GO: u8 = b'G';
/// Its second: the gates that serve the sandbox (forwards, control socket, socket filters) are
/// up, the workload may start. Init builds the root meanwhile.
pub(super) const RUN: u8 = b'R';

/// Waits for `byte` from the supervisor; anything else (its end, an error) ends init quietly: the
/// supervisor is gone or has given up on this launch.
pub(super) fn wait_for(sock: RawFd, byte: u8) {
    let mut got = [0u8; 1];
    loop {
        match nix::unistd::read(sock, &mut got) {
            Ok(1) if got[0] == byte => return,
            Err(nix::errno::Errno::EINTR) => {}
            // SAFETY: as in die().
            _ => unsafe { libc::_exit(SETUP_FAILED) },
        }
    }
}

pub(super) fn die(sock: RawFd, message: &str) -> ! {
    send(sock, b'E', message.as_bytes());
    // SAFETY: _exit is always safe; it skips destructors we must not run twice after fork.
    unsafe { libc::_exit(SETUP_FAILED) }
}

/// The child's entry point: wait for the id maps, build the root, then act as init.
pub fn main(plan: &ChildPlan, sock: OwnedFd) -> ! {
    let fd = sock.as_raw_fd();
    detach(fd);
    wait_for(fd, GO);
    build_and_init(plan, fd)
}

/// Out of the caller's session, and killed with the supervisor.
pub(super) fn detach(fd: RawFd) {
    // Out of the caller's process group (and session): a signal the host's terminal generates
    // (Ctrl-C in a cooked terminal) reaches the supervisor alone, which passes it on once. In
    // the same group init would get it too, and the two deliveries of one signal number would
    // merge, the terminal's (ignored: "already delivered") sometimes swallowing the supervisor's.
    // SAFETY: setsid has no preconditions; a fresh child is never a group leader, so it succeeds.
    unsafe { libc::setsid() };
    // Set before waiting for the go byte: if the parent is already gone the read below sees EOF,
    // and if it dies any time later the kernel kills us. No window either way.
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) } < 0 {
        die(fd, "cannot set the parent-death signal");
    }
}

/// After `G`: build the root, bring up the network, hand over the egress listener, act as init.
pub(super) fn build_and_init(plan: &ChildPlan, fd: RawFd) -> ! {
    if let Err(e) = rootfs::build(&plan.mounts, &plan.hostname, plan.tmpfs_size.as_deref()) {
        die(fd, &e.to_string());
    }
    init_in_root(plan, fd)
}

/// In the sandbox's root (built after `G`, or ahead of it): make init's setup, hand it over, act
/// as init.
pub(super) fn init_in_root(plan: &ChildPlan, fd: RawFd) -> ! {
    let mut setup = Setup::local(plan).unwrap_or_else(|e| die(fd, &e));
    if let Err(e) = setup.network(plan) {
        die(fd, &e);
    }
    init(plan, fd, setup)
}

pub(super) const FORWARDED: [Signal; 4] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// PID 1, its `setup` made ([`Setup::local`] and [`Setup::network`]): hand the setup over, start
/// the workload, reap every child, forward signals, keep hidden files hidden, report the
/// workload's end.
pub(super) fn init(plan: &ChildPlan, sock: RawFd, mut setup: Setup) -> ! {
    setup.announce(sock);
    let Setup {
        sfd,
        mut keeper,
        slave,
        handshake,
        bounding_dropped,
        ..
    } = setup;
    // Nothing of the workload runs before the supervisor's gates serve it.
    wait_for(sock, RUN);
    if let Some(cpus) = &plan.cpus {
        // The workload, and all it starts, gets airlock's whole set (it inherits init's).
        let _ = nix::sched::sched_setaffinity(Pid::from_raw(0), cpus);
    }
    let workload = match &handshake {
        // Native: the workload shares init's memory until its exec (no copy of init's address
        // space, none torn down at the exec). Init's descriptors it must not keep are closed
        // raw: nothing of init's may be dropped there.
        None => {
            let own = [
                Some(sfd.as_raw_fd()),
                keeper.as_ref().map(|k| k.fd().as_raw_fd()),
            ];
            let slave_fd = slave.as_ref().map(AsRawFd::as_raw_fd);
            let mut body = || -> i32 {
                for fd in own.into_iter().flatten() {
                    // SAFETY: the child's own copy of init's descriptor table.
                    unsafe { libc::close(fd) };
                }
                super::workload::run(plan, sock, slave_fd, bounding_dropped)
            };
            // SAFETY: init is single-threaded; `body` execs or exits and drops nothing of init's.
            match unsafe { super::sys::spawn_shared(&mut body) } {
                Ok(pid) => Pid::from_raw(pid),
                Err(e) => die(sock, &format!("cannot start the workload: {e}")),
            }
        }
        // The bwrap stage: the workload unshares a user namespace and waits for init to map it,
        // so init must run meanwhile.
        // SAFETY: init is single-threaded; the child only runs the workload setup and execve.
        Some((_, theirs)) => match unsafe { fork() } {
            Ok(ForkResult::Child) => {
                drop(sfd);
                drop(keeper);
                enter_own_user_ns(theirs, sock);
                let slave_fd = slave.as_ref().map(AsRawFd::as_raw_fd);
                super::workload::run(plan, sock, slave_fd, false)
            }
            Ok(ForkResult::Parent { child }) => child,
            Err(e) => die(sock, &format!("cannot start the workload: {e}")),
        },
    };
    if let (Some((ours, _)), Some((uid, gid))) = (&handshake, plan.own_user_ns) {
        map_workload(ours, workload, uid, gid, sock);
    }
    drop(handshake);
    // Only the workload's processes hold the pty: the relay sees its end when they are gone.
    drop(slave);
    loop {
        let (signals, events) = {
            let mut fds = vec![PollFd::new(sfd.as_fd(), PollFlags::POLLIN)];
            if let Some(k) = &keeper {
                fds.push(PollFd::new(k.fd(), PollFlags::POLLIN));
            }
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => die(sock, &format!("cannot wait for events: {e}")),
            }
            let ready = |i: usize| {
                fds.get(i)
                    .and_then(|f| f.revents())
                    .is_some_and(|r| !r.is_empty())
            };
            (ready(0), ready(1))
        };
        if events && let Some(k) = keeper.as_mut() {
            if let Err(e) = k.handle() {
                send(sock, b'F', e.0.as_bytes());
                // SAFETY: as in die(); leaving init kills every process of the sandbox.
                unsafe { libc::_exit(SETUP_FAILED) }
            }
            k.report(sock);
        }
        if !signals {
            continue;
        }
        while let Ok(Some(info)) = sfd.read_signal() {
            let signo = info.ssi_signo as i32;
            if signo == libc::SIGCHLD {
                if let Some((what, code)) = reap(workload) {
                    end(sock, what, code, keeper)
                }
            } else if info.ssi_code != libc::SI_KERNEL {
                // The supervisor passes on every signal it gets (init is in a session of its own,
                // so none comes from a terminal). The workload leads a process group of its own:
                // the whole group gets it, as from a terminal.
                // SAFETY: plain kill(2).
                unsafe { libc::kill(-workload.as_raw(), signo) };
            }
        }
    }
}

/// The workload's side of its own user namespace: unshare, say so, wait for its id maps.
fn enter_own_user_ns(theirs: &OwnedFd, sock: RawFd) {
    if let Err(e) = nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER) {
        die(
            sock,
            &format!("cannot give the workload a user namespace: {e}"),
        );
    }
    let mut byte = [0u8; 1];
    let said = nix::unistd::write(theirs, b"u");
    if said != Ok(1) || nix::unistd::read(theirs.as_raw_fd(), &mut byte) != Ok(1) {
        die(sock, "init did not map the workload's user namespace");
    }
}

/// Init's side: once the workload has unshared, map its `uid` and `gid` onto init's 0 (which
/// bwrap mapped onto the caller's ids on the host), and let it go on.
fn map_workload(ours: &OwnedFd, workload: Pid, uid: u32, gid: u32, sock: RawFd) {
    let mut byte = [0u8; 1];
    if nix::unistd::read(ours.as_raw_fd(), &mut byte) != Ok(1) {
        // The workload died on its way; it reported why.
        return;
    }
    let proc = format!("/proc/{}", workload.as_raw());
    let write = |file: &str, text: String| {
        std::fs::write(format!("{proc}/{file}"), text)
            .map_err(|e| format!("cannot write the workload's {file}: {e}"))
    };
    if let Err(e) = write("setgroups", "deny".into())
        .and_then(|()| write("uid_map", format!("{uid} 0 1\n")))
        .and_then(|()| write("gid_map", format!("{gid} 0 1\n")))
    {
        // SAFETY: plain kill(2) of our own child.
        unsafe { libc::kill(workload.as_raw(), libc::SIGKILL) };
        die(sock, &e);
    }
    let _ = nix::unistd::write(ours, b"g");
}

/// Reaps what has ended; the workload's end as its report (`X` and the code, `S` and the
/// signal) once it has.
fn reap(workload: Pid) -> Option<(u8, i32)> {
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) if pid == workload => return Some((b'X', code)),
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == workload => {
                return Some((b'S', signal as i32));
            }
            Ok(WaitStatus::StillAlive) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

/// The workload has ended: so does the sandbox. As PID 1 of its namespace (native), init first
/// kills every process left and reaps them all, so when its `X` or `S` arrives the supervisor
/// knows nothing of the sandbox runs any more: it ends the session (gates, the `.git` check)
/// while the kernel still tears down init's namespaces (see `supervise.rs`). The bwrap
/// stage is not PID 1 (bwrap's own init is): its end is only the workload's, and the supervisor
/// waits for bwrap.
fn end(sock: RawFd, what: u8, code: i32, keeper: Option<Keeper>) -> ! {
    // SAFETY: getpid has no preconditions.
    if unsafe { libc::getpid() } == 1 {
        // SAFETY: kill(2) with -1 signals every process of this pid namespace but init.
        unsafe { libc::kill(-1, libc::SIGKILL) };
        // Every process of the namespace is init's child by now or is reparented to it when its
        // parent dies; __WALL counts those whose exit signal is not SIGCHLD too.
        // Until ECHILD: none left.
        while let Ok(_) | Err(nix::errno::Errno::EINTR) = waitpid(None, Some(WaitPidFlag::__WALL)) {
        }
    }
    // The supervisor and its closer hold the watches too, so this close is not the last and
    // waits out no RCU grace period. After the report it would: init's exit, which the end of
    // the session waits for, would take the last one.
    drop(keeper);
    send(sock, what, &code.to_le_bytes());
    // SAFETY: as in die(); leaving init tears down the pid namespace.
    unsafe { libc::_exit(0) }
}
