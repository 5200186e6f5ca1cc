//! Port forwards and the session's control socket, served by the supervisor.
//!
//! - **Inbound** (`[[network.ports]] direction = "in"`, `run --publish`, `airlock forward`): a
//!   listener on the host's `127.0.0.1:<host>` (never 0.0.0.0); each connection is relayed to
//!   `127.0.0.1:<sandbox>` inside the sandbox's network namespace, through a socket made there
//!   ([`netns`] says how and why a helper process makes it).
//! - **Outbound** (`direction = "out"`): a listener on `127.0.0.1:<sandbox>` inside the sandbox's
//!   network namespace, each connection relayed to the host's `127.0.0.1:<host>`.
//! - **Callback forwards**: an inbound forward the host bridge asks for when a sandbox opens an
//!   OAuth URL whose callback is `http://localhost:<port>`. It ends after
//!   [`CALLBACK_LIFETIME`] or [`FOLLOW_UP_GRACE`] after the first connection that carried an
//!   answer from the sandbox has closed (a login's follow-up page may come on a new connection),
//!   whichever is first; a session holds at most [`MAX_CALLBACKS`] at once, on ports from 1024
//!   up.
//! - **The control socket** ([`control`]): `<state dir>/run/<pid>.sock` in a host-only 0700
//!   directory, answering only the session's own uid, one line each way ([`protocol`]); beside it
//!   the session record `<pid>.json` that `airlock sessions` lists ([`sessions`]).
//!
//! Host listeners of the launch are bound before the sandbox runs anything, so a port in use
//! fails the launch. Everything ends with the session: [`PortService`]'s drop closes every
//! listener, shuts every relayed connection, stops the helper and removes the socket and record.

mod control;
pub(crate) use control::bind_private;
mod forward;
mod netns;
pub mod protocol;
mod relay;
pub mod sessions;

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use airlock_config::NetworkMode;
use airlock_config::ports::PortDirection;

use crate::spec::SandboxSpec;
pub use forward::FOLLOW_UP_GRACE;
use forward::{Ends, Live, Target};
pub use netns::HELPER_NAME;
pub use protocol::{AskError, ForwardInfo, ForwardKind, Request, ask};
pub use relay::MAX_CONNECTIONS;

/// How long a callback forward lives at most.
pub const CALLBACK_LIFETIME: Duration = Duration::from_secs(600);
/// How many callback forwards one session holds at once.
pub const MAX_CALLBACKS: usize = 4;
/// How many forwards one session holds at once (all kinds).
pub const MAX_FORWARDS: usize = 64;
/// The lowest port a callback forward may listen on: OAuth loopback callbacks use high ports, and
/// a sandbox never gets a privileged port of the host, even from a supervisor run as root.
pub const MIN_CALLBACK_PORT: u16 = 1024;

/// The control socket's file name for the supervisor `pid`.
pub fn socket_name(pid: u32) -> String {
    format!("{pid}.sock")
}

/// An eventfd that is readable once fired, for ever: wakes the threads that poll it.
pub(crate) struct Wake(OwnedFd);

