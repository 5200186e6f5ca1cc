//! The upstream's response to a plain HTTP request: its head is rewritten (hop-by-hop headers out,
//! `Connection: close` in, so the client never expects to reuse the connection), interim `1xx`
//! heads are passed on, and the body after the final head is relayed untouched.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{ReadHalf, WriteHalf};

use super::relay;
use super::tunnel::Activity;

/// Most header lines accepted in a response head.
pub(crate) const MAX_RESPONSE_HEADERS: usize = 256;

/// Relays the response: heads rewritten, the rest relayed. An upstream that does not speak HTTP/1.x
/// gets the client a 502. `status` gets the final status the client was sent.
pub(crate) async fn relay(
    upstream: &mut ReadHalf<'_>,
    client: &mut WriteHalf<'_>,
    max_head: usize,
    down: &Arc<AtomicU64>,
    activity: &Activity,
    status: &AtomicU16,
) -> io::Result<u64> {
    let last = relay_heads(upstream, client, max_head, down, activity, false, status).await?;
    relay_rest(upstream, client, &last.pending, down, activity).await
}

/// The final response head, already passed to the client, and the bytes that came after it.
pub(crate) struct FinalHead {
    pub(crate) status: u16,
    pub(crate) pending: Vec<u8>,
}

/// Passes the upstream's response heads to the client, rewritten, through the final one: the first
/// that is not `1xx`, or a `101` when `upgrade` (the client asked to switch protocols). `status`
/// gets the final head's status, or 502 when the proxy answers instead.
pub(crate) async fn relay_heads(
    upstream: &mut ReadHalf<'_>,
    client: &mut WriteHalf<'_>,
    max_head: usize,
    down: &Arc<AtomicU64>,
    activity: &Activity,
    upgrade: bool,
    status: &AtomicU16,
) -> io::Result<FinalHead> {
    let mut pending = Vec::with_capacity(8 * 1024);
    loop {
        let end = loop {
            if let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                break end + 4;
            }
            if pending.len() >= max_head {
                return bad_gateway(client, "a response head over the size limit", status).await;
            }
            let mut chunk = [0u8; 8 * 1024];
            let n = upstream.read(&mut chunk).await?;
            if n == 0 {
                return bad_gateway(client, "no response (the connection closed)", status).await;
            }
            activity.touch();
            pending.extend_from_slice(&chunk[..n]);
        };
        let Some((code, head)) = rewrite(&pending[..end], upgrade) else {
            return bad_gateway(client, "an invalid response head", status).await;
        };
        client.write_all(&head).await?;
        down.fetch_add(head.len() as u64, Ordering::Relaxed);
        pending.drain(..end);
        // 1xx heads (100 Continue, 103 Early Hints) are followed by the real one.
        if !(100..200).contains(&code) || (upgrade && code == 101) {
            status.store(code, Ordering::Relaxed);
            return Ok(FinalHead {
                status: code,
                pending,
            });
        }
    }
}

/// Sends `pending` to the client, then everything else the upstream sends until it closes.
pub(crate) async fn relay_rest(
    upstream: &mut ReadHalf<'_>,
    client: &mut WriteHalf<'_>,
    pending: &[u8],
    down: &Arc<AtomicU64>,
    activity: &Activity,
) -> io::Result<u64> {
    client.write_all(pending).await?;
    down.fetch_add(pending.len() as u64, Ordering::Relaxed);
    let rest = relay::one_way(upstream.as_ref(), client.as_ref(), down, activity).await?;
    Ok(rest + pending.len() as u64)
}

async fn bad_gateway<T>(
    client: &mut WriteHalf<'_>,
    what: &str,
    status: &AtomicU16,
) -> io::Result<T> {
    status.store(502, Ordering::Relaxed);
    let body = format!("airlock egress proxy: the upstream server sent {what}\n");
    let response = format!(
        "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(response.as_bytes()).await?;
    client.shutdown().await?;
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        format!("the upstream server sent {what}"),
    ))
}

