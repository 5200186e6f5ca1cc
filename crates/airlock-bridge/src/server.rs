//! The HTTP server: hyper's HTTP/1.1 on a unix socket and a 127.0.0.1 TCP listener, the route
//! dispatch, the audit line of each decision, the server timeouts and graceful shutdown.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body, Incoming};
use hyper::{Method, Request, Response, StatusCode, header};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, UnixListener};

use crate::gate;
use crate::routes::{self, BridgeRoute, Reply, ReplyBody};
use crate::state::BridgeState;

/// The whole request head must arrive within this (hyper also runs it while a kept-alive connection
/// waits for its next request, so an idle connection is closed after this too).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// A response write that makes no progress for this long closes the connection.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long open requests may finish after SIGTERM.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// The most connections served at once; more wait in the listen backlog until one closes (an
/// idle one closes after [`HEADER_TIMEOUT`]). Below the fd limit (see [`connection_cap`]), so
/// accept() does not fail for want of descriptors.
pub const MAX_CONNECTIONS: usize = 4096;

/// The connection cap for this process: [`MAX_CONNECTIONS`], or less when the soft fd limit (which
/// the daemon raises to the hard one at start) leaves less room, keeping 64 for everything else.
pub fn connection_cap() -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid out-pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return 256;
    }
    let room = usize::try_from(limit.rlim_cur)
        .unwrap_or(usize::MAX)
        .saturating_sub(64);
    room.clamp(16, MAX_CONNECTIONS)
}
/// How long one connection may live, whatever it does: above the longest route budget
/// (a command's 120 s) plus the body and write deadlines.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(150);
/// The pause after a failed accept(), so a persistent error cannot spin the daemon.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Answers one request. Generic over the body so tests can call it without a socket.
pub async fn handle<B>(state: &BridgeState, request: Request<B>) -> Response<Full<Bytes>>
where
    B: Body<Data = Bytes>,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let Some(route) = BridgeRoute::from_path(request.uri().path()) else {
        // Not logged: a probe for a route that does not exist decides nothing.
        return respond(&Reply::refuse(
            StatusCode::NOT_FOUND,
            "no such route; this daemon may be older than the shim: update the host airlock",
        ));
    };
    if route == BridgeRoute::Healthz {
        if request.method() != Method::GET {
            return respond(&Reply::refuse(
                StatusCode::METHOD_NOT_ALLOWED,
                "method not allowed; use GET",
            ));
        }
        return respond(&routes::healthz::serve());
    }
    let reply = match gate::admit(state, route, request).await {
        Err(refusal) => refusal,
        Ok((body, caller)) => match route {
            BridgeRoute::Open => routes::open::serve(&body, caller.scope()).await,
            BridgeRoute::Edit => routes::edit::serve(&body, caller.scope()).await,
            BridgeRoute::Credential => routes::credential::serve(&body, caller.scope()).await,
            BridgeRoute::Command => routes::command::serve(&state.commands, &body).await,
            BridgeRoute::Proximo => routes::command::serve_proximo(&state.commands, &body).await,
            BridgeRoute::Sound => {
                let dir = state.sessions.as_ref().map(|p| p.sounds());
                routes::sound::serve(&body, dir.as_deref())
            }
            BridgeRoute::Healthz => routes::healthz::serve(),
        }
        .from_sandbox(caller.scope()),
    };
    if reply.status == StatusCode::UNAUTHORIZED {
        state.audit.unauthenticated(route.path());
    } else {
        state
            .audit
            .record(route.path(), &reply.outcome, &reply.fields);
    }
    respond(&reply)
}

fn respond(reply: &Reply) -> Response<Full<Bytes>> {
    let (content_type, body) = match &reply.body {
        ReplyBody::Empty => (None, Bytes::new()),
        ReplyBody::Json(value) => (Some("application/json"), Bytes::from(value.to_string())),
        ReplyBody::Text(text) => (
            Some("text/plain; charset=utf-8"),
            Bytes::from(format!("{text}\n")),
        ),
    };
    let mut builder = Response::builder().status(reply.status);
    if let Some(content_type) = content_type {
        builder = builder.header(header::CONTENT_TYPE, content_type);
    }
    if reply.status == StatusCode::METHOD_NOT_ALLOWED {
        builder = builder.header(header::ALLOW, "POST, GET");
    }
    builder
        .body(Full::new(body))
        .expect("a status and static headers always make a valid response")
}

/// The listeners of one daemon.
pub struct Listeners {
    pub tcp: TcpListener,
    pub unix: Option<UnixListener>,
}