impl Wake {
    fn new() -> std::io::Result<Wake> {
        // SAFETY: plain eventfd creation; the descriptor is owned right below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: just created, ours alone.
        Ok(Wake(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    fn fire(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: eight bytes from a valid buffer; a full counter (impossible here) only fails.
        unsafe { libc::write(self.0.as_raw_fd(), one.as_ptr().cast(), 8) };
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// What the forwards, the relays and the control socket of one session share.
pub(crate) struct Shared {
    network: NetworkMode,
    netns: Option<netns::Netns>,
    forwards: Mutex<Vec<Live>>,
    conns: relay::Registry,
    stop: Wake,
    ids: AtomicU64,
}

impl Shared {
    fn netns(&self) -> Result<&netns::Netns, String> {
        self.netns.as_ref().ok_or_else(|| {
            "this sandbox uses the host's network (--network host): a server on 127.0.0.1:PORT \
             inside already is the host's 127.0.0.1:PORT, so nothing is forwarded"
                .to_owned()
        })
    }

    fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Live>> {
        self.forwards.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A forward's thread, on its way out.
    fn forget(&self, id: u64) {
        self.lock().retain(|l| l.id != id);
    }

    /// The live forwards.
    pub fn infos(&self) -> Vec<ForwardInfo> {
        self.lock().iter().map(Live::info_now).collect()
    }

    /// `airlock forward HOST:SANDBOX`: an inbound forward until the session ends.
    fn open_forward(self: &Arc<Self>, host: u16, sandbox: u16) -> Result<String, String> {
        self.open_inbound(host, sandbox, ForwardKind::Forward, Ends::default())?;
        Ok(format!(
            "the host's 127.0.0.1:{host} now reaches 127.0.0.1:{sandbox} in the sandbox, until \
             the session ends"
        ))
    }

    /// The bridge's callback forward for `port`: bounded in time, count and port range.
    fn open_callback(self: &Arc<Self>, port: u16) -> Result<String, String> {
        self.netns()?;
        if port < MIN_CALLBACK_PORT {
            return Err(format!(
                "callback port {port} is below {MIN_CALLBACK_PORT}; no callback forward is made \
                 on a privileged port"
            ));
        }
        let ends = Ends {
            deadline: Some(Instant::now() + CALLBACK_LIFETIME),
            after_first_answer: true,
        };
        self.open_inbound(port, port, ForwardKind::Callback, ends)?;
        Ok(format!(
            "the host's localhost:{port} reaches 127.0.0.1:{port} in the sandbox until its first \
             answered request (and {} s more), {} minutes at most",
            FOLLOW_UP_GRACE.as_secs(),
            CALLBACK_LIFETIME.as_secs() / 60
        ))
    }

    /// Opens an inbound forward made after launch, within the session's caps. Checked and
    /// added under one lock, so concurrent requests cannot pass a cap together.
    fn open_inbound(
        self: &Arc<Self>,
        host: u16,
        sandbox: u16,
        kind: ForwardKind,
        ends: Ends,
    ) -> Result<(), String> {
        self.netns()?;
        if self.network == NetworkMode::Proxy && sandbox == crate::native::EGRESS_PORT {
            // The egress proxy is the sandbox's alone: opened on the host, any local user could
            // use it (and spend the sandbox's policy).
            return Err(format!(
                "127.0.0.1:{sandbox} inside the sandbox is the egress proxy's; choose another \
                 sandbox port"
            ));
        }
        let mut forwards = self.lock();
        let callbacks = forwards
            .iter()
            .filter(|l| l.info.kind == ForwardKind::Callback)
            .count();
        if kind == ForwardKind::Callback && callbacks >= MAX_CALLBACKS {
            return Err(format!(
                "this session already holds {MAX_CALLBACKS} callback forwards, the most it may \
                 at once; each ends after its first answered request or {} minutes",
                CALLBACK_LIFETIME.as_secs() / 60
            ));
        }
        if forwards.len() >= MAX_FORWARDS {
            return Err(format!(
                "this session already holds {MAX_FORWARDS} forwards, the most it may"
            ));
        }
        // A callback's browser may be given `localhost`, which it may try as [::1] first.
        let listeners = forward::bind_host(host, kind == ForwardKind::Callback)?;
        let info = ForwardInfo {
            host,
            sandbox,
            direction: PortDirection::In,
            kind,
            expires_in_secs: None,
        };
        forwards.push(forward::spawn(
            self,
            listeners,
            Target::Sandbox(sandbox),
            info,
            ends,
        )?);
        Ok(())
    }

    /// `airlock forward --remove HOST`: closes the inbound forward listening on the host's
    /// `127.0.0.1:<host>` (whatever made it). Its listeners are closed on return; connections it
    /// relays already go on until they close (they belong to the session's registry).
    fn remove_forward(&self, host: u16) -> Result<String, String> {
        let found = {
            let mut forwards = self.lock();
            let at = forwards
                .iter()
                .position(|l| l.info.direction == PortDirection::In && l.info.host == host);
            match at {
                Some(at) => forwards.remove(at),
                None => return Err(self.no_such_forward(&forwards, host)),
            }
        };
        found.close.fire();
        let mut found = found;
        if let Some(thread) = found.thread.take() {
            // Not under the lock: the thread takes it to forget itself.
            let _ = thread.join();
        }
        Ok(format!(
            "the host's 127.0.0.1:{host} no longer reaches 127.0.0.1:{} in the sandbox ({} \
             forward removed); connections already open go on until they close",
            found.info.sandbox,
            found.info.kind.as_str()
        ))
    }

    fn no_such_forward(&self, forwards: &[Live], host: u16) -> String {
        if forwards
            .iter()
            .any(|l| l.info.direction == PortDirection::Out && l.info.host == host)
        {
            return format!(
                "the host's port {host} is an outbound forward's target (direction = \"out\"), \
                 which lasts as long as the session; --remove takes the host port of an inbound \
                 forward"
            );
        }
        let inbound: Vec<String> = forwards
            .iter()
            .filter(|l| l.info.direction == PortDirection::In)
            .map(|l| format!("{}→{}", l.info.host, l.info.sandbox))
            .collect();
        if inbound.is_empty() {
            format!("this session forwards no host port {host}: it has no inbound forwards")
        } else {
            format!(
                "this session forwards no host port {host}; its inbound forwards: {}",
                inbound.join(", ")
            )
        }
    }

    /// Ends every forward: their threads are joined, so their listeners are closed on return.
    fn end_all(&self) {
        self.stop.fire();
        let lives = std::mem::take(&mut *self.lock());
        for mut live in lives {
            if let Some(thread) = live.thread.take() {
                let _ = thread.join();
            }
        }
        self.conns.shut_all();
    }
}

/// The forwards and the control socket of one running sandbox; dropping it ends them all.
pub struct PortService {
    shared: Arc<Shared>,
    /// The control socket's directory and this session's record, until [`PortService::serve`]
    /// opens them.
    pending_control: Option<(std::path::PathBuf, sessions::SessionRecord)>,
    control: Option<control::Server>,
    warnings: Vec<String>,
}

impl PortService {
    /// Makes the launch's forwards, for the sandbox whose init is `init`. Called by the supervisor
    /// after the clone and before the sandbox runs anything; an error (a host port in use, the
    /// sandbox's network namespace unreachable) stops the launch. The control socket and the
    /// session's record come with [`PortService::serve`].
    pub fn start(spec: &SandboxSpec, init: libc::pid_t) -> Result<PortService, String> {
        let session = sessions::SessionRecord::of_this_process(
            &spec.name,
            &spec.project,
            spec.network,
            spec.ports.control_dir.as_deref(),
        );
        PortService::start_for(&session, &spec.ports, init)
    }

    /// [`PortService::start`] for a session described by `session` (this process's record).
    pub(crate) fn start_for(
        session: &sessions::SessionRecord,
        ports: &crate::spec::PortsSpec,
        init: libc::pid_t,
    ) -> Result<PortService, String> {
        let netns = match session.network {
            NetworkMode::Host => None,
            _ => Some(netns::Netns::open(init).map_err(|e| {
                format!("cannot open the sandbox's network namespace (/proc/{init}/ns): {e}")
            })?),
        };
        let shared = Arc::new(Shared {
            network: session.network,
            netns,
            forwards: Mutex::new(Vec::new()),
            conns: relay::Registry::default(),
            stop: Wake::new().map_err(|e| format!("cannot make an eventfd: {e}"))?,
            ids: AtomicU64::new(0),
        });
        let mut service = PortService {
            shared,
            pending_control: ports.control_dir.clone().map(|dir| (dir, session.clone())),
            control: None,
            warnings: Vec::new(),
        };
        service.open_launch_forwards(&ports.forwards)?;
        Ok(service)
    }

    fn open_launch_forwards(
        &mut self,
        forwards: &[crate::spec::PortForward],
    ) -> Result<(), String> {
        if forwards.is_empty() {
            return Ok(());
        }
        let shared = &self.shared;
        // Every host port first: one in use stops the launch before anything else is made.
        let mut bound = Vec::new();
        for f in forwards.iter().filter(|f| f.direction == PortDirection::In) {
            let listeners =
                forward::bind_host(f.host, false).map_err(|e| format!("{}: {e}", f.origin))?;
            bound.push((f, listeners));
        }
        // While the supervisor is single-threaded, as forking is simplest then.
        shared
            .netns()?
            .start()
            .map_err(|e| format!("cannot make the forwards: {e}"))?;
        for f in forwards
            .iter()
            .filter(|f| f.direction == PortDirection::Out)
        {
            let listener = forward::bind_sandbox(shared, f.sandbox)
                .map_err(|e| format!("{}: {e}", f.origin))?;
            bound.push((f, vec![listener]));
        }
        let mut lives = Vec::new();
        for (f, listeners) in bound {
            let kind = if f.origin.starts_with("--publish") {
                ForwardKind::Publish
            } else {
                ForwardKind::Config
            };
            let target = match f.direction {
                PortDirection::In => Target::Sandbox(f.sandbox),
                PortDirection::Out => Target::Host(f.host),
            };
            let info = ForwardInfo {
                host: f.host,
                sandbox: f.sandbox,
                direction: f.direction,
                kind,
                expires_in_secs: None,
            };
            lives.push(forward::spawn(
                shared,
                listeners,
                target,
                info,
                Ends::default(),
            )?);
        }
        shared.lock().extend(lives);
        Ok(())
    }

    /// What to tell the developer once the sandbox runs (a control socket that could not open).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }
}

impl PortService {
    /// Opens the control socket, writes the session's record and starts the socket's thread:
    /// called once the workload may run (binding a socket and writing a file here took ~0.23 ms,
    /// which the workload's start no longer waits for). A socket that cannot be bound or a thread
    /// that cannot start leaves a warning, and the socket and the record are removed: the forwards
    /// stand without them.
    pub fn serve(&mut self) {
        if let Some((dir, session)) = self.pending_control.take() {
            match control::Server::start(&dir, &session) {
                Ok(server) => self.control = Some(server),
                Err(e) => self.warnings.push(no_control(&e)),
            }
        }
        let failed = match self.control.as_mut() {
            Some(control) => control.serve(&self.shared).err(),
            None => None,
        };
        if let Some(e) = failed {
            if let Some(control) = self.control.take() {
                control.remove();
            }
            self.warnings.push(no_control(&e));
        }
    }

    /// Tells the control socket's and the forwards' threads to stop, without waiting: they wind
    /// down while the supervisor ends the other gates; dropping the service then joins them.
    pub fn wind_down(&self) {
        self.shared.stop.fire();
    }
}

/// The warning for a session without its control socket.
fn no_control(e: &str) -> String {
    format!(
        "{e}; `airlock forward`, `airlock sessions` and OAuth callbacks through the bridge do \
         not reach this session"
    )
}

impl Drop for PortService {
    fn drop(&mut self) {
        // The control socket first, so no forward is added while the others end.
        if let Some(control) = self.control.take() {
            control.stop(&self.shared);
        }
        self.shared.end_all();
        if let Some(netns) = &self.shared.netns {
            netns.stop();
        }
    }
}

#[cfg(test)]
mod tests;
