//! Plain HTTP: send the rewritten head, stream the request body exactly as framed, relay the
//! response back until the upstream closes. Nothing the client sends after the body is forwarded.

use std::io;
use std::sync::atomic::Ordering;

use tokio::io::{
    AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader,
};
use tokio::net::TcpStream;

use super::conn::Entry;
use super::head::{Forward, Framing};
use super::tunnel::{Activity, RELAY_BUFFER, Tracked, with_idle_timeout};
use super::{Ctx, relay, response};

pub(crate) async fn forward(
    client: &mut TcpStream,
    mut upstream: TcpStream,
    req: &Forward,
    leftover: &[u8],
    ctx: &Ctx,
    entry: &Entry,
) -> io::Result<()> {
    let activity = Activity::new();
    with_idle_timeout(&activity, ctx.config.idle_timeout, async {
        upstream.write_all(&req.upstream_head).await?;
        if req.upgrade {
            return upgrade(client, &mut upstream, leftover, ctx, entry, &activity).await;
        }
        entry.up.fetch_add(leftover.len() as u64, Ordering::Relaxed);
        let (client_read, mut client_write) = client.split();
        let (mut upstream_read, mut upstream_write) = upstream.split();
        let body = leftover.chain(Tracked::new(
            client_read,
            activity.clone(),
            entry.up.clone(),
        ));
        let request = async {
            send_body(body, &mut upstream_write, req.framing).await?;
            upstream_write.flush().await
        };
        let response = response::relay(
            &mut upstream_read,
            &mut client_write,
            ctx.config.max_head_bytes,
            &entry.down,
            &activity,
            &entry.status,
        );
        // The response may come before the body ends (e.g. 413): it is what the client waits for.
        let (sent, received) = tokio::join!(request, response);
        received.and(sent).map(|_| ())
    })
    .await
}

/// An upgrade request (its head already sent): nothing more of the client's goes upstream until the
/// server has answered `101 Switching Protocols`. Before that, what the client sends after the head
/// could only be read as a second request on this connection (smuggled past the policy when the
/// server refuses the switch); after it, both sides speak the new protocol and bytes flow raw.
async fn upgrade(
    client: &mut TcpStream,
    upstream: &mut TcpStream,
    leftover: &[u8],
    ctx: &Ctx,
    entry: &Entry,
    activity: &Activity,
) -> io::Result<()> {
    {
        let (_, mut client_write) = client.split();
        let (mut upstream_read, _) = upstream.split();
        let max_head = ctx.config.max_head_bytes;
        let last = response::relay_heads(
            &mut upstream_read,
            &mut client_write,
            max_head,
            &entry.down,
            activity,
            true,
            &entry.status,
        )
        .await?;
        if last.status != 101 {
            // Refused: the rest of this one response, then the connection closes unused.
            return response::relay_rest(
                &mut upstream_read,
                &mut client_write,
                &last.pending,
                &entry.down,
                activity,
            )
            .await
            .map(|_| ());
        }
        // Bytes of the new protocol that came with the 101.
        client_write.write_all(&last.pending).await?;
        entry
            .down
            .fetch_add(last.pending.len() as u64, Ordering::Relaxed);
    }
    upstream.write_all(leftover).await?;
    entry.up.fetch_add(leftover.len() as u64, Ordering::Relaxed);
    relay::both_ways(client, upstream, &entry.up, &entry.down, activity).await
}

/// Copies the request body from `src` as `framing` says, re-framing chunks in a normal form.
pub(crate) async fn send_body<R, W>(src: R, dst: &mut W, framing: Framing) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut src = BufReader::with_capacity(RELAY_BUFFER, src);
    match framing {
        Framing::None => Ok(()),
        Framing::Length(n) => copy_exactly(&mut src, dst, n).await,
        Framing::Chunked => relay_chunked(&mut src, dst).await,
    }
}

async fn copy_exactly<R, W>(src: &mut R, dst: &mut W, n: u64) -> io::Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let copied = tokio::io::copy_buf(&mut src.take(n), dst).await?;
    if copied < n {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("the client closed after {copied} of {n} body bytes"),
        ));
    }
    Ok(())
}

