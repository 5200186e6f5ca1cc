//! The herdr filter on its socket: one request per connection, as herdr itself. The request line is
//! read (capped, with a deadline), decided ([`super::decide`]); a forwarded one goes to the host's
//! herdr socket on a connection of its own, and herdr's one response line comes back unchanged. The
//! host socket never sees a byte the decision did not produce.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use airlock_sockets::{Decision as Logged, DecisionLog, LineError, read_line};

use super::{Decision, FilterPolicy, MAX_LINE_BYTES, decide};

/// How long herdr may take to answer one forwarded request.
const HERDR_DEADLINE: Duration = Duration::from_secs(10);

/// The herdr filter of one sandbox.
pub struct HerdrFilter {
    pub policy: FilterPolicy,
    /// The host's real herdr socket.
    pub host_socket: PathBuf,
}

fn error_line(code: &str, message: &str) -> Vec<u8> {
    let mut line = serde_json::json!({"id": "", "error": {"code": code, "message": message}})
        .to_string()
        .into_bytes();
    line.push(b'\n');
    line
}

impl HerdrFilter {
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
        match decide(&line, &self.policy) {
            Decision::Forward { line, method } => match self.forward(&line) {
                Ok(response) => {
                    log.write(&method, Logged::Allow, "forwarded");
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
