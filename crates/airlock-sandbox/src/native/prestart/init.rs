//! The prestarted init's side: its id maps, the root built ahead, the network namespace the
//! starter makes, the plan that comes ahead of `G`, and the setup made while it waits.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use super::{NET, NET_WAIT_MS, PLAN};
use crate::native::child::{self, ChildPlan};
use crate::native::setup::Setup;
use crate::native::{ahead, launch, net, stage, sys};

/// A prestarted init's entry point: cloned before its sandbox was planned, it writes its id maps
/// (`ids` onto themselves), builds the root of `record` ahead when the starter opened one,
/// waits for `G` with its plan (a memfd: the tty, the descriptor limit, the spec, as the bwrap
/// stage gets it), then goes on as [`child::main`] does, its root already built when it was built
/// ahead.
///
/// `net_later`: init was cloned without its network namespace. It then joins the one the
/// starter makes before it reports its root, and never goes on without it: a `G` before that
/// ends it.
pub(super) fn init_main(
    sock: OwnedFd,
    net_later: bool,
    record: Option<OwnedFd>,
    (uid, gid): (u32, u32),
    cpus: Option<nix::sched::CpuSet>,
) -> ! {
    let fd = sock.as_raw_fd();
    // SAFETY: as in die(): this init is of no use; the supervisor clones another.
    let give_up = || -> ! { unsafe { libc::_exit(child::SETUP_FAILED) } };
    child::detach(fd);
    // Before anything opens a file of the user's: unmapped, init could not.
    if let Err(e) = launch::write_own_id_maps(uid, gid) {
        child::die(fd, &e.to_string())
    }
    // Its namespaces, looked up where `/proc` is now: a root built ahead but for its overlays
    // has none until `G`.
    let ns = net::NsDir::open();
    let host_net = net_later.then(|| ns.net().ok());
    // The plan when it came ahead of `G` (`Q`), decoded while init waited, and what init made
    // of its setup meanwhile (in a root built ahead only).
    let mut planned: Option<ChildPlan> = None;
    let mut setup: Option<Setup> = None;
    let built = record.is_some();
    // The root's persistent overlays, mounted after `G`: its setup is made then too.
    let mut deferred = None;
    if let Some(record) = record {
        let Some((report, later)) = ahead::build(record) else {
            child::send(fd, ahead::BUILT, &[]);
            give_up()
        };
        deferred = later;
        // Made ahead only in a root init is in already.
        let mut ahead_setup = deferred.is_none().then_some(&mut setup);
        if let Some(host) = host_net
            && !join_own_net(fd, host, &ns, &mut planned, &mut ahead_setup)
        {
            child::send(fd, ahead::BUILT, &[]);
            give_up()
        }
        child::send(fd, ahead::BUILT, &report);
        // In its own network namespace now (or the host's, for a sandbox on it), while the
        // supervisor checks the report.
        if let Some(plan) = planned.as_ref().filter(|_| deferred.is_none()) {
            prepare_ahead(plan, &mut setup, &ns, host_net);
        }
    }
    loop {
        let Some((head, file)) = next_message(fd) else {
            give_up()
        };
        match (head[0], file) {
            (PLAN, Some(file)) if planned.is_none() => {
                let plan = stage::read_plan(file, fd).1;
                if built && deferred.is_none() {
                    prepare_ahead(&plan, &mut setup, &ns, host_net);
                }
                planned = Some(plan);
            }
            (child::GO, file) if built || !net_later => {
                // A handle into the host's `/proc`: not kept while the sandbox runs.
                drop(ns);
                // A setup made ahead is of the plan that came with `Q`; a plan that comes with
                // `G` has its setup made now.
                let (mut plan, setup) = match (file, planned) {
                    (Some(file), _) => (stage::read_plan(file, fd).1, None),
                    (None, Some(plan)) => (plan, setup),
                    (None, None) => give_up(),
                };
                plan.cpus = cpus;
                if let Some(deferred) = deferred.take()
                    && let Err(e) = deferred.finish()
                {
                    child::die(fd, &e.to_string());
                }
                match (built, setup) {
                    (true, Some(setup)) => child::init(&plan, fd, setup),
                    (true, None) => child::init_in_root(&plan, fd),
                    (false, _) => {}
                }
                child::build_and_init(&plan, fd)
            }
            _ => give_up(),
        }
    }
}

/// Joins the network namespace the starter made (`M`), or makes one when the starter could not
/// (or sent nothing in [`NET_WAIT_MS`]); checks it is not `host`'s, the one init was cloned in.
/// A plan the supervisor sends meanwhile (`Q`) is decoded into `planned`, and its setup made
/// ahead into `setup` when given.
fn join_own_net(
    sock: RawFd,
    host: Option<u64>,
    ns: &net::NsDir,
    planned: &mut Option<ChildPlan>,
    setup: &mut Option<&mut Option<Setup>>,
) -> bool {
    use nix::sched::{CloneFlags, setns, unshare};
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(NET_WAIT_MS.into());
    let sent = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let mut fds = [nix::poll::PollFd::new(
            // SAFETY: the launch socket outlives this call.
            unsafe { std::os::fd::BorrowedFd::borrow_raw(sock) },
            nix::poll::PollFlags::POLLIN,
        )];
        let wait = u16::try_from(left.as_millis()).unwrap_or(NET_WAIT_MS);
        match nix::poll::poll(&mut fds, wait) {
            Ok(1) => match next_message(sock) {
                Some(([NET, _], net)) => break net,
                Some(([PLAN, _], Some(file))) if planned.is_none() => {
                    let plan = stage::read_plan(file, sock).1;
                    if let Some(setup) = setup.as_deref_mut() {
                        prepare_ahead(&plan, setup, ns, Some(host));
                    }
                    *planned = Some(plan);
                }
                _ => return false,
            },
            Err(nix::errno::Errno::EINTR) => {}
            _ => break None,
        }
    };
    let joined = match sent {
        Some(net) => setns(&net, CloneFlags::CLONE_NEWNET),
        None => unshare(CloneFlags::CLONE_NEWNET),
    };
    match (joined, host, ns.net()) {
        (Ok(()), Some(host), Ok(now)) => now != host,
        _ => false,
    }
}

/// Makes what init can of its setup before `G`, in a root built ahead ([`Setup`]): the local part
/// once, the network part once init is in the namespace it keeps: never in `cloned_in`, the one it
/// was cloned in when the starter makes its own (the host's; `Some(None)`: unknown, so not yet).
/// A part that fails is dropped, to be made again after `G`, where a failure is reported (`E`)
/// as a fresh init's is.
fn prepare_ahead(
    plan: &ChildPlan,
    setup: &mut Option<Setup>,
    ns: &net::NsDir,
    cloned_in: Option<Option<u64>>,
) {
    if setup.is_none() {
        *setup = Setup::local(plan).ok();
    }
    let in_own_net = match cloned_in {
        None => true,
        Some(host) => host.is_some() && ns.net().ok() != host,
    };
    if in_own_net
        && let Some(made) = setup.as_mut()
        && made.network(plan).is_err()
    {
        *setup = None;
    }
}

/// The head of one message (one or two bytes) and the descriptor it carries, if any, from the
/// launch socket; `None` for anything else (the supervisor's end).
fn next_message(sock: RawFd) -> Option<([u8; 2], Option<OwnedFd>)> {
    let mut head = [0u8; 2];
    let (n, fd) = sys::recv_with_fd(sock, &mut head, nix::sys::socket::MsgFlags::empty()).ok()?;
    (1..=2).contains(&n).then_some((head, fd))
}
