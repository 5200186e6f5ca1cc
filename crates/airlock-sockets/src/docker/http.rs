//! HTTP/1.1 heads: the client's request parsed strictly and rebuilt for the engine, the
//! engine's response rewritten for the client, and the filter's own answers.
//!
//! Request smuggling needs two parsers that frame a request differently. Here nothing the
//! client framed reaches the engine as it was: the head is parsed (CRLF only; a bare LF, a
//! folded line, a space before a colon, more than [`MAX_HEADERS`] headers or more than
//! [`MAX_HEAD_BYTES`] are refused), `Transfer-Encoding` is refused outright (Docker's clients
//! send `Content-Length` bodies; nothing in the allowlist streams a request body), a repeated
//! or non-numeric `Content-Length` is refused, and the engine gets a head written here:
//!
//! - the request line with the normalised target, always `HTTP/1.1`;
//! - `Host: docker` (Go's server needs one; the client's value is not needed);
//! - `User-Agent`, `Accept`, `Content-Type` when the client sent them, visible ASCII only
//!   (the engine reads `Content-Type`; the other two are informational);
//! - `Content-Length` of the body read, when there is one or the method is POST;
//! - `Connection: Upgrade` + `Upgrade: tcp` for an allowed upgrade the client asked for, else
//!   `Connection: close`.
//!
//! Everything else is dropped: `X-Registry-Auth`/`Authorization`/`Cookie` (credentials; no
//! allowed endpoint uses them), `X-Docker-*`/`X-Registry-Config` (build and session
//! endpoints, refused), `Accept-Encoding` (the relay stays plain), `Expect`, hop-by-hop headers.

use super::{Denial, Forward};

pub const MAX_HEAD_BYTES: usize = 64 << 10;
pub const MAX_HEADERS: usize = 100;

/// The client's request head, as far as the filter reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    pub method: String,
    pub target: String,
    pub content_length: usize,
    pub content_type: Option<String>,
    pub user_agent: Option<String>,
    pub accept: Option<String>,
    /// `Connection: Upgrade` and `Upgrade: tcp`, as Docker's clients send for a raw stream.
    pub wants_upgrade: bool,
    /// `Expect: 100-continue`.
    pub expect_continue: bool,
}

/// Where the head in `buf` ends (after its blank line), if it is all there; a line ending in a
/// bare LF is refused (httparse would accept it; another parser might split lines elsewhere).
pub fn head_end(buf: &[u8]) -> Result<Option<usize>, Denial> {
    for (i, _) in buf.iter().enumerate().filter(|(_, b)| **b == b'\n') {
        if i == 0 || buf[i - 1] != b'\r' {
            return Err(Denial::new(400, "a bare LF line ending is refused"));
        }
        if i >= 3 && &buf[i - 3..=i] == b"\r\n\r\n" {
            return Ok(Some(i + 1));
        }
    }
    Ok(None)
}

fn visible_value(v: &[u8]) -> Option<String> {
    v.iter()
        .all(|&b| b == b' ' || b == b'\t' || (0x21..=0x7e).contains(&b))
        .then(|| String::from_utf8_lossy(v).into_owned())
}

fn set_once(slot: &mut Option<String>, value: &[u8]) -> Result<(), Denial> {
    if slot.is_some() {
        return Err(Denial::new(400, "a repeated header is refused"));
    }
    *slot =
        Some(visible_value(value).ok_or(Denial::new(400, "a header value is not visible ASCII"))?);
    Ok(())
}

/// Parses a complete head (as [`head_end`] delimited it). On an error, the method when the
/// request line was readable (for the log).
pub fn parse_request(head: &[u8]) -> Result<RequestHead, (Option<String>, Denial)> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(head) {
        Ok(httparse::Status::Complete(n)) if n == head.len() => {}
        Err(httparse::Error::TooManyHeaders) => {
            return Err((None, Denial::new(431, "too many headers")));
        }
        _ => {
            return Err((
                None,
                Denial::new(400, "a malformed request head is refused"),
            ));
        }
    }
    let method = req.method.unwrap_or("-").to_owned();
    let fail = |d: Denial| (Some(method.clone()), d);
    let target = req.path.unwrap_or("").to_owned();
    let mut length: Option<usize> = None;
    let (mut content_type, mut user_agent, mut accept) = (None, None, None);
    let (mut upgrade, mut expect, mut host) = (None, None, None);
    let mut connection_upgrade = false;
    for h in req.headers.iter() {
        let name = h.name.to_ascii_lowercase();
        match name.as_str() {
            "transfer-encoding" => {
                return Err(fail(Denial::new(501, "transfer-encoding is refused")));
            }
            "content-length" => {
                if length.is_some() {
                    return Err(fail(Denial::new(400, "conflicting content-length")));
                }
                let v = h.value;
                if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
                    return Err(fail(Denial::new(
                        400,
                        "a malformed content-length is refused",
                    )));
                }
                let n: usize = std::str::from_utf8(v)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| fail(Denial::new(413, "the body is too large")))?;
                if n > super::MAX_BODY_BYTES {
                    return Err(fail(Denial::new(413, "the body is too large")));
                }
                length = Some(n);
            }
            "content-type" => set_once(&mut content_type, h.value).map_err(fail)?,
            "user-agent" => set_once(&mut user_agent, h.value).map_err(fail)?,
            "accept" => set_once(&mut accept, h.value).map_err(fail)?,
            "upgrade" => set_once(&mut upgrade, h.value).map_err(fail)?,
            "expect" => set_once(&mut expect, h.value).map_err(fail)?,
            "host" => set_once(&mut host, h.value).map_err(fail)?,
            "connection" => {
                connection_upgrade |= h
                    .value
                    .split(|&b| b == b',')
                    .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"upgrade"));
            }
            _ => {}
        }
    }
    let expect_continue = match expect.as_deref().map(str::trim) {
        None => false,
        Some(e) if e.eq_ignore_ascii_case("100-continue") => true,
        Some(_) => return Err(fail(Denial::new(417, "an expectation is refused"))),
    };
    let wants_upgrade = connection_upgrade
        && upgrade
            .as_deref()
            .is_some_and(|u| u.trim().eq_ignore_ascii_case("tcp"));
    Ok(RequestHead {
        method,
        target,
        content_length: length.unwrap_or(0),
        content_type,
        user_agent,
        accept,
        wants_upgrade,
        expect_continue,
    })
}

