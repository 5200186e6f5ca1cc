//! Reading a request head off the wire and turning it into a [`Request`], or into the refusal
//! (status + reason) the client gets. Pure except for [`read_head`].

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::host::{Host, parse_authority};

use super::reply::Refusal;

/// The methods the proxy forwards; anything else gets 405. (TRACE is left out: it reflects headers.)
pub const ACCEPTED_METHODS: &[&str] = &[
    "CONNECT", "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS",
];

/// How the request body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    None,
    Length(u64),
    Chunked,
}

/// A plain-HTTP request to forward: the head to send upstream, already rewritten.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Forward {
    pub(crate) method: String,
    pub(crate) host: Host,
    pub(crate) port: u16,
    /// The request head for the upstream server, origin-form target, hop-by-hop headers removed.
    pub(crate) upstream_head: Vec<u8>,
    pub(crate) framing: Framing,
    /// `Connection: upgrade` was asked for (websocket) without a body: once the upstream answers
    /// `101`, bytes flow both ways raw.
    pub(crate) upgrade: bool,
}

/// A request the proxy will act on (after the policy allows it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Request {
    Connect { host: Host, port: u16 },
    Forward(Forward),
}

impl Request {
    pub(crate) fn host_port(&self) -> (&Host, u16) {
        match self {
            Request::Connect { host, port } => (host, *port),
            Request::Forward(f) => (&f.host, f.port),
        }
    }
}

/// What the head said, for the log even when it is refused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) method: String,
}

/// Reads until the end of the request head. Returns the buffer and the head's length; bytes after
/// the head (a body's start, early tunnel data) stay in the buffer.
pub(crate) async fn read_head<R: AsyncRead + Unpin>(
    client: &mut R,
    max_bytes: usize,
    timeout: Duration,
) -> Result<(Vec<u8>, usize), Refusal> {
    let mut buf = Vec::with_capacity(4096);
    let read = async {
        loop {
            if let Some(end) = head_end(&buf)? {
                return Ok(end);
            }
            if buf.len() >= max_bytes {
                return Err(Refusal::new(
                    431,
                    format!("the request head is larger than {max_bytes} bytes"),
                ));
            }
            let want = (max_bytes - buf.len()).min(16 * 1024);
            let before = buf.len();
            buf.resize(before + want, 0);
            let n = client.read(&mut buf[before..]).await;
            buf.truncate(before + *n.as_ref().unwrap_or(&0));
            match n {
                Ok(0) => {
                    return Err(Refusal::silent(
                        "the client closed before a full request head",
                    ));
                }
                Ok(_) => {}
                Err(e) => return Err(Refusal::silent(format!("reading the request head: {e}"))),
            }
        }
    };
    match tokio::time::timeout(timeout, read).await {
        Ok(Ok(end)) => Ok((buf, end)),
        Ok(Err(refusal)) => Err(refusal),
        Err(_) => Err(Refusal::new(
            408,
            format!(
                "no complete request head within {} s",
                timeout.as_secs_f32()
            ),
        )),
    }
}

/// The length of the head (through the blank line), if the buffer holds all of it.
///
/// A line ended by a bare LF, or a CR not followed by LF, is refused as soon as it arrives: the
/// blank line such a client sends is never CRLF CRLF, so waiting would only hold it until the header
/// timeout; and front and back ends that disagree about line ends are where requests get smuggled.
/// Bytes after the head (a body) are not looked at.
pub(crate) fn head_end(buf: &[u8]) -> Result<Option<usize>, Refusal> {
    for (i, &byte) in buf.iter().enumerate() {
        let after_cr = i > 0 && buf[i - 1] == b'\r';
        match byte {
            b'\n' if !after_cr => {
                return Err(Refusal::new(
                    400,
                    "a line of the request head ends in a bare LF; HTTP/1.1 needs CRLF line ends",
                ));
            }
            b'\n' if i >= 3 && &buf[i - 3..=i] == b"\r\n\r\n" => return Ok(Some(i + 1)),
            b'\r' if buf.get(i + 1).is_some_and(|&next| next != b'\n') => {
                return Err(Refusal::new(
                    400,
                    "the request head has a CR not followed by LF; HTTP/1.1 needs CRLF line ends",
                ));
            }
            _ => {}
        }
    }
    Ok(None)
}

