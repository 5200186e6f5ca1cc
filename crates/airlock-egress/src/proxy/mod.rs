//! The forward proxy: accepts connections on the listener it is given and serves each one on a
//! tokio task, on a runtime of its own thread.
//!
//! One request per client connection: after the response the proxy closes the connection. That
//! keeps framing simple and closes request smuggling: nothing a client sends after the first request's
//! body is ever forwarded. Clients reconnect transparently (`Connection: close` is standard HTTP/1.1).
//!
//! The request head is parsed by `httparse` (a small, fuzzed, widely used parser) rather than hyper's
//! server, because a forward proxy needs byte-exact control that hyper hides: refusing CL+TE and
//! conflicting Host headers before anything is forwarded, mapping each defect to its status (400, 405,
//! 431), and passing CONNECT tunnels, upgrades and bodies through as raw streams.

mod conn;
mod forward;
#[doc(hidden)]
pub mod fuzzing;
mod head;
mod injected;
mod relay;
mod reply;
mod response;
mod tunnel;
mod upstream;
mod via;

pub(crate) use reply::{CONFIG_FILE, refused_address};
pub use via::UpstreamProxy;

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinSet;

use airlock_config::logfile::{RotatingFile, Rotation};

use crate::log::writer::{self, Diagnostics, LogSender};
use crate::policy::EgressPolicy;

pub use head::ACCEPTED_METHODS;

/// Limits and timeouts. The defaults suit agents; tests shorten the timeouts.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// Time for a client to send its whole request head (slow clients cannot stretch it).
    pub header_timeout: Duration,
    /// Time to resolve the name and connect upstream.
    pub connect_timeout: Duration,
    /// A tunnel or a streaming request with no byte in either direction for this long is closed.
    pub idle_timeout: Duration,
    /// On shutdown, how long in-flight requests may run before they are cut.
    pub shutdown_grace: Duration,
    /// Largest request head (request line + headers); larger gets 431.
    pub max_head_bytes: usize,
    /// Most header lines; more gets 431.
    pub max_headers: usize,
    /// Most connections served at once; further ones are closed at once.
    pub max_connections: usize,
    /// Where allowed traffic goes instead of straight out (a company proxy), if anywhere.
    pub upstream_proxy: Option<UpstreamProxy>,
    /// The `[network.credentials]` rules: their hosts' CONNECTs are served with the header set.
    pub injector: Option<Arc<crate::inject::Injector>>,
    /// Ask mode: requests no rule matches wait for `airlock network monitor`.
    pub ask: Option<Arc<crate::ask::AskGate>>,
    /// When the decision log rotates (8 MiB, 3 old files kept; tests make it small).
    pub log_rotation: Rotation,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            header_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(600),
            shutdown_grace: Duration::from_secs(2),
            max_head_bytes: 64 * 1024,
            max_headers: 128,
            max_connections: 1024,
            upstream_proxy: None,
            injector: None,
            ask: None,
            log_rotation: Rotation::default(),
        }
    }
}

/// Descriptors left to the rest of the supervisor when the connection cap is sized from the limit:
/// its stdio, the launch socket, pidfd and signalfd, the decision log, tokio's epoll and eventfd,
/// and a resolver socket or two, with room to spare.
pub const RESERVED_FDS: u64 = 64;

impl ProxyConfig {
    /// The default config with the connection cap sized for a process whose soft `RLIMIT_NOFILE` is
    /// `fd_limit`: every connection holds two descriptors (client and upstream), after
    /// [`RESERVED_FDS`], and never more than the default cap. At least one connection is served.
    pub fn for_fd_limit(fd_limit: u64) -> ProxyConfig {
        let default = ProxyConfig::default();
        let fit = fd_limit.saturating_sub(RESERVED_FDS) / 2;
        let max_connections = usize::try_from(fit)
            .unwrap_or(usize::MAX)
            .clamp(1, default.max_connections);
        ProxyConfig {
            max_connections,
            ..default
        }
    }
}

/// A running proxy. [`ProxyHandle::shutdown`] (or dropping the handle) stops it.
pub struct ProxyHandle {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    local_addr: SocketAddr,
}