/// `application/json`, with parameters or not.
pub fn is_json(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|ct| {
        ct.split(';')
            .next()
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
    })
}

/// The head the engine gets (see the module docs). `upgrade`: the client asked for one and
/// the endpoint allows it.
pub fn upstream_head(head: &RequestHead, forward: &Forward, upgrade: bool) -> Vec<u8> {
    let mut out = format!(
        "{} {} HTTP/1.1\r\nHost: docker\r\n",
        head.method, forward.path_and_query
    );
    for (name, value) in [
        ("User-Agent", &head.user_agent),
        ("Accept", &head.accept),
        ("Content-Type", &head.content_type),
    ] {
        if let Some(v) = value {
            out.push_str(&format!("{name}: {}\r\n", v.trim()));
        }
    }
    if head.content_length > 0 || head.method == "POST" {
        out.push_str(&format!("Content-Length: {}\r\n", head.content_length));
    }
    if upgrade {
        out.push_str("Connection: Upgrade\r\nUpgrade: tcp\r\n");
    } else {
        out.push_str("Connection: close\r\n");
    }
    out.push_str("\r\n");
    out.into_bytes()
}

/// The engine's response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    pub status: u16,
    /// How many bytes of the buffer the head took.
    pub len: usize,
    /// The body's `Content-Length`, unless a `Transfer-Encoding` frames it.
    pub content_length: Option<u64>,
    /// The head for the client: the engine's, without `Connection`/`Keep-Alive`, with
    /// `Connection: close`.
    pub relayed: Vec<u8>,
}

/// Parses the engine's response head from the start of `buf`: `Ok(None)` until it is all there.
pub fn parse_response(buf: &[u8]) -> Result<Option<ResponseHead>, ()> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD_BYTES => return Ok(None),
        _ => return Err(()),
    };
    let status = resp.code.ok_or(())?;
    let mut relayed = format!(
        "HTTP/1.{} {status} {}\r\n",
        resp.version.unwrap_or(1),
        resp.reason.unwrap_or("")
    )
    .into_bytes();
    let mut content_length = None;
    let mut chunked = false;
    for h in resp.headers.iter() {
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = true;
        }
        if h.name.eq_ignore_ascii_case("content-length") {
            let n = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or(())?;
            if content_length.is_some_and(|m| m != n) {
                return Err(());
            }
            content_length = Some(n);
        }
        if h.name.eq_ignore_ascii_case("connection") || h.name.eq_ignore_ascii_case("keep-alive") {
            continue;
        }
        relayed.extend_from_slice(h.name.as_bytes());
        relayed.extend_from_slice(b": ");
        relayed.extend_from_slice(h.value);
        relayed.extend_from_slice(b"\r\n");
    }
    relayed.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Some(ResponseHead {
        status,
        len,
        content_length: content_length.filter(|_| !chunked),
        relayed,
    }))
}

fn status_text(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        403 => "Forbidden",
        413 => "Payload Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        417 => "Expectation Failed",
        431 => "Request Header Fields Too Large",
        501 => "Not Implemented",
        _ => "Bad Gateway",
    }
}

/// The filter's answer to a refused request: a Docker-style JSON error. A 403 of a target that
/// normalises quotes the method and the normalised path (the client's own request; the log
/// never does); every other answer carries the fixed reason only.
pub fn denial_response(method: &str, target: &str, denial: Denial) -> Vec<u8> {
    let quoted = (denial.status == 403)
        .then(|| super::normalise(target).ok())
        .flatten();
    let message = match quoted {
        Some(n) if denial.reason == super::NOT_ALLOWED => format!(
            "airlock: {method} {} is not allowed (read-only Docker access)",
            n.full_path()
        ),
        Some(n) => format!(
            "airlock: {method} {} is not allowed (read-only Docker access: {})",
            n.full_path(),
            denial.reason
        ),
        None => format!("airlock: {}", denial.reason),
    };
    let body = serde_json::json!({ "message": message }).to_string();
    let mut out = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        denial.status,
        status_text(denial.status),
        body.len()
    );
    if method != "HEAD" {
        out.push_str(&body);
    }
    out.into_bytes()
}