/// Parses a complete head (`buf[..len]` ends with the blank line) into a request.
pub(crate) fn parse_request(
    head: &[u8],
    max_headers: usize,
    seen: &mut Seen,
) -> Result<Request, Refusal> {
    let mut headers = vec![httparse::EMPTY_HEADER; max_headers];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err(Refusal::new(400, "incomplete request head")),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(Refusal::new(
                431,
                format!("more than {max_headers} header lines"),
            ));
        }
        Err(e) => return Err(Refusal::new(400, format!("malformed request head ({e})"))),
    }
    let method = req.method.unwrap_or_default();
    let target = req.path.unwrap_or_default();
    let version = req.version.unwrap_or(1);
    // httparse has checked that the method is a token; cap what reaches the log.
    seen.method = method.chars().take(16).collect();
    if !ACCEPTED_METHODS.contains(&method) {
        return Err(Refusal::new(
            405,
            format!(
                "method not accepted; the proxy accepts {}",
                ACCEPTED_METHODS.join(", ")
            ),
        ));
    }
    let fields = Fields::collect(req.headers)?;
    if method == "CONNECT" {
        // Refused without echoing it: `user:password@` must not reach the decision log.
        if target.contains('@') {
            return Err(Refusal::new(
                400,
                "user information in the CONNECT target is not allowed",
            ));
        }
        // RFC 9110 wants the port; 443 is what a client that leaves it out means.
        let (host, port) = parse_authority(target, Some(443))
            .map_err(|e| Refusal::new(400, format!("bad CONNECT target: {e}")))?;
        // The Host header of a CONNECT is not checked: nothing of it is forwarded, the tunnel goes
        // to the target the policy decided on, and clients disagree on what it holds (Node's
        // `http.request` sends the proxy's own address). More than one is still refused above.
        return Ok(Request::Connect { host, port });
    }
    let (host, port, origin_form) = absolute_target(target)?;
    if version == 1 || fields.host.is_some() {
        fields.check_host_header(&host, None, port)?;
    }
    let framing = fields.framing(version)?;
    // An upgrade with a body is sent as a plain request (the Upgrade header dropped): the switch
    // would have to happen after a body the proxy frames, and websocket and h2c handshakes have none.
    let upgrade =
        fields.upgrade.is_some() && fields.connection_has("upgrade") && framing == Framing::None;
    let upstream_head = rewrite(
        (&host, port),
        method,
        &origin_form,
        req.headers,
        &fields,
        upgrade,
    );
    Ok(Request::Forward(Forward {
        method: method.to_owned(),
        host,
        port,
        upstream_head,
        framing,
        upgrade,
    }))
}

/// `http://authority/path?query` → host, port (default 80) and `/path?query`.
fn absolute_target(target: &str) -> Result<(Host, u16, String), Refusal> {
    let lower = target.get(..8).unwrap_or(target).to_ascii_lowercase();
    if lower.starts_with("https://") {
        return Err(Refusal::new(
            400,
            "https:// targets must use CONNECT (set HTTPS_PROXY, not a plain request)",
        ));
    }
    if !lower.starts_with("http://") {
        return Err(Refusal::new(
            400,
            "this is a proxy: the request target must be an absolute http:// URL",
        ));
    }
    let rest = &target[7..];
    let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(split);
    if authority.contains('@') {
        return Err(Refusal::new(
            400,
            "user information in the request target is not allowed",
        ));
    }
    let (host, port) = parse_authority(authority, Some(80))
        .map_err(|e| Refusal::new(400, format!("bad request target: {e}")))?;
    let origin_form = match path.as_bytes().first() {
        Some(b'/') => path.to_owned(),
        Some(_) => format!("/{path}"),
        None => "/".to_owned(),
    };
    Ok((host, port, origin_form))
}

/// The headers that matter to the proxy, checked for duplicates and conflicts.
#[derive(Debug, Default)]
struct Fields<'a> {
    host: Option<&'a str>,
    content_length: Option<u64>,
    transfer_encoding: Vec<String>,
    connection: Vec<String>,
    upgrade: Option<&'a [u8]>,
}