/// The status and the head to send to the client, or `None` if it is not an HTTP/1.x response with
/// a status from 100 to 599.
/// `head` runs through the first CRLF CRLF; a head whose blank line comes earlier (ended by a bare
/// LF) is not one either: the bytes between would be dropped unseen. A `101` to a request that
/// asked to `upgrade` keeps its `Upgrade` header and says `Connection: upgrade`; every other final
/// head says `Connection: close`.
pub(crate) fn rewrite(head: &[u8], upgrade: bool) -> Option<(u16, Vec<u8>)> {
    let mut headers = vec![httparse::EMPTY_HEADER; MAX_RESPONSE_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(head) {
        Ok(httparse::Status::Complete(len)) if len == head.len() => {}
        _ => return None,
    }
    // Valid status codes are 100 to 599 (RFC 9110, section 15); httparse takes any three digits,
    // and `001` could not even be written back as it came.
    let status = response.code.filter(|code| (100..600).contains(code))?;
    let switching = upgrade && status == 101;
    let reason = response.reason.unwrap_or("");
    let named: Vec<String> = response
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("connection"))
        .filter_map(|h| std::str::from_utf8(h.value).ok())
        .flat_map(|v| v.split(',').map(|t| t.trim().to_ascii_lowercase()))
        .collect();
    let mut out = format!("HTTP/1.1 {status} {reason}\r\n").into_bytes();
    for h in response.headers.iter() {
        let lower = h.name.to_ascii_lowercase();
        let hop = matches!(
            lower.as_str(),
            "connection" | "keep-alive" | "te" | "trailer" | "upgrade"
        ) || lower.starts_with("proxy-")
            || (named.contains(&lower)
                && lower != "content-length"
                && lower != "transfer-encoding");
        if hop && !(switching && lower == "upgrade") {
            continue;
        }
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value);
        out.extend_from_slice(b"\r\n");
    }
    if switching {
        out.extend_from_slice(b"Connection: upgrade\r\n");
    } else if !(100..200).contains(&status) {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    Some((status, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_go_and_close_is_added() {
        let (status, head) = rewrite(
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive, X-Hop\r\nKeep-Alive: timeout=5\r\n\
              X-Hop: 1\r\nProxy-Authenticate: Basic\r\nX-Kept: y\r\n\r\n",
            false,
        )
        .unwrap();
        assert_eq!(status, 200);
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Kept: y\r\nConnection: close\r\n\r\n"
        );
        let (status, head) = rewrite(b"HTTP/1.1 100 Continue\r\n\r\n", false).unwrap();
        assert_eq!(
            (status, head.as_slice()),
            (100, &b"HTTP/1.1 100 Continue\r\n\r\n"[..])
        );
        assert_eq!(rewrite(b"SSH-2.0-OpenSSH\r\n\r\n", false), None);
    }

    /// Found by the `proxy_response` fuzz target: a blank line ended by a bare LF made httparse stop
    /// there, and the bytes up to the CRLF CRLF the proxy had read were dropped without being seen.
    #[test]
    fn a_head_that_ends_before_its_crlf_crlf_or_has_no_valid_status_is_refused() {
        for head in [
            &b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\nabcX-Late: 1\r\n\r\n"[..],
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\nSec-X: y\r\n\r\n",
            b"HTTP/1.1 200 OK\n\nbody\r\n\r\n",
        ] {
            assert_eq!(
                rewrite(head, true),
                None,
                "{:?}",
                String::from_utf8_lossy(head)
            );
        }
        // Found by the fuzz target too: `001` came back as the status line `HTTP/1.1 1 …`.
        for head in [
            &b"HTTP/1.1 001 X\r\n\r\n"[..],
            b"HTTP/1.1 099 X\r\n\r\n",
            b"HTTP/1.1 600 X\r\n\r\n",
        ] {
            assert_eq!(
                rewrite(head, false),
                None,
                "{:?}",
                String::from_utf8_lossy(head)
            );
        }
        // Bare LF line ends are still read when the head really ends at its CRLF CRLF.
        let (status, out) = rewrite(b"HTTP/1.1 204 No Content\nX-A: 1\r\n\r\n", false).unwrap();
        assert_eq!(status, 204);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "HTTP/1.1 204 No Content\r\nX-A: 1\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn a_switch_keeps_its_upgrade_headers_only_when_asked_for() {
        let switch =
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                       Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
        let (status, head) = rewrite(switch, true).unwrap();
        assert_eq!(status, 101);
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
             Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nConnection: upgrade\r\n\r\n"
        );
        let (_, head) = rewrite(switch, false).unwrap();
        assert!(!String::from_utf8(head).unwrap().contains("pgrade"));
        let refused =
            b"HTTP/1.1 426 Upgrade Required\r\nUpgrade: websocket\r\nContent-Length: 0\r\n\r\n";
        let (_, head) = rewrite(refused, true).unwrap();
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "HTTP/1.1 426 Upgrade Required\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
    }
}
