//! What init makes ready in the sandbox's root before the workload may start ([`child::init`]):
//! the signalfd, the keeper, the terminal, the bwrap stage's handshake and the bounding set
//! ([`Setup::local`]), and the inside of the network namespace: the loopback, the egress listener
//! ([`Setup::network`]).
//!
//! A freshly cloned init makes it all after `G`. One whose root was built ahead
//! ([`super::prestart`]) makes it while it waits: the local part as soon as it has the plan (`Q`)
//! and its root, the network part once it has joined its network namespace and reported `B`. What
//! it made reaches the supervisor only after `G` ([`Setup::announce`]: the listener `L`, the
//! watches `N` and what the keeper hid, the terminal `T`, in the order a fresh init sends them), so
//! a root the supervisor refuses never had anything served; init is killed, and what it made goes
//! with it. Nothing here writes to a host file.
//!
//! [`child::init`]: super::child::init

use std::os::fd::{AsRawFd, OwnedFd};

use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

use super::child::{ChildPlan, FORWARDED, send_fd};
use super::keeper::Keeper;
use super::{caps, net, tty};
use airlock_config::NetworkMode;

/// Init's setup, made and not yet handed over (see the module).
pub(super) struct Setup {
    pub sfd: SignalFd,
    pub keeper: Option<Keeper>,
    /// The terminal's master (for the supervisor) and slave (for the workload).
    master: Option<OwnedFd>,
    pub slave: Option<OwnedFd>,
    /// The bwrap stage's socket pair for the workload's own user namespace.
    pub handshake: Option<(OwnedFd, OwnedFd)>,
    pub bounding_dropped: bool,
    /// Whether [`Setup::network`] ran.
    network_ready: bool,
    listener: Option<OwnedFd>,
}

impl Setup {
    /// The part that needs the root and the plan only.
    pub fn local(plan: &ChildPlan) -> Result<Setup, String> {
        let mut mask = SigSet::empty();
        for s in FORWARDED {
            mask.add(s);
        }
        mask.add(Signal::SIGCHLD);
        // The parent blocked these before the clone, so none is lost before the signalfd exists.
        let sfd = SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
            .map_err(|e| format!("cannot create a signalfd: {e}"))?;
        // Everything the rules name is hidden, and every directory watched, before the workload
        // runs.
        let keeper = plan
            .hide
            .as_ref()
            .map(Keeper::start)
            .transpose()
            .map_err(|e| e.0)?;
        let (master, slave) = match plan.tty.as_ref().map(tty::open).transpose() {
            Ok(Some((master, slave))) => (Some(master), Some(slave)),
            Ok(None) => (None, None),
            Err(e) => return Err(format!("cannot open a terminal for the sandbox: {e}")),
        };
        let handshake = plan
            .own_user_ns
            .map(|_| {
                nix::sys::socket::socketpair(
                    nix::sys::socket::AddressFamily::Unix,
                    nix::sys::socket::SockType::Stream,
                    None,
                    nix::sys::socket::SockFlag::SOCK_CLOEXEC,
                )
                .map_err(|e| format!("cannot create a socket pair: {e}"))
            })
            .transpose()?;
        // The bounding set goes while init may still wait for `R`: the workload inherits it and
        // drops only the rest. Init execs nothing, so it loses nothing it uses. (The bwrap stage's
        // workload enters a user namespace of its own and drops everything there.)
        let bounding_dropped =
            handshake.is_none() && caps::drop_bounding_set(plan.last_cap).is_ok();
        Ok(Setup {
            sfd,
            keeper,
            master,
            slave,
            handshake,
            bounding_dropped,
            network_ready: false,
            listener: None,
        })
    }

    /// The inside of the network namespace init is in: the loopback up, and in proxy mode the
    /// egress listener. Once.
    pub fn network(&mut self, plan: &ChildPlan) -> Result<(), String> {
        if self.network_ready {
            return Ok(());
        }
        if plan.network != NetworkMode::Host {
            net::loopback_up()
                .map_err(|e| format!("cannot bring up the loopback interface: {e}"))?;
        }
        if plan.network == NetworkMode::Proxy {
            // Best effort: an older kernel keeps 64 KiB packets, which only costs speed.
            let _ = net::loopback_big_packets();
            // The supervisor serves the proxy on this socket: it is reachable from inside this
            // network namespace only, and no forwarder process runs in the sandbox.
            let listener = net::egress_listener(net::EGRESS_PORT).map_err(|e| {
                format!(
                    "cannot open the egress listener on 127.0.0.1:{}: {e}",
                    net::EGRESS_PORT
                )
            })?;
            self.listener = Some(listener.into());
        }
        self.network_ready = true;
        Ok(())
    }

    /// Hands the supervisor what it serves or relays: the egress listener (`L`), the watches
    /// (`N`, which the supervisor holds too, so init's exit does not pay for tearing them down:
    /// an inotify instance's last close waits out an RCU grace period, ~15 ms) and what the keeper
    /// hid, the terminal's master (`T`). Init keeps none of the listener or the master.
    pub fn announce(&mut self, sock: std::os::fd::RawFd) {
        if let Some(listener) = self.listener.take() {
            send_fd(sock, b'L', listener.as_raw_fd(), "the egress listener");
        }
        if let Some(k) = &self.keeper {
            send_fd(sock, b'N', k.fd().as_raw_fd(), "the directory watches");
        }
        if let Some(k) = self.keeper.as_mut() {
            k.report(sock);
        }
        if let Some(master) = self.master.take() {
            send_fd(sock, b'T', master.as_raw_fd(), "the terminal");
        }
    }
}
