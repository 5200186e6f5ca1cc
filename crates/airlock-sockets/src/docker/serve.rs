//! The Docker filter on its socket: one request per connection.
//!
//! The head is read under one deadline (the client's read timeout, for the whole head, so a
//! client sending a byte at a time cannot hold a thread past it), parsed (`http.rs`),
//! routed before the body is read, then the body (exactly `Content-Length` bytes, at most
//! [`super::MAX_BODY_BYTES`]) is read and the whole request decided ([`super::decide`]). Bytes
//! after the body are refused as pipelining, except after an allowed upgrade request, where
//! they are held until the engine has answered 101 (an engine that answers anything else never
//! sees them). A denied request never reaches the engine. The engine gets a head rebuilt from
//! the decision and the body; its answer is relayed with `Connection: close` and the connection
//! ends when the engine's answer does (`relay.rs`); bytes a client sends after the pipelining
//! check are never read, let alone forwarded. Each request logs one line: the method, allow or
//! deny (allow for an allowed request the engine then failed: 502) and a fixed reason.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::{Decision, DecisionLog};

use super::http::{self, MAX_HEAD_BYTES, RequestHead};
use super::{Denial, DockerPolicy, decide, relay, route};

/// The deadline when the accept loop set none on the client.
const FALLBACK_DEADLINE: Duration = Duration::from_secs(30);

/// The Docker filter of one sandbox.
pub struct DockerFilter {
    pub policy: DockerPolicy,
    /// The engine's socket on the host.
    pub host: PathBuf,
}

/// Why no complete head or body came.
enum ReadError {
    /// The client closed without sending a byte (no request, nothing to log).
    Empty,
    TimedOut,
    Closed,
    Refused(Denial),
}

/// Reads into `buf` until `done(buf)` says how much is wanted, at most `cap` bytes, all by
/// `deadline`.
fn read_until(
    client: &mut UnixStream,
    buf: &mut Vec<u8>,
    cap: usize,
    deadline: Instant,
    mut done: impl FnMut(&[u8]) -> Result<bool, Denial>,
) -> Result<(), ReadError> {
    let mut chunk = [0u8; 8192];
    loop {
        if done(buf).map_err(ReadError::Refused)? {
            return Ok(());
        }
        if buf.len() >= cap {
            return Err(ReadError::Refused(Denial::new(
                431,
                "the request head is too large",
            )));
        }
        let left = deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or(ReadError::TimedOut)?;
        let _ = client.set_read_timeout(Some(left));
        let room = (cap - buf.len()).min(chunk.len());
        match client.read(&mut chunk[..room]) {
            Ok(0) if buf.is_empty() => return Err(ReadError::Empty),
            Ok(0) => return Err(ReadError::Closed),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(ReadError::TimedOut);
            }
            Err(_) => return Err(ReadError::Closed),
        }
    }
}

/// One connection's request, for answering and logging.
struct Exchange<'a> {
    client: &'a mut UnixStream,
    log: &'a DecisionLog,
    method: String,
    target: String,
}

impl Exchange<'_> {
    fn refuse(&mut self, denial: Denial) {
        let _ = self
            .client
            .write_all(&http::denial_response(&self.method, &self.target, denial));
        self.log.write(&self.method, Decision::Deny, denial.reason);
        // A client still sending its body (`docker run` posts its config) would get EPIPE instead
        // of this answer if the socket closed now: say we are done, then let it finish, briefly.
        let _ = self.client.shutdown(std::net::Shutdown::Write);
        drain(self.client);
    }

    /// An allowed request the engine did not answer properly: 502.
    fn upstream_failed(&mut self, reason: &'static str) {
        let denial = Denial::new(502, reason);
        let _ = self
            .client
            .write_all(&http::denial_response(&self.method, &self.target, denial));
        self.log.write(&self.method, Decision::Allow, reason);
    }
}

/// Reads and drops what the client still sends after a refusal: at most [`DRAIN_BYTES`], for at
/// most [`DRAIN_TIME`], until it closes.
fn drain(client: &mut UnixStream) {
    use std::io::Read as _;
    let deadline = Instant::now() + DRAIN_TIME;
    let mut buf = [0u8; 16 << 10];
    let mut total = 0;
    while total < DRAIN_BYTES {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || client.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match client.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => total += n,
        }
    }
}

/// How much of a refused request's remainder is read and dropped, and for how long.
const DRAIN_BYTES: usize = 1 << 20;
const DRAIN_TIME: std::time::Duration = std::time::Duration::from_secs(1);