/// Longest chunk-size or trailer line accepted.
const MAX_CHUNK_LINE: usize = 4096;
/// Most trailer lines accepted (they are dropped, not forwarded).
const MAX_TRAILERS: usize = 64;

/// Relays a chunked body: each chunk re-sent as `<hex size>\r\n<data>\r\n` (extensions dropped),
/// trailers dropped, ending with `0\r\n\r\n`. Malformed framing ends the request.
async fn relay_chunked<R, W>(src: &mut R, dst: &mut W) -> io::Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    loop {
        let line = read_line(src).await?;
        let size = parse_chunk_size(&line).ok_or_else(|| bad("a malformed chunk size line"))?;
        if size == 0 {
            for _ in 0..MAX_TRAILERS {
                if read_line(src).await?.is_empty() {
                    return dst.write_all(b"0\r\n\r\n").await;
                }
            }
            return Err(bad("too many trailer lines"));
        }
        dst.write_all(format!("{size:x}\r\n").as_bytes()).await?;
        copy_exactly(src, dst, size).await?;
        let mut crlf = [0u8; 2];
        src.read_exact(&mut crlf).await?;
        if &crlf != b"\r\n" {
            return Err(bad("chunk data not followed by CRLF"));
        }
        dst.write_all(b"\r\n").await?;
    }
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("chunked body: {what}"))
}

/// One CRLF-terminated line without its CRLF; a bare LF or an over-long line is an error.
async fn read_line<R: AsyncBufRead + Unpin>(src: &mut R) -> io::Result<Vec<u8>> {
    let mut line = Vec::new();
    (&mut *src)
        .take(MAX_CHUNK_LINE as u64 + 2)
        .read_until(b'\n', &mut line)
        .await?;
    match line.strip_suffix(b"\r\n") {
        Some(body) if !body.contains(&b'\r') => Ok(body.to_vec()),
        _ => Err(bad("a line not ended by CRLF, or longer than 4 KiB")),
    }
}

/// `1a3f` or `1a3f;ext=val`: hex digits (at most 15, so the size fits comfortably), then optional
/// extensions. No sign, no spaces before the digits, no empty size.
pub(crate) fn parse_chunk_size(line: &[u8]) -> Option<u64> {
    let digits = match line.iter().position(|&b| b == b';') {
        Some(i) => &line[..i],
        None => line,
    };
    let digits = digits.trim_ascii_end();
    if digits.is_empty() || digits.len() > 15 || !digits.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_sizes() {
        assert_eq!(parse_chunk_size(b"0"), Some(0));
        assert_eq!(parse_chunk_size(b"1A3f"), Some(0x1a3f));
        assert_eq!(parse_chunk_size(b"10;name=value"), Some(16));
        for bad in [
            &b""[..],
            b" 1",
            b"-1",
            b"+1",
            b"0x10",
            b"g",
            b"1000000000000000",
        ] {
            assert_eq!(parse_chunk_size(bad), None, "{bad:?}");
        }
    }

    async fn rechunk(input: &[u8]) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        send_body(input, &mut out, Framing::Chunked).await?;
        Ok(out)
    }

    #[tokio::test]
    async fn chunked_bodies_are_reframed_and_end_at_the_last_chunk() {
        let out = rechunk(b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\nGET /smuggled HTTP/1.1\r\n\r\n")
            .await
            .unwrap();
        assert_eq!(out, b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
    }

    #[tokio::test]
    async fn malformed_chunked_bodies_are_errors() {
        for input in [
            &b"5\nhello\r\n0\r\n\r\n"[..],
            b"5\r\nhelloX\r\n0\r\n\r\n",
            b"zz\r\n",
            b"5\r\nhel",
        ] {
            assert!(
                rechunk(input).await.is_err(),
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[tokio::test]
    async fn content_length_bodies_stop_at_the_length() {
        let mut out = Vec::new();
        send_body(
            &b"abcdefGET / HTTP/1.1\r\n\r\n"[..],
            &mut out,
            Framing::Length(6),
        )
        .await
        .unwrap();
        assert_eq!(out, b"abcdef");
        let short = send_body(&b"abc"[..], &mut Vec::new(), Framing::Length(6)).await;
        assert_eq!(short.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }
}
