//! Copying the engine's answer to the client, and both ways once upgraded.
//!
//! A stream such as `/events` or `logs?follow=1` may be quiet for hours, so reads from the
//! engine have no timeout; instead the copy waits in `poll(2)` on the engine and on the
//! client's hang-up, and ends as soon as the client has closed (a client gone never leaves a
//! thread waiting on a quiet engine). Writes to the client carry its write timeout (set by the
//! accept loop): a client that never reads ends its own connection, never another's. Writes to
//! the engine carry the same deadline.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

const CHUNK: usize = 64 << 10;

/// What `poll` saw on one descriptor.
#[derive(Clone, Copy, Default)]
struct Seen {
    /// Data, an end of stream or an error: a read will not block.
    readable: bool,
    /// The peer closed both directions (or the socket failed).
    hung_up: bool,
}

/// Polls `fds` (a stream, and whether to wait for its data; without, only its hang-up is
/// seen). `None` on timeout.
fn poll(fds: &[(&UnixStream, bool)], timeout: Option<Duration>) -> io::Result<Option<Vec<Seen>>> {
    let mut raw: Vec<libc::pollfd> = fds
        .iter()
        .map(|(s, data)| libc::pollfd {
            fd: s.as_raw_fd(),
            events: if *data { libc::POLLIN } else { 0 },
            revents: 0,
        })
        .collect();
    let ms = timeout.map_or(-1, |t| t.as_millis().clamp(1, i32::MAX as u128) as i32);
    loop {
        // SAFETY: `raw` is a valid array of `raw.len()` pollfds for the duration of the call.
        let n = unsafe { libc::poll(raw.as_mut_ptr(), raw.len() as libc::nfds_t, ms) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        if n == 0 {
            return Ok(None);
        }
        return Ok(Some(
            raw.iter()
                .map(|p| Seen {
                    readable: p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0,
                    hung_up: p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0,
                })
                .collect(),
        ));
    }
}

/// Why a wait for the engine ended without data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gone {
    Client,
    Error,
}

/// Waits until a read from `engine` will not block, or the client hung up.
pub fn wait_engine(engine: &UnixStream, client: &UnixStream) -> Result<(), Gone> {
    loop {
        let seen = poll(&[(engine, true), (client, false)], None).map_err(|_| Gone::Error)?;
        let Some(seen) = seen else { continue };
        if seen[0].readable {
            return Ok(());
        }
        if seen[1].hung_up {
            return Err(Gone::Client);
        }
    }
}

/// Copies what the engine sends to the client until the engine closes, `limit` bytes were
/// copied (the rest of a body whose length is known), the client hangs up, or a write to the
/// client fails or times out.
pub fn relay_response(engine: &mut UnixStream, client: &mut UnixStream, limit: Option<u64>) {
    let mut buf = vec![0u8; CHUNK];
    let mut left = limit.unwrap_or(u64::MAX);
    while left > 0 {
        if wait_engine(engine, client).is_err() {
            return;
        }
        let room = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        match engine.read(&mut buf[..room]) {
            Ok(0) => return,
            Ok(n) => {
                if client.write_all(&buf[..n]).is_err() {
                    return;
                }
                left -= n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// Reads what `from` has into `buf` and writes it to `to`: `Ok(false)` at the end of `from`.
fn step(from: &mut UnixStream, to: &mut UnixStream, buf: &mut [u8]) -> io::Result<bool> {
    loop {
        match from.read(buf) {
            Ok(0) => return Ok(false),
            Ok(n) => {
                to.write_all(&buf[..n])?;
                return Ok(true);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// After a 101: copies both ways. The end of one direction is passed on as a half-close
/// (`shutdown(Write)`) and the other keeps going; once the engine has finished, the client has
/// `linger` of quiet to finish too. Ends on any error (a write timing out included).
pub fn pump(client: &mut UnixStream, engine: &mut UnixStream, linger: Duration) {
    let mut buf = vec![0u8; CHUNK];
    let (mut client_open, mut engine_open) = (true, true);
    while client_open || engine_open {
        let timeout = (!engine_open).then_some(linger);
        let seen = match poll(&[(client, client_open), (engine, engine_open)], timeout) {
            Ok(Some(seen)) => seen,
            Ok(None) | Err(_) => return,
        };
        if client_open && seen[0].readable {
            match step(client, engine, &mut buf) {
                Ok(true) => {}
                Ok(false) => {
                    client_open = false;
                    let _ = engine.shutdown(Shutdown::Write);
                }
                Err(_) => return,
            }
        } else if !client_open && engine_open && seen[0].hung_up {
            // The client closed both ways: nobody is left to read the engine's output.
            return;
        }
        if engine_open && seen[1].readable {
            match step(engine, client, &mut buf) {
                Ok(true) => {}
                Ok(false) => {
                    engine_open = false;
                    let _ = client.shutdown(Shutdown::Write);
                }
                Err(_) => return,
            }
        }
    }
}

/// Whether the client has sent more bytes that are waiting to be read (without reading them).
pub fn pending(client: &UnixStream) -> bool {
    let mut byte = 0u8;
    // SAFETY: one writable byte at `byte`; MSG_PEEK leaves the data queued.
    let n = unsafe {
        libc::recv(
            client.as_raw_fd(),
            (&mut byte as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n > 0
}
