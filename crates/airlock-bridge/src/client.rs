//! The client the shims use: unix socket first, TCP only when connecting to the socket failed.
//!
//! Once a request has been sent it is never retried on the other transport, whatever happens: a
//! retry could run a host command twice. Blocking I/O on purpose: a shim makes one request and
//! exits, and an async runtime would only add to its start-up. Responses are parsed by `httparse`
//! (hyper's own parser); the request asks the daemon to close, so the body runs to EOF.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use crate::paths::{BridgePaths, TCP_HOST_ENV};
use crate::token::{Token, TokenError};

/// The largest response read (a host command's output is capped at 1 MiB before JSON escaping).
const MAX_RESPONSE: u64 = 8 * 1024 * 1024;
/// How long connecting over TCP may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Why no HTTP status came back.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No token in the state dir: the bridge was never installed (or not mounted).
    #[error(
        "the airlock host bridge is not installed (no {0}); run `airlock bridge install` on the host"
    )]
    NotInstalled(PathBuf),
    #[error("{0}")]
    Token(TokenError),
    /// Neither transport connected, or the connection died before a status.
    #[error(
        "the airlock host bridge is not reachable ({0}); on the host, check `airlock bridge status`"
    )]
    Unreachable(String),
}

/// An HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Answer {
    /// The body as text, trimmed (a refusal's reason).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).trim().to_owned()
    }
}

/// A connected stream of either transport.
enum Conn {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Conn {
    fn set_timeout(&self, timeout: Duration) -> io::Result<()> {
        match self {
            Conn::Unix(s) => s
                .set_read_timeout(Some(timeout))
                .and_then(|()| s.set_write_timeout(Some(timeout))),
            Conn::Tcp(s) => s
                .set_read_timeout(Some(timeout))
                .and_then(|()| s.set_write_timeout(Some(timeout))),
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Unix(s) => s.read(buf),
            Conn::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Unix(s) => s.write(buf),
            Conn::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Unix(s) => s.flush(),
            Conn::Tcp(s) => s.flush(),
        }
    }
}

/// The socket if it accepts a connection, else TCP on the port from the state dir.
fn connect(paths: &BridgePaths) -> Result<(Conn, String), ClientError> {
    let socket = paths.socket();
    let unix_error = match UnixStream::connect(&socket) {
        Ok(stream) => return Ok((Conn::Unix(stream), "localhost".into())),
        Err(e) => e,
    };
    let port = std::fs::read_to_string(paths.port())
        .ok()
        .and_then(|p| p.trim().parse::<u16>().ok());
    let Some(port) = port else {
        return Err(ClientError::Unreachable(format!(
            "{}: {unix_error}; no port file",
            socket.display()
        )));
    };
    let host = std::env::var(TCP_HOST_ENV).unwrap_or_else(|_| "127.0.0.1".into());
    let addrs: Vec<SocketAddr> = (host.as_str(), port)
        .to_socket_addrs()
        .map(Iterator::collect)
        .unwrap_or_default();
    let mut tcp_error = format!("cannot resolve {host}");
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(stream) => return Ok((Conn::Tcp(stream), host)),
            Err(e) => tcp_error = e.to_string(),
        }
    }
    Err(ClientError::Unreachable(format!(
        "{}: {unix_error}; {host}:{port}: {tcp_error}",
        socket.display()
    )))
}

/// Sends `POST <route>` with `body` to the daemon whose state dir is `paths`.
pub fn post(
    paths: &BridgePaths,
    route: &str,
    body: Vec<u8>,
    timeout: Duration,
) -> Result<Answer, ClientError> {
    let token = match Token::read(&paths.token()) {
        Ok(token) => token,
        Err(TokenError::Missing { path }) => return Err(ClientError::NotInstalled(path)),
        Err(e) => return Err(ClientError::Token(e)),
    };
    let (conn, host) = connect(paths)?;
    exchange(conn, &host, "POST", route, Some(&token), &body, timeout)
}

/// Whether `GET /healthz` answers 200 on the socket or, failing that, on TCP.
pub fn healthz(paths: &BridgePaths) -> bool {
    connect(paths)
        .ok()
        .and_then(|(conn, host)| {
            exchange(
                conn,
                &host,
                "GET",
                "/healthz",
                None,
                b"",
                Duration::from_secs(2),
            )
            .ok()
        })
        .is_some_and(|answer| answer.status == 200)
}

fn exchange(
    mut conn: Conn,
    host: &str,
    method: &str,
    route: &str,
    token: Option<&Token>,
    body: &[u8],
    timeout: Duration,
) -> Result<Answer, ClientError> {
    let died =
        |e: &dyn std::fmt::Display| ClientError::Unreachable(format!("the connection failed: {e}"));
    conn.set_timeout(timeout).map_err(|e| died(&e))?;
    let mut request = format!(
        "{method} {route} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(token) = token {
        request.push_str(&format!("Authorization: Bearer {}\r\n", token.expose()));
    }
    request.push_str("\r\n");
    let mut message = request.into_bytes();
    message.extend_from_slice(body);
    conn.write_all(&message).map_err(|e| died(&e))?;
    let mut raw = Vec::new();
    conn.take(MAX_RESPONSE)
        .read_to_end(&mut raw)
        .map_err(|e| died(&e))?;
    parse_response(&raw).map_err(|e| died(&e))
}

/// Parses a whole response (the connection was closed after it).
pub fn parse_response(raw: &[u8]) -> Result<Answer, String> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut response = httparse::Response::new(&mut headers);
    let head_len = match response.parse(raw) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Err("the answer ended inside its head".into()),
        Err(e) => return Err(format!("malformed answer: {e}")),
    };
    let status = response.code.ok_or("malformed answer: no status")?;
    let header = |name: &str| {
        response
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).trim().to_owned())
    };
    if header("transfer-encoding").is_some() {
        return Err("unexpected transfer-encoding in the answer".into());
    }
    let mut body = raw[head_len..].to_vec();
    if let Some(length) = header("content-length") {
        let length: usize = length
            .parse()
            .map_err(|_| format!("malformed content-length {length:?}"))?;
        if body.len() < length {
            return Err("the answer ended inside its body".into());
        }
        body.truncate(length);
    }
    Ok(Answer { status, body })
}

/// Where the shim finds the state dir: `$AIRLOCK_BRIDGE_DIR`, else the sandbox mount point.
pub fn sandbox_paths() -> BridgePaths {
    match std::env::var_os(crate::paths::STATE_DIR_ENV) {
        Some(dir) if !dir.is_empty() => BridgePaths::at(dir),
        _ => BridgePaths::at(crate::paths::SANDBOX_STATE_DIR),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_are_parsed_and_cut_to_their_length() {
        let a = parse_response(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n").unwrap();
        assert_eq!((a.status, a.body.len()), (204, 0));
        let a = parse_response(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 4\r\n\r\nno\n\nextra")
            .unwrap();
        assert_eq!((a.status, a.text().as_str()), (400, "no"));
        assert!(parse_response(b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nshort").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\n").is_err());
        assert!(parse_response(b"garbage").is_err());
        assert!(
            parse_response(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n")
                .is_err()
        );
    }
}