impl ProxyHandle {
    /// The address the proxy listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting, lets in-flight requests finish for the grace period, cuts the rest, flushes
    /// the decision log and joins the proxy's thread.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    /// Tells the proxy to stop as [`ProxyHandle::shutdown`] does, without waiting for its thread
    /// (the owner has other things to stop meanwhile); `shutdown` or the drop then joins it.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    fn stop_and_join(&mut self) {
        self.stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ProxyHandle {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// Serves the proxy on `listener` with [`ProxyConfig::default`], appending decisions to `log`. A
/// supervisor should rather use [`spawn_with`] and [`ProxyConfig::for_fd_limit`].
pub fn spawn(
    listener: std::net::TcpListener,
    policy: EgressPolicy,
    log: PathBuf,
) -> io::Result<ProxyHandle> {
    spawn_with(listener, policy, log, ProxyConfig::default())
}

/// [`spawn`] with explicit limits and timeouts. The proxy's own diagnostics go to stderr and to
/// `internal/egress.log` in the decision log's directory.
pub fn spawn_with(
    listener: std::net::TcpListener,
    policy: EgressPolicy,
    log: PathBuf,
    config: ProxyConfig,
) -> io::Result<ProxyHandle> {
    let log_file = RotatingFile::open(&log, config.log_rotation).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "cannot open the network decision log {}: {e}",
                log.display()
            ),
        )
    })?;
    let diagnostics = Arc::new(Diagnostics::open(
        &log.with_file_name("internal").join("egress.log"),
    ));
    let local_addr = listener.local_addr()?;
    listener.set_nonblocking(true)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (stop_tx, stop_rx) = oneshot::channel();
    let thread = std::thread::Builder::new()
        .name("airlock-egress".into())
        .spawn(move || {
            runtime.block_on(async move {
                let (sender, writer) = writer::start_writer(log_file, diagnostics.clone());
                match tokio::net::TcpListener::from_std(listener) {
                    Ok(listener) => {
                        if let Some(ask) = &config.ask {
                            tokio::spawn(ask.clone().serve());
                        }
                        let ctx = Arc::new(Ctx {
                            policy,
                            config,
                            log: sender,
                            diagnostics,
                        });
                        serve(listener, ctx, stop_rx).await;
                    }
                    Err(e) => {
                        diagnostics.note(&format!("the egress proxy cannot use its listener: {e}"));
                    }
                }
                let _ = writer.await;
            });
        })?;
    Ok(ProxyHandle {
        stop: Some(stop_tx),
        thread: Some(thread),
        local_addr,
    })
}

/// What every connection task shares.
pub(crate) struct Ctx {
    pub(crate) policy: EgressPolicy,
    pub(crate) config: ProxyConfig,
    pub(crate) log: LogSender,
    pub(crate) diagnostics: Arc<Diagnostics>,
}

async fn serve(listener: tokio::net::TcpListener, ctx: Arc<Ctx>, mut stop: oneshot::Receiver<()>) {
    let mut tasks = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            // Reap finished tasks so a long-lived proxy holds nothing for them.
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) if tasks.len() < ctx.config.max_connections => {
                    tasks.spawn(conn::serve_connection(stream, ctx.clone()));
                }
                Ok(_) => {} // over the limit: dropping the stream closes it
                Err(e) => {
                    // EMFILE and friends: back off briefly instead of spinning.
                    ctx.diagnostics
                        .note(&format!("the egress proxy cannot accept a connection: {e}"));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
    drop(listener);
    let grace = ctx.config.shutdown_grace;
    let _ = tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
    // Aborted tasks still log: their record is sent when it is dropped.
    tasks.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_cap_fits_the_descriptor_limit() {
        let cap = |limit| ProxyConfig::for_fd_limit(limit).max_connections;
        let default = ProxyConfig::default().max_connections;
        // The usual soft limit: 1024 descriptors hold 480 connections, not the default 1024.
        assert_eq!(cap(1024), 480);
        assert!(2 * cap(1024) as u64 + RESERVED_FDS <= 1024);
        assert_eq!(cap(524_288), default);
        assert_eq!(cap(u64::MAX), default);
        assert_eq!(cap(0), 1);
        assert_eq!(cap(RESERVED_FDS + 3), 1);
    }
}
