//! Moving bytes between two connected sockets, both ways, until both sides are done.
//!
//! Each direction runs on its own thread and moves data with `splice(2)` through a pipe of
//! [`PIPE_BYTES`]: socket to pipe to socket, so the relay itself copies nothing (the pages move;
//! the kernel copies only where the client and the server read and write, as without a relay).
//! Measured through a real sandbox (docs/benchmarks.md, "Port forwarding"): the relay spends
//! ~0.1 s of CPU per GiB this way against ~0.3 s copying through a buffer (the receiver pays
//! part of the difference back: spliced packets reach it in page-sized pieces).
//! An end of stream on one side becomes a half-close (`shutdown(SHUT_WR)`) of the other; an error
//! on either side shuts the whole pair. The session's end shuts every live pair
//! ([`Registry::shut_all`]).

use std::io;
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// How many connections one session relays at once; more are closed as they arrive (any local
/// user can open connections to a published port).
pub const MAX_CONNECTIONS: usize = 256;

/// The pipe each direction moves data through (the unprivileged `pipe-max-size` default).
const PIPE_BYTES: usize = 1 << 20;

/// Stack of a relay thread: it holds a few descriptors and small locals.
pub const THREAD_STACK: usize = 128 * 1024;

/// Two connected sockets relayed to each other.
pub(crate) struct Pair {
    pub a: TcpStream,
    pub b: TcpStream,
}

impl Pair {
    fn shut(&self) {
        let _ = self.a.shutdown(Shutdown::Both);
        let _ = self.b.shutdown(Shutdown::Both);
    }
}

/// The live pairs of one session.
#[derive(Default)]
pub(crate) struct Registry {
    pairs: Mutex<Vec<Weak<Pair>>>,
    closed: AtomicBool,
}

impl Registry {
    /// Registers a pair; None (the connection is refused) when the session is ending or already
    /// relays [`MAX_CONNECTIONS`].
    pub fn admit(&self, pair: Pair) -> Option<Arc<Pair>> {
        let mut pairs = self.pairs.lock().unwrap_or_else(PoisonError::into_inner);
        pairs.retain(|p| p.strong_count() > 0);
        if self.closed.load(Ordering::SeqCst) || pairs.len() >= MAX_CONNECTIONS {
            return None;
        }
        let pair = Arc::new(pair);
        pairs.push(Arc::downgrade(&pair));
        Some(pair)
    }

    /// Whether another connection would be admitted now.
    pub fn has_room(&self) -> bool {
        let mut pairs = self.pairs.lock().unwrap_or_else(PoisonError::into_inner);
        pairs.retain(|p| p.strong_count() > 0);
        !self.closed.load(Ordering::SeqCst) && pairs.len() < MAX_CONNECTIONS
    }

    /// Shuts every live pair (their relays end at once) and admits no more.
    pub fn shut_all(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let pairs = std::mem::take(&mut *self.pairs.lock().unwrap_or_else(PoisonError::into_inner));
        for pair in pairs.iter().filter_map(Weak::upgrade) {
            pair.shut();
        }
    }
}

/// Relays `pair` both ways (this thread a → b, one more b → a) until both are done; the bytes
/// moved each way.
pub(crate) fn relay(pair: Arc<Pair>) -> (u64, u64) {
    let back = Arc::clone(&pair);
    let other = std::thread::Builder::new()
        .name("airlock-relay".into())
        .stack_size(THREAD_STACK)
        .spawn(move || pump(&back.b, &back.a, &back));
    let Ok(other) = other else {
        pair.shut();
        return (0, 0);
    };
    let up = pump(&pair.a, &pair.b, &pair);
    let down = other.join().unwrap_or(0);
    (up, down)
}

/// `from` → `to` until `from` ends; then half-closes `to`. On an error, shuts the pair.
fn pump(from: &TcpStream, to: &TcpStream, pair: &Pair) -> u64 {
    let moved = match Pipe::new() {
        Ok(pipe) => splice_all(from, to, &pipe),
        Err(e) => Err((0, e)),
    };
    match moved {
        Ok(n) => {
            let _ = to.shutdown(Shutdown::Write);
            n
        }
        Err((n, _)) => {
            pair.shut();
            n
        }
    }
}