/// Serves until `shutdown` completes, then lets open requests finish for [`SHUTDOWN_GRACE`].
pub async fn serve(
    state: Arc<BridgeState>,
    listeners: Listeners,
    shutdown: impl Future<Output = ()>,
) {
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    let slots = Arc::new(tokio::sync::Semaphore::new(connection_cap()));
    loop {
        let slot = tokio::select! {
            () = &mut shutdown => break,
            slot = Arc::clone(&slots).acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
        let accepted: io::Result<Box<dyn Io>> = tokio::select! {
            () = &mut shutdown => break,
            conn = listeners.tcp.accept() => conn.map(|(s, _)| Box::new(s) as Box<dyn Io>),
            conn = accept_unix(listeners.unix.as_ref()) => conn,
        };
        let stream = match accepted {
            Ok(stream) => stream,
            // Out of file descriptors and the like: keep serving the connections already open,
            // and try again after a pause rather than at once (a busy loop would starve them).
            Err(_) => {
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let state = Arc::clone(&state);
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            let state = Arc::clone(&state);
            async move { Ok::<_, Infallible>(handle(&state, request).await) }
        });
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_TIMEOUT)
            .serve_connection(TokioIo::new(WriteDeadline::new(stream)), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            let _ = tokio::time::timeout(CONNECTION_LIFETIME, connection).await;
            drop(slot);
        });
    }
    drop(listeners);
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown()).await;
}

async fn accept_unix(listener: Option<&UnixListener>) -> io::Result<Box<dyn Io>> {
    match listener {
        Some(listener) => listener
            .accept()
            .await
            .map(|(s, _)| Box::new(s) as Box<dyn Io>),
        None => std::future::pending().await,
    }
}

/// A connected stream of either transport.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Io for T {}

/// A stream whose writes fail after [`WRITE_TIMEOUT`] without progress (a reader that stopped
/// reading cannot hold a connection and its task forever).
struct WriteDeadline<S> {
    inner: S,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> WriteDeadline<S> {
    fn new(inner: S) -> Self {
        WriteDeadline {
            inner,
            stalled: None,
        }
    }

    fn guard<T>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match poll {
            Poll::Ready(result) => {
                self.stalled = None;
                Poll::Ready(result)
            }
            Poll::Pending => {
                let timer = self
                    .stalled
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(WRITE_TIMEOUT)));
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "response write timed out",
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.guard(cx, poll)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.guard(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::AuditLog;
    use crate::commands::CommandTable;
    use crate::rate::Buckets;
    use crate::token::Token;

    fn state() -> BridgeState {
        BridgeState {
            token: Token::parse("ab".repeat(32).as_bytes()).unwrap(),
            audit: AuditLog::discard(),
            buckets: Buckets::default(),
            commands: CommandTable::default(),
            sessions: None,
            shared_token: true,
        }
    }

    fn request(method: &str, path: &str, auth: Option<&str>, body: &str) -> Request<Full<Bytes>> {
        let mut b = Request::builder().method(method).uri(path);
        if let Some(auth) = auth {
            b = b.header(header::AUTHORIZATION, auth);
        }
        b.body(Full::new(Bytes::from(body.to_owned()))).unwrap()
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_stalled_write_fails_after_the_write_timeout() {
        use tokio::io::AsyncWriteExt as _;
        let (near, _far) = tokio::io::duplex(64);
        let mut stream = WriteDeadline::new(near);
        let started = tokio::time::Instant::now();
        // Nobody reads the far end: the pipe fills, then the deadline fires (virtual time).
        let err = stream.write_all(&[0u8; 4096]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= WRITE_TIMEOUT);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn order_method_then_token_then_bucket_then_cap() {
        let s = state();
        let good = format!("Bearer {}", "ab".repeat(32));
        let status = |r: Response<Full<Bytes>>| r.status().as_u16();
        assert_eq!(
            status(handle(&s, request("GET", "/open", None, "")).await),
            405
        );
        assert_eq!(
            status(handle(&s, request("POST", "/open", None, "")).await),
            401
        );
        assert_eq!(
            status(handle(&s, request("POST", "/open", Some("Bearer ab"), "")).await),
            401
        );
        assert_eq!(
            status(handle(&s, request("POST", "/nope", Some(&good), "")).await),
            404
        );
        assert_eq!(
            status(handle(&s, request("GET", "/healthz", None, "")).await),
            200
        );
        assert_eq!(
            status(handle(&s, request("POST", "/healthz", None, "")).await),
            405
        );
        let big = "x".repeat(BridgeRoute::Open.body_cap() + 1);
        assert_eq!(
            status(handle(&s, request("POST", "/open", Some(&good), &big)).await),
            413
        );
        assert_eq!(
            status(handle(&s, request("POST", "/open", Some(&good), "{")).await),
            400
        );
    }
}
