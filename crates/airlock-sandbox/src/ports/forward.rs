//! One forward: its listeners, the thread that accepts on them, and where each connection goes.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use super::protocol::ForwardInfo;
use super::relay::{self, Pair};
use super::{Shared, Wake};

/// How long connecting to the far side may take (both sides are loopback: refused or at once).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where the connections a forward accepts are relayed to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target {
    /// `127.0.0.1:<port>` in the sandbox's network namespace (inbound forwards).
    Sandbox(u16),
    /// The host's `127.0.0.1:<port>` (outbound forwards).
    Host(u16),
}

/// How long a callback forward still accepts after its first answered connection has closed.
pub const FOLLOW_UP_GRACE: Duration = Duration::from_secs(5);

/// When a forward ends before the session does (callback forwards).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Ends {
    pub deadline: Option<Instant>,
    /// [`FOLLOW_UP_GRACE`] after the first connection that carried an answer from the sandbox
    /// has closed.
    pub after_first_answer: bool,
}

/// A live forward, as the session holds it.
pub(crate) struct Live {
    pub id: u64,
    pub info: ForwardInfo,
    pub deadline: Option<Instant>,
    /// Fired by `airlock forward --remove`: the accept loop returns and drops its listeners.
    pub close: Arc<Wake>,
    pub thread: Option<std::thread::JoinHandle<()>>,
}

impl Live {
    /// Its info with the seconds it has left.
    pub fn info_now(&self) -> ForwardInfo {
        ForwardInfo {
            expires_in_secs: self
                .deadline
                .map(|d| d.saturating_duration_since(Instant::now()).as_secs()),
            ..self.info.clone()
        }
    }
}

/// Why a host port cannot be listened on, in words that say what to do.
pub(crate) fn bind_error(port: u16, e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EADDRINUSE) => format!(
            "the host's 127.0.0.1:{port} is in use (by another program, or another sandbox's \
             forward); stop what listens there (`ss -ltnp 'sport = :{port}'` names it) or choose \
             another host port"
        ),
        Some(libc::EACCES) => format!(
            "listening on the host's port {port} needs privileges; choose a host port from 1024 up"
        ),
        _ => format!("cannot listen on the host's 127.0.0.1:{port}: {e}"),
    }
}

/// Listens on the host's `127.0.0.1:<port>` (never 0.0.0.0), and on `[::1]:<port>` too when
/// `also_v6` and the host has IPv6 loopback (a browser given `localhost` may try it first).
/// No SO_REUSEPORT: a port something else listens on is refused, never shared.
pub(crate) fn bind_host(port: u16, also_v6: bool) -> Result<Vec<TcpListener>, String> {
    let v4 = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
        .map_err(|e| bind_error(port, &e))?;
    let mut listeners = vec![v4];
    if also_v6 {
        match TcpListener::bind(SocketAddr::from((Ipv6Addr::LOCALHOST, port))) {
            Ok(v6) => listeners.push(v6),
            // No IPv6 loopback here: 127.0.0.1 alone it is.
            Err(e) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) => {}
            Err(e) if e.raw_os_error() == Some(libc::EAFNOSUPPORT) => {}
            Err(e) => return Err(bind_error(port, &e)),
        }
    }
    Ok(listeners)
}

/// Listens on `127.0.0.1:<port>` inside the sandbox's network namespace. `IP_FREEBIND`: the
/// sandbox's `lo` may not be up yet (its init brings it up once the supervisor lets it go).
pub(crate) fn bind_sandbox(shared: &Shared, port: u16) -> Result<TcpListener, String> {
    let fail = |e: io::Error| format!("cannot listen on 127.0.0.1:{port} inside the sandbox: {e}");
    let netns = shared.netns()?;
    let fd = netns.socket().map_err(fail)?;
    let on: libc::c_int = 1;
    let addr = sockaddr(port);
    // SAFETY: valid option values and a sockaddr_in of the right length, on our own socket.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&on as *const libc::c_int).cast(),
            4,
        );
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_FREEBIND,
            (&on as *const libc::c_int).cast(),
            4,
        );
        if libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        ) != 0
            || libc::listen(fd.as_raw_fd(), 128) != 0
        {
            return Err(fail(io::Error::last_os_error()));
        }
    }
    Ok(TcpListener::from(fd))
}