/// Moves bytes with splice(2); a kernel that cannot splice these sockets falls back to a copy.
fn splice_all(from: &TcpStream, to: &TcpStream, pipe: &Pipe) -> Result<u64, (u64, io::Error)> {
    let mut total = 0u64;
    loop {
        let n = match splice(from.as_raw_fd(), pipe.write.as_raw_fd(), PIPE_BYTES) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if total == 0 && e.raw_os_error() == Some(libc::EINVAL) => {
                return copy_all(from, to);
            }
            Err(e) => return Err((total, e)),
        };
        let mut left = n;
        while left > 0 {
            match splice(pipe.read.as_raw_fd(), to.as_raw_fd(), left) {
                Ok(0) => return Err((total, io::ErrorKind::WriteZero.into())),
                Ok(m) => left -= m,
                Err(e) => return Err((total, e)),
            }
        }
        total += n as u64;
    }
}

fn splice(from: RawFd, to: RawFd, len: usize) -> io::Result<usize> {
    loop {
        // SAFETY: no offsets (both ends are a socket or a pipe); plain descriptors.
        let n = unsafe {
            libc::splice(
                from,
                std::ptr::null_mut(),
                to,
                std::ptr::null_mut(),
                len,
                // Not SPLICE_F_MORE: TCP would hold each chunk's tail back, waiting for more
                // (measured: 51% of direct with it, 65% without, same load).
                libc::SPLICE_F_MOVE,
            )
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The same with read and write through a buffer, where splice is refused.
fn copy_all(from: &TcpStream, to: &TcpStream) -> Result<u64, (u64, io::Error)> {
    use std::io::{Read as _, Write as _};
    let mut buf = vec![0u8; 256 * 1024];
    let (mut from, mut to) = (from, to);
    let mut total = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err((total, e)),
        };
        to.write_all(&buf[..n]).map_err(|e| (total, e))?;
        total += n as u64;
    }
}

struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
}

impl Pipe {
    fn new() -> io::Result<Pipe> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: a valid two-int array for the kernel to fill.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both just created and ours alone.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // Best effort: a smaller pipe only means more system calls per megabyte.
        // SAFETY: F_SETPIPE_SZ takes an int.
        unsafe {
            libc::fcntl(
                write.as_raw_fd(),
                libc::F_SETPIPE_SZ,
                PIPE_BYTES as libc::c_int,
            )
        };
        Ok(Pipe { read, write })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read as _, Write as _};
    use std::net::TcpListener;

    fn connected() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        (c, l.accept().unwrap().0)
    }

    #[test]
    fn bytes_cross_both_ways_and_an_end_is_a_half_close() {
        // client ⇄ [a relay b] ⇄ server
        let (mut client, a) = connected();
        let (b, mut server) = connected();
        let registry = Registry::default();
        let pair = registry.admit(Pair { a, b }).unwrap();
        let relay = std::thread::spawn(move || relay(pair));
        let big = vec![7u8; 5 << 20];
        let sent = big.clone();
        let writer = std::thread::spawn(move || {
            client.write_all(&sent).unwrap();
            client.shutdown(Shutdown::Write).unwrap();
            let mut back = Vec::new();
            client.read_to_end(&mut back).unwrap();
            back
        });
        let mut got = Vec::new();
        server.read_to_end(&mut got).unwrap();
        assert_eq!(got.len(), big.len(), "the whole upload, then EOF");
        server.write_all(b"answer").unwrap();
        drop(server);
        assert_eq!(writer.join().unwrap(), b"answer");
        assert_eq!(relay.join().unwrap(), (5 << 20, 6));
    }

    #[test]
    fn the_registry_caps_pairs_and_shut_all_ends_live_relays() {
        let registry = Registry::default();
        let (mut client, a) = connected();
        let (b, _server) = connected();
        let pair = registry.admit(Pair { a, b }).unwrap();
        let relay = std::thread::spawn(move || relay(pair));
        registry.shut_all();
        relay.join().unwrap();
        let mut buf = [0u8; 1];
        assert_eq!(
            client.read(&mut buf).unwrap_or(0),
            0,
            "the client sees the end"
        );
        let (_c, a) = connected();
        let (b, _s) = connected();
        assert!(
            registry.admit(Pair { a, b }).is_none(),
            "nothing after the end"
        );
    }
}
