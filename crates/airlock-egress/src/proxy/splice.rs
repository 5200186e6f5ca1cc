//! Zero-copy relaying between two TCP sockets with `splice(2)` through a pipe: the bytes of a
//! tunnel or a response never enter the proxy's memory, which keeps large downloads close to the
//! speed of a direct connection. Falls back to a buffered copy if a pipe cannot be made.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use nix::fcntl::{FcntlArg, OFlag, SpliceFFlags, fcntl, splice};
use nix::sys::socket::{Shutdown, shutdown};
use tokio::io::Interest;
use tokio::net::TcpStream;

use super::tunnel::Activity;

/// Pipe capacity asked for (the default unprivileged maximum); the kernel may give less.
const PIPE_BYTES: i32 = 1024 * 1024;

/// A pipe used as the in-kernel buffer of one direction.
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
}

impl Pipe {
    fn new() -> io::Result<Pipe> {
        let (read, write) = nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC)?;
        // A larger pipe means fewer system calls; the default 64 KiB still works.
        let _ = fcntl(write.as_raw_fd(), FcntlArg::F_SETPIPE_SZ(PIPE_BYTES));
        Ok(Pipe { read, write })
    }
}

/// Moves bytes from `src` to `dst` until `src` ends, then half-closes `dst`. Counts what moved in
/// `moved` and stamps `activity` on every transfer. Returns the number of bytes.
pub(crate) async fn one_way(
    src: &TcpStream,
    dst: &TcpStream,
    moved: &Arc<AtomicU64>,
    activity: &Activity,
) -> io::Result<u64> {
    let pipe = match Pipe::new() {
        Ok(pipe) => pipe,
        Err(_) => return buffered(src, dst, moved, activity).await,
    };
    let flags = SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK;
    let mut total = 0u64;
    loop {
        let filled = loop {
            src.readable().await?;
            let r = src.try_io(Interest::READABLE, || {
                splice(src, None, &pipe.write, None, PIPE_BYTES as usize, flags)
                    .map_err(io::Error::from)
            });
            match r {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        };
        if filled == 0 {
            let _ = shutdown(dst.as_raw_fd(), Shutdown::Write);
            return Ok(total);
        }
        activity.touch();
        let mut left = filled;
        while left > 0 {
            dst.writable().await?;
            let r = dst.try_io(Interest::WRITABLE, || {
                splice(&pipe.read, None, dst, None, left, flags).map_err(io::Error::from)
            });
            match r {
                Ok(n) => {
                    left -= n;
                    total += n as u64;
                    moved.fetch_add(n as u64, Ordering::Relaxed);
                    activity.touch();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// The same with a user-space buffer, for when no pipe can be had (e.g. out of descriptors).
async fn buffered(
    src: &TcpStream,
    dst: &TcpStream,
    moved: &Arc<AtomicU64>,
    activity: &Activity,
) -> io::Result<u64> {
    let mut buf = vec![0u8; super::tunnel::RELAY_BUFFER];
    let mut total = 0u64;
    loop {
        src.readable().await?;
        let n = match src.try_read(&mut buf) {
            Ok(0) => {
                let _ = shutdown(dst.as_raw_fd(), Shutdown::Write);
                return Ok(total);
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        };
        activity.touch();
        let mut sent = 0;
        while sent < n {
            dst.writable().await?;
            match dst.try_write(&buf[sent..n]) {
                Ok(m) => {
                    sent += m;
                    moved.fetch_add(m as u64, Ordering::Relaxed);
                    activity.touch();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
        total += n as u64;
    }
}

/// Both directions at once, like `tokio::io::copy_bidirectional`: each ends at its source's EOF
/// and half-closes its destination; the relay ends when both have, or at the first error.
pub(crate) async fn both_ways(
    client: &TcpStream,
    upstream: &TcpStream,
    up: &Arc<AtomicU64>,
    down: &Arc<AtomicU64>,
    activity: &Activity,
) -> io::Result<()> {
    tokio::try_join!(
        one_way(client, upstream, up, activity),
        one_way(upstream, client, down, activity),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// Two connected loopback pairs: (a client end, a server end) each.
    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (client, server)
    }

    #[tokio::test]
    async fn both_relays_move_every_byte_and_half_close() {
        for zero_copy in [true, false] {
            let (mut writer, src) = pair().await;
            let (dst, mut reader) = pair().await;
            let moved = Arc::new(AtomicU64::new(0));
            let activity = Activity::new();
            let data: Vec<u8> = (0..3_000_017u32).map(|i| (i % 253) as u8).collect();
            let send = async {
                writer.write_all(&data).await.unwrap();
                writer.shutdown().await.unwrap();
            };
            let relay = async {
                if zero_copy {
                    one_way(&src, &dst, &moved, &activity).await
                } else {
                    buffered(&src, &dst, &moved, &activity).await
                }
            };
            let mut got = Vec::new();
            let receive = reader.read_to_end(&mut got);
            let ((), relayed, received) = tokio::join!(send, relay, receive);
            assert_eq!(relayed.unwrap(), data.len() as u64);
            received.unwrap();
            assert!(got == data, "zero_copy={zero_copy}: corrupted");
            assert_eq!(moved.load(Ordering::Relaxed), data.len() as u64);
        }
    }
}