fn sockaddr(port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(Ipv4Addr::LOCALHOST).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// Connects a socket of the sandbox's network namespace to `127.0.0.1:<port>` there.
fn connect_in_sandbox(shared: &Shared, port: u16) -> io::Result<TcpStream> {
    let netns = shared.netns().map_err(io::Error::other)?;
    let fd: OwnedFd = netns.socket()?;
    let addr = sockaddr(port);
    loop {
        // SAFETY: a sockaddr_in of the right length, on our own socket. Loopback: no waiting.
        let rc = unsafe {
            libc::connect(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            return Ok(TcpStream::from(fd));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Starts the thread that accepts on `listeners` and relays each connection to `target`, until
/// the session ends, the forward is removed ([`Live::close`]), or `ends` says so.
pub(crate) fn spawn(
    shared: &Arc<Shared>,
    listeners: Vec<TcpListener>,
    target: Target,
    info: ForwardInfo,
    ends: Ends,
) -> Result<Live, String> {
    for l in &listeners {
        l.set_nonblocking(true)
            .map_err(|e| format!("cannot set up the listener: {e}"))?;
    }
    let id = shared.next_id();
    let eventfd = || Wake::new().map_err(|e| format!("cannot make an eventfd: {e}"));
    let wake = Arc::new(eventfd()?);
    let close = Arc::new(eventfd()?);
    let (s, w, c) = (Arc::clone(shared), Arc::clone(&wake), Arc::clone(&close));
    let thread = std::thread::Builder::new()
        .name("airlock-forward".into())
        .spawn(move || {
            accept_loop(&s, &listeners, target, ends, &w, &c);
            drop(listeners);
            s.forget(id);
        })
        .map_err(|e| format!("cannot start the forward's thread: {e}"))?;
    Ok(Live {
        id,
        deadline: ends.deadline,
        info,
        close,
        thread: Some(thread),
    })
}

fn accept_loop(
    shared: &Arc<Shared>,
    listeners: &[TcpListener],
    target: Target,
    ends: Ends,
    wake: &Arc<Wake>,
    close: &Wake,
) {
    let mut deadline = ends.deadline;
    // Set once a connection that carried an answer has closed (the wake fired).
    let mut answered = false;
    loop {
        let timeout = match deadline {
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return;
                }
                PollTimeout::try_from(left.as_millis().min(60_000) as i32 + 1)
                    .unwrap_or(PollTimeout::MAX)
            }
            None => PollTimeout::NONE,
        };
        let mut fds: Vec<PollFd<'_>> = listeners
            .iter()
            .map(|l| PollFd::new(l.as_fd(), PollFlags::POLLIN))
            .collect();
        fds.push(PollFd::new(shared.stop.fd(), PollFlags::POLLIN));
        fds.push(PollFd::new(close.fd(), PollFlags::POLLIN));
        if !answered {
            fds.push(PollFd::new(wake.fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, timeout) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(_) => return,
        }
        let ready: Vec<bool> = fds
            .iter()
            .map(|f| f.revents().is_some_and(|r| !r.is_empty()))
            .collect();
        drop(fds);
        if ready[listeners.len()] || ready[listeners.len() + 1] {
            return;
        }
        if ready.get(listeners.len() + 2) == Some(&true) {
            // The login's follow-up request (codex redirects its callback to /success) may
            // come on a new connection: a short grace, then the listener closes.
            answered = true;
            let grace = Instant::now() + FOLLOW_UP_GRACE;
            deadline = Some(deadline.map_or(grace, |d| d.min(grace)));
        }
        for (listener, _) in listeners.iter().zip(&ready).filter(|(_, r)| **r) {
            while let Ok((client, _)) = listener.accept() {
                connection(shared, client, target, ends, wake);
            }
        }
    }
}

/// One accepted connection: refused over the cap, else relayed on a thread of its own.
fn connection(
    shared: &Arc<Shared>,
    client: TcpStream,
    target: Target,
    ends: Ends,
    wake: &Arc<Wake>,
) {
    if !shared.conns.has_room() || client.set_nonblocking(false).is_err() {
        return;
    }
    let (s, w) = (Arc::clone(shared), Arc::clone(wake));
    let spawned = std::thread::Builder::new()
        .name("airlock-relay".into())
        .stack_size(relay::THREAD_STACK)
        .spawn(move || {
            let far = match target {
                Target::Sandbox(port) => connect_in_sandbox(&s, port),
                Target::Host(port) => TcpStream::connect_timeout(
                    &SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
                    CONNECT_TIMEOUT,
                ),
            };
            // Nothing listens there (yet): the client sees its connection closed.
            let Ok(far) = far else { return };
            let _ = far.set_nodelay(true);
            let _ = client.set_nodelay(true);
            let Some(pair) = s.conns.admit(Pair { a: client, b: far }) else {
                return;
            };
            let (_, answered) = relay::relay(pair);
            if ends.after_first_answer && answered > 0 {
                w.fire();
            }
        });
    drop(spawned);
}
