//! Relaying between two TCP sockets: tunnels, upgraded connections and response bodies.
//!
//! The bytes go through a buffer in the proxy that starts small and grows while a transfer is bulk
//! (a read that fills the buffer means more is queued), so an API call costs 64 KiB and a large
//! download moves in multi-megabyte reads and writes, which TCP turns into 512 KiB packets on the
//! sandbox's `lo` (see `native::net` in airlock-sandbox). Measured through a real sandbox, this
//! moves about twice what `splice(2)` through a pipe did (docs/network.md).
//! The memory above the first buffer is shared under one budget per process, so a thousand bulk
//! connections cannot make the supervisor allocate gigabytes: past the budget, buffers stop growing.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use nix::sys::socket::{Shutdown, shutdown};
use tokio::net::TcpStream;

use super::tunnel::{Activity, RELAY_BUFFER};

/// The largest buffer one direction grows to.
const MAX_BUFFER: usize = 4 * 1024 * 1024;

/// Bytes that the grown buffers of a set of relays may hold together, above their first
/// [`RELAY_BUFFER`].
struct Budget {
    limit: usize,
    in_use: AtomicUsize,
}

/// The budget of every relay in this process: 64 MiB, sixteen bulk transfers at full speed.
static BUDGET: Budget = Budget {
    limit: 64 * 1024 * 1024,
    in_use: AtomicUsize::new(0),
};

impl Budget {
    fn take(&self, bytes: usize) -> bool {
        self.in_use
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                (used + bytes <= self.limit).then_some(used + bytes)
            })
            .is_ok()
    }
}

/// One direction's buffer; gives its share of the budget back when dropped.
struct Buffer {
    bytes: Vec<u8>,
    budget: &'static Budget,
}

impl Buffer {
    fn new(budget: &'static Budget) -> Buffer {
        Buffer {
            bytes: vec![0; RELAY_BUFFER],
            budget,
        }
    }

    /// Quadruples the buffer, up to [`MAX_BUFFER`], if the budget has room for it.
    fn grow(&mut self) {
        let now = self.bytes.len();
        let next = (now * 4).min(MAX_BUFFER);
        if next > now && self.budget.take(next - now) {
            self.bytes.resize(next, 0);
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.budget
            .in_use
            .fetch_sub(self.bytes.len() - RELAY_BUFFER, Ordering::AcqRel);
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
    let mut buf = Buffer::new(&BUDGET);
    let mut total = 0u64;
    loop {
        src.readable().await?;
        let n = match src.try_read(&mut buf.bytes) {
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
            match dst.try_write(&buf.bytes[sent..n]) {
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
        if n == buf.bytes.len() {
            buf.grow();
        }
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
    async fn the_relay_moves_every_byte_and_half_closes() {
        let (mut writer, src) = pair().await;
        let (dst, mut reader) = pair().await;
        let moved = Arc::new(AtomicU64::new(0));
        let activity = Activity::new();
        let data: Vec<u8> = (0..30_000_017u32).map(|i| (i % 253) as u8).collect();
        let send = async {
            writer.write_all(&data).await.unwrap();
            writer.shutdown().await.unwrap();
        };
        let relay = one_way(&src, &dst, &moved, &activity);
        let mut got = Vec::new();
        let receive = reader.read_to_end(&mut got);
        let ((), relayed, received) = tokio::join!(send, relay, receive);
        assert_eq!(relayed.unwrap(), data.len() as u64);
        received.unwrap();
        assert!(got == data, "corrupted");
        assert_eq!(moved.load(Ordering::Relaxed), data.len() as u64);
    }

    #[test]
    fn buffers_grow_to_the_cap_within_the_budget_and_give_it_back() {
        static SMALL: Budget = Budget {
            limit: 3 * MAX_BUFFER,
            in_use: AtomicUsize::new(0),
        };
        let grown = || {
            let mut b = Buffer::new(&SMALL);
            for _ in 0..10 {
                b.grow();
            }
            b
        };
        let (one, two, three) = (grown(), grown(), grown());
        assert_eq!(one.bytes.len(), MAX_BUFFER);
        assert_eq!(three.bytes.len(), MAX_BUFFER);
        // The fourth finds room for one step only (the budget's slack is 3 × 64 KiB).
        let fourth = grown();
        assert_eq!(fourth.bytes.len(), 4 * RELAY_BUFFER);
        assert!(SMALL.in_use.load(Ordering::Acquire) <= SMALL.limit);
        drop((one, two, three, fourth));
        assert_eq!(SMALL.in_use.load(Ordering::Acquire), 0);
        assert_eq!(grown().bytes.len(), MAX_BUFFER, "freed budget is reusable");
    }
}