impl<'a> Fields<'a> {
    fn collect(headers: &'a [httparse::Header<'a>]) -> Result<Fields<'a>, Refusal> {
        let mut f = Fields::default();
        for h in headers {
            let value = std::str::from_utf8(h.value)
                .map_err(|_| Refusal::new(400, format!("header {} is not UTF-8", h.name)))?;
            let tokens = || {
                value
                    .split(',')
                    .map(|t| t.trim().to_ascii_lowercase())
                    .filter(|t| !t.is_empty())
            };
            match h.name.to_ascii_lowercase().as_str() {
                "host" if f.host.is_some() => {
                    return Err(Refusal::new(400, "more than one Host header"));
                }
                "host" => f.host = Some(value.trim()),
                "content-length" => {
                    let n = value.trim();
                    let parsed =
                        (!n.is_empty() && n.len() <= 19 && n.bytes().all(|b| b.is_ascii_digit()))
                            .then(|| n.parse::<u64>().ok())
                            .flatten()
                            .ok_or_else(|| Refusal::new(400, "Content-Length is not a number"))?;
                    if f.content_length.is_some_and(|old| old != parsed) {
                        return Err(Refusal::new(400, "conflicting Content-Length headers"));
                    }
                    f.content_length = Some(parsed);
                }
                "transfer-encoding" => f.transfer_encoding.extend(tokens()),
                "connection" => f.connection.extend(tokens()),
                "upgrade" => f.upgrade = Some(h.value),
                _ => {}
            }
        }
        if f.content_length.is_some() && !f.transfer_encoding.is_empty() {
            return Err(Refusal::new(
                400,
                "both Content-Length and Transfer-Encoding (a request smuggling pattern)",
            ));
        }
        Ok(f)
    }

    fn connection_has(&self, token: &str) -> bool {
        self.connection.iter().any(|t| t == token)
    }

    /// The Host header must name the same host (and port, when it has one) as the target.
    fn check_host_header(
        &self,
        host: &Host,
        port: Option<u16>,
        default_port: u16,
    ) -> Result<(), Refusal> {
        let Some(value) = self.host else {
            return match port {
                Some(_) => Ok(()),
                None => Err(Refusal::new(400, "HTTP/1.1 request without a Host header")),
            };
        };
        let want_port = port.unwrap_or(default_port);
        let agrees = match parse_authority(value, Some(0)) {
            Ok((h, p)) => {
                h == *host && (p == want_port || (p == 0 && (port.is_some() || want_port == 80)))
            }
            Err(_) => false,
        };
        if agrees {
            Ok(())
        } else {
            Err(Refusal::new(
                400,
                format!(
                    "the Host header does not match the request target {}",
                    host.to_authority(want_port)
                ),
            ))
        }
    }

    fn framing(&self, version: u8) -> Result<Framing, Refusal> {
        if let Some(n) = self.content_length {
            return Ok(if n == 0 {
                Framing::None
            } else {
                Framing::Length(n)
            });
        }
        if self.transfer_encoding.is_empty() {
            return Ok(Framing::None);
        }
        if version == 0 {
            return Err(Refusal::new(
                400,
                "Transfer-Encoding in an HTTP/1.0 request",
            ));
        }
        // Only plain `chunked`: other codings (or `chunked` twice) are rare in requests and are where
        // front and back ends disagree about framing.
        if self.transfer_encoding != ["chunked"] {
            return Err(Refusal::new(
                400,
                "a Transfer-Encoding other than `chunked`",
            ));
        }
        Ok(Framing::Chunked)
    }
}

/// Hop-by-hop headers (RFC 9110 §7.6.1) and proxy credentials: never forwarded. Headers that frame
/// the body are never dropped, even when `Connection` names them: the upstream server must delimit
/// the body exactly as the proxy did, or the body could be read as a second request.
fn is_hop_by_hop(lower: &str, fields: &Fields) -> bool {
    matches!(
        lower,
        "connection" | "keep-alive" | "te" | "trailer" | "upgrade"
    ) || lower.starts_with("proxy-")
        || (fields.connection_has(lower) && lower != "content-length")
}

/// The head for the upstream server: origin-form target, the client's Host, no hop-by-hop headers,
/// and `Connection: close` (or `upgrade`). A chunked body is re-framed, so `Transfer-Encoding:
/// chunked` is written once by the proxy.
fn rewrite(
    (target_host, target_port): (&Host, u16),
    method: &str,
    origin_form: &str,
    headers: &[httparse::Header],
    f: &Fields,
    upgrade: bool,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(format!("{method} {origin_form} HTTP/1.1\r\n").as_bytes());
    let host = match f.host {
        Some(host) => host.to_owned(),
        None if target_port == 80 => target_host
            .to_authority(80)
            .trim_end_matches(":80")
            .to_owned(),
        None => target_host.to_authority(target_port),
    };
    out.extend_from_slice(format!("Host: {host}\r\n").as_bytes());
    for h in headers.iter().filter(|h| !h.name.is_empty()) {
        let lower = h.name.to_ascii_lowercase();
        if lower == "host" || lower == "transfer-encoding" || is_hop_by_hop(&lower, f) {
            continue;
        }
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value);
        out.extend_from_slice(b"\r\n");
    }
    if !f.transfer_encoding.is_empty() {
        out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
    }
    match (upgrade, f.upgrade) {
        (true, Some(proto)) => {
            out.extend_from_slice(b"Connection: upgrade\r\nUpgrade: ");
            out.extend_from_slice(proto);
            out.extend_from_slice(b"\r\n");
        }
        _ => out.extend_from_slice(b"Connection: close\r\n"),
    }
    out.extend_from_slice(b"\r\n");
    out
}

#[cfg(test)]
mod tests;
