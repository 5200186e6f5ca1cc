//! The herdr filter on its socket: one request per connection, as herdr itself. The request line is
//! read (capped, with a deadline), decided ([`super::decide`]); a forwarded one goes to the host's
//! herdr socket on a connection of its own, and herdr's one response line comes back unchanged,
//! after [`super::observe_response`] has recorded what it says about tabs this sandbox created. The
//! host socket never sees a byte the decision did not produce.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use airlock_sockets::{Decision as Logged, DecisionLog, LineError, read_line};

use super::{Decision, FilterPolicy, MAX_LINE_BYTES, Owned, decide, observe_response};

/// How long herdr may take to answer one forwarded request.
const HERDR_DEADLINE: Duration = Duration::from_secs(10);

/// The herdr filter of one sandbox.
pub struct HerdrFilter {
    pub policy: FilterPolicy,
    /// The host's real herdr socket.
    pub host_socket: PathBuf,
    /// The tabs and panes herdr said this sandbox's `tab.create`s made (empty at start:
    /// `Default::default()`).
    pub owned: Mutex<Owned>,
}

fn error_line(code: &str, message: &str) -> Vec<u8> {
    let mut line = serde_json::json!({"id": "", "error": {"code": code, "message": message}})
        .to_string()
        .into_bytes();
    line.push(b'\n');
    line
}

impl HerdrFilter {
    /// The table, also after a thread panicked holding it: each update is one insert or remove,
    /// so the table is whole either way.
    fn owned(&self) -> MutexGuard<'_, Owned> {
        self.owned
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// herdr's one response line to `line`, or why there is none.
    fn forward(&self, line: &[u8]) -> Result<Vec<u8>, &'static str> {
        let mut herdr = UnixStream::connect(&self.host_socket)
            .map_err(|_| "the host's herdr is unreachable")?;
        let _ = herdr.set_read_timeout(Some(HERDR_DEADLINE));
        let _ = herdr.set_write_timeout(Some(HERDR_DEADLINE));
        herdr
            .write_all(line)
            .map_err(|_| "the host's herdr closed the connection")?;
        match read_line(&mut herdr, MAX_LINE_BYTES) {
            Ok(response) => Ok(response),
            Err(LineError::TimedOut) => Err("the host's herdr did not answer in time"),
            Err(LineError::TooLong) => Err("the host's herdr answered more than 1 MiB"),
            Err(LineError::Closed) => Err("the host's herdr closed without answering"),
        }
    }
}

impl airlock_sockets::Filter for HerdrFilter {
    fn name(&self) -> &'static str {
        "herdr"
    }

    fn serve(&self, mut client: UnixStream, log: &DecisionLog) {
        let line = match read_line(&mut client, MAX_LINE_BYTES) {
            Ok(line) => line,
            Err(e) => {
                let reason = match e {
                    LineError::TooLong => "request line over 1 MiB",
                    LineError::TimedOut => "no request line in time",
                    LineError::Closed => "closed before a request line",
                };
                log.write("-", Logged::Deny, reason);
                let _ = client.write_all(&error_line(
                    "invalid_request",
                    &format!("airlock: {reason}"),
                ));
                return;
            }
        };
        // A snapshot (at most MAX_OWNED_TABS entries), so the launcher `decide` may call does its
        // file work without holding the table. A tab closed meanwhile is one herdr no longer has,
        // and herdr does not reuse ids.
        let owned = self.owned().clone();
        match decide(&line, &self.policy, &owned) {
            Decision::Forward { line, method } => match self.forward(&line) {
                Ok(response) => {
                    // Recorded before the client reads the answer, so its next request finds it.
                    let observed = observe_response(&line, &response, &mut self.owned());
                    log.write(&method, Logged::Allow, &observed.log_reason());
                    let _ = client.write_all(&response);
                }
                Err(why) => {
                    log.write(&method, Logged::Allow, why);
                    let _ = client.write_all(&error_line(
                        "server_unavailable",
                        &format!("airlock: {why}"),
                    ));
                }
            },
            Decision::Deny {
                response,
                method,
                reason,
            } => {
                log.write(
                    if method.is_empty() { "-" } else { &method },
                    Logged::Deny,
                    &reason,
                );
                let _ = client.write_all(&response);
            }
        }
        // One request per connection: anything more the client sent is not read; closing now
        // ends the exchange, as herdr does.
        let _ = client.shutdown(std::net::Shutdown::Write);
    }
}
