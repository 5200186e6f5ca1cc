//! A CONNECT to a host with a credential rule: TLS to the real server first (checked against the
//! host's trust store; a failure refuses the CONNECT with 502), then the sandbox's TLS ended with
//! a certificate of the session CA, and each HTTP/1.1 request sent on with the rule's header set
//! (`crate::inject`). Requests go out one at a time on one upstream connection, as they came in.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Mutex;

use crate::inject::Injector;

use super::Ctx;
use super::conn::Entry;
use super::reply::Refusal;
use super::tunnel::{Activity, with_idle_timeout};

type Body = Either<Incoming, Full<Bytes>>;

/// Serves the CONNECT to `host` whose upstream TCP connection is `upstream`.
pub(crate) async fn serve(
    client: &mut TcpStream,
    upstream: TcpStream,
    host: &str,
    leftover: &[u8],
    injector: &Injector,
    ctx: &Ctx,
    entry: &Entry,
) -> Result<io::Result<()>, Refusal> {
    if !leftover.is_empty() {
        return Err(Refusal::new(
            400,
            "bytes were sent after CONNECT before the tunnel was established",
        ));
    }
    let name = ServerName::try_from(host.to_owned())
        .map_err(|_| Refusal::new(400, format!("{host} is not a name TLS can check")))?;
    let connector = tokio_rustls::TlsConnector::from(injector.upstream_tls());
    let upstream = tokio::time::timeout(
        ctx.config.connect_timeout,
        connector.connect(name, upstream),
    )
    .await
    .map_err(|_| Refusal::new(504, format!("TLS with {host} timed out")))?
    .map_err(|e| {
        Refusal::new(
            502,
            format!(
                "the real {host} did not pass the TLS check against the host's trust store: {e}"
            ),
        )
    })?;
    let activity = Activity::new();
    let relayed = with_idle_timeout(&activity, ctx.config.idle_timeout, async {
        client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await?;
        let config = injector
            .ca()
            .server_config(host)
            .map_err(io::Error::other)?;
        let counted = Counted {
            inner: client,
            up: &entry.up,
            down: &entry.down,
            activity: &activity,
        };
        let tls = tokio_rustls::TlsAcceptor::from(config)
            .accept(counted)
            .await
            .map_err(|e| {
                io::Error::other(format!(
                    "the client refused airlock's certificate for {host} ({e}): it pins \
                     certificates or does not read SSL_CERT_FILE / NODE_EXTRA_CA_CERTS"
                ))
            })?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(upstream))
            .await
            .map_err(io::Error::other)?;
        let driver = tokio::spawn(connection);
        let sender = Arc::new(Mutex::new(sender));
        let service = hyper::service::service_fn(|request: Request<Incoming>| {
            let sender = sender.clone();
            async move {
                Ok::<_, std::convert::Infallible>(
                    one(request, host, injector, &sender, entry).await,
                )
            }
        });
        let served = hyper::server::conn::http1::Builder::new()
            .keep_alive(true)
            .serve_connection(TokioIo::new(tls), service)
            .await;
        driver.abort();
        served.map_err(io::Error::other)
    })
    .await;
    Ok(relayed)
}

/// One request: the rules applied, sent on, the answer relayed; the log entry learns which rules
/// were applied and the answer's status.
async fn one(
    request: Request<Incoming>,
    host: &str,
    injector: &Injector,
    sender: &Mutex<hyper::client::conn::http1::SendRequest<Incoming>>,
    entry: &Entry,
) -> Response<Body> {
    let response = send(request, host, injector, sender, entry).await;
    entry
        .status
        .store(response.status().as_u16(), Ordering::Relaxed);
    response
}

/// A rule whose value cannot be read answers 502 naming it, and nothing is sent upstream.
async fn send(
    mut request: Request<Incoming>,
    host: &str,
    injector: &Injector,
    sender: &Mutex<hyper::client::conn::http1::SendRequest<Incoming>>,
    entry: &Entry,
) -> Response<Body> {
    for rule in injector.rules_for(host) {
        match rule.apply(request.headers_mut()) {
            Ok(true) => {
                let mut names = entry.credentials.lock().unwrap_or_else(|e| e.into_inner());
                if !names.contains(&rule.name) {
                    names.push(rule.name.clone());
                }
            }
            Ok(false) => {}
            Err(why) => {
                return text(
                    StatusCode::BAD_GATEWAY,
                    format!(
                        "airlock: the credential of [network.credentials.{}] could not be read \
                         on the host: {why}\n",
                        rule.name
                    ),
                );
            }
        }
    }
    let mut sender = sender.lock().await;
    if sender.ready().await.is_err() {
        return text(
            StatusCode::BAD_GATEWAY,
            format!("airlock: {host} closed the connection\n"),
        );
    }
    match sender.send_request(request).await {
        Ok(response) => response.map(Either::Left),
        Err(e) => text(
            StatusCode::BAD_GATEWAY,
            format!("airlock: the request to {host} failed: {e}\n"),
        ),
    }
}

fn text(status: StatusCode, body: String) -> Response<Body> {
    let mut response = Response::new(Either::Right(Full::new(Bytes::from(body))));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// The client's socket, counting bytes each way for the log and stamping activity.
struct Counted<'a> {
    inner: &'a mut TcpStream,
    up: &'a AtomicU64,
    down: &'a AtomicU64,
    activity: &'a Activity,
}

impl AsyncRead for Counted<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut *self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        if n > 0 {
            self.up.fetch_add(n as u64, Ordering::Relaxed);
            self.activity.touch();
        }
        poll
    }
}

impl AsyncWrite for Counted<'_> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut *self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = poll
            && n > 0
        {
            self.down.fetch_add(n as u64, Ordering::Relaxed);
            self.activity.touch();
        }
        poll
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.inner).poll_shutdown(cx)
    }
}