impl DockerFilter {
    fn handle(&self, client: &mut UnixStream, log: &DecisionLog) {
        let wait = client
            .read_timeout()
            .ok()
            .flatten()
            .unwrap_or(FALLBACK_DEADLINE);
        let mut buf = Vec::with_capacity(8192);
        let mut head_len = 0;
        let read = read_until(
            client,
            &mut buf,
            MAX_HEAD_BYTES,
            Instant::now() + wait,
            |b| Ok(http::head_end(b)?.map(|n| head_len = n).is_some()),
        );
        let mut x = Exchange {
            client,
            log,
            method: "-".to_owned(),
            target: String::new(),
        };
        match read {
            Ok(()) => {}
            Err(ReadError::Empty) => return,
            Err(ReadError::TimedOut) => {
                return log.write("-", Decision::Deny, "no request head in time");
            }
            Err(ReadError::Closed) => {
                return log.write("-", Decision::Deny, "the client closed mid-head");
            }
            Err(ReadError::Refused(denial)) => return x.refuse(denial),
        }
        let head = match http::parse_request(&buf[..head_len]) {
            Ok(head) => head,
            Err((method, denial)) => {
                x.method = method.unwrap_or_else(|| "-".to_owned());
                return x.refuse(denial);
            }
        };
        x.method.clone_from(&head.method);
        x.target.clone_from(&head.target);
        if let Err(denial) = route(&head.method, &head.target) {
            return x.refuse(denial);
        }
        if head.content_length > 0 && !http::is_json(head.content_type.as_deref()) {
            return x.refuse(Denial::new(415, "a body that is not JSON is refused"));
        }
        let end = head_len + head.content_length;
        if head.expect_continue && buf.len() < end {
            let _ = x.client.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        match read_until(x.client, &mut buf, end, Instant::now() + wait, |b| {
            Ok(b.len() >= end)
        }) {
            Ok(()) => {}
            Err(ReadError::TimedOut) => {
                return log.write(&head.method, Decision::Deny, "no request body in time");
            }
            Err(_) => return log.write(&head.method, Decision::Deny, "the client closed mid-body"),
        }
        let forward = match decide(
            &head.method,
            &head.target,
            &buf[head_len..end],
            &self.policy,
        ) {
            Ok(forward) => forward,
            Err(denial) => return x.refuse(denial),
        };
        let upgrade = forward.upgrade_allowed && head.wants_upgrade;
        let held = buf[end..].to_vec();
        if !upgrade && (!held.is_empty() || relay::pending(x.client)) {
            return x.refuse(Denial::new(400, "pipelined requests are refused"));
        }
        let Ok(mut engine) = UnixStream::connect(&self.host) else {
            return x.upstream_failed("engine unreachable");
        };
        let _ = engine.set_write_timeout(Some(wait));
        let mut request = http::upstream_head(&head, &forward, upgrade);
        request.extend_from_slice(&buf[head_len..end]);
        if engine.write_all(&request).is_err() {
            return x.upstream_failed("engine closed the connection");
        }
        self.answer(&mut x, &head, &mut engine, upgrade, &held, wait);
    }

    /// Reads the engine's answer and relays it, or switches to a two-way copy after a 101.
    fn answer(
        &self,
        x: &mut Exchange<'_>,
        head: &RequestHead,
        engine: &mut UnixStream,
        upgrade: bool,
        held: &[u8],
        wait: Duration,
    ) {
        let mut buf = Vec::with_capacity(8192);
        let mut chunk = [0u8; 8192];
        let response = loop {
            if relay::wait_engine(engine, x.client).is_err() {
                return x
                    .log
                    .write(&x.method, Decision::Allow, "the client went away");
            }
            match engine.read(&mut chunk) {
                Ok(0) | Err(_) => return x.upstream_failed("engine closed without answering"),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            match http::parse_response(&buf) {
                Ok(Some(response)) => break response,
                Ok(None) => {}
                Err(()) => return x.upstream_failed("engine response malformed"),
            }
        };
        let rest = &buf[response.len..];
        match response.status {
            101 if upgrade => {
                x.log
                    .write(&x.method, Decision::Allow, "forwarded, upgraded");
                if x.client.write_all(&buf[..response.len]).is_err()
                    || x.client.write_all(rest).is_err()
                    || engine.write_all(held).is_err()
                {
                    return;
                }
                relay::pump(x.client, engine, wait);
            }
            101 => x.upstream_failed("engine switched protocols unasked"),
            100..=199 => x.upstream_failed("engine sent an informational answer"),
            status => {
                x.log.write(&x.method, Decision::Allow, "forwarded");
                if x.client.write_all(&response.relayed).is_err()
                    || x.client.write_all(rest).is_err()
                {
                    return;
                }
                let bodiless = head.method == "HEAD" || status == 204 || status == 304;
                let limit = if bodiless {
                    Some(0)
                } else {
                    response.content_length
                };
                let left = limit.map(|l| l.saturating_sub(rest.len() as u64));
                relay::relay_response(engine, x.client, left);
            }
        }
    }
}

impl crate::Filter for DockerFilter {
    fn name(&self) -> &'static str {
        "docker"
    }

    fn serve(&self, mut client: UnixStream, log: &DecisionLog) {
        self.handle(&mut client, log);
    }
}
