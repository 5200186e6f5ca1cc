//! Entry points for the fuzz targets in `fuzz/` (not an API: hidden from the docs, no stability).
//!
//! Each function runs the proxy's own code on bytes and returns a plain summary of what it decided,
//! so the targets can check invariants without the proxy's crate-private types.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use crate::host::Host;

use super::forward::send_body;
use super::head::{self, Framing, Request, Seen};
use super::response;

/// How a forwarded request's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    None,
    Length(u64),
    Chunked,
}

/// What the proxy makes of a complete request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    Connect {
        host: Host,
        port: u16,
    },
    Forward {
        method: String,
        host: Host,
        port: u16,
        /// The head sent upstream.
        upstream_head: Vec<u8>,
        body: Body,
        upgrade: bool,
    },
}

/// Where the request head in `buf` ends (`Ok(None)`: not yet), or the status it is refused with.
pub fn head_end(buf: &[u8]) -> Result<Option<usize>, u16> {
    head::head_end(buf).map_err(|refusal| refusal.status)
}

/// The proxy's reading of a complete head (`head_end` said where it ends), or the refusal status.
/// The method, as the decision log would record it, comes back either way.
pub fn parse_request(head: &[u8], max_headers: usize) -> (String, Result<Parsed, u16>) {
    let mut seen = Seen::default();
    let parsed = head::parse_request(head, max_headers, &mut seen).map_err(|r| r.status);
    let parsed = parsed.map(|request| match request {
        Request::Connect { host, port } => Parsed::Connect { host, port },
        Request::Forward(f) => Parsed::Forward {
            method: f.method,
            host: f.host,
            port: f.port,
            upstream_head: f.upstream_head,
            body: match f.framing {
                Framing::None => Body::None,
                Framing::Length(n) => Body::Length(n),
                Framing::Chunked => Body::Chunked,
            },
            upgrade: f.upgrade,
        },
    });
    (seen.method, parsed)
}

/// The most header lines the proxy reads in a response head.
pub const MAX_RESPONSE_HEADERS: usize = response::MAX_RESPONSE_HEADERS;

/// An upstream response head (through its first CRLF CRLF) as the client gets it: status and head.
pub fn response_head(head: &[u8], upgrade: bool) -> Option<(u16, Vec<u8>)> {
    response::rewrite(head, upgrade)
}

/// A client's chunked request body as the proxy sends it upstream, or why it stopped.
pub fn rechunk(body: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let result = ready(send_body(body, &mut out, Framing::Chunked));
    result.map(|()| out).map_err(|e| e.to_string())
}

/// Runs a future whose I/O is all in memory (always ready) to completion without a runtime.
fn ready<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_points_reach_the_parsers() {
        let head = b"GET http://example.com/x HTTP/1.1\r\nHost: example.com\r\n\r\n";
        assert_eq!(head_end(head), Ok(Some(head.len())));
        assert_eq!(head_end(b"GET / HTTP/1.1\n"), Err(400));
        let (method, parsed) = parse_request(head, 100);
        assert_eq!(method, "GET");
        assert!(matches!(
            parsed,
            Ok(Parsed::Forward {
                body: Body::None,
                upgrade: false,
                ..
            })
        ));
        assert_eq!(
            response_head(b"HTTP/1.1 204 No Content\r\n\r\n", false).map(|(s, _)| s),
            Some(204)
        );
        assert_eq!(
            rechunk(b"3\r\nabc\r\n0\r\n\r\n").as_deref(),
            Ok(&b"3\r\nabc\r\n0\r\n\r\n"[..])
        );
        assert!(rechunk(b"3\r\nab").is_err());
    }
}
