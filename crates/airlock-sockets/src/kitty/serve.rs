//! The kitty filter on its socket. A client may send several frames on one connection; each is
//! decided in order ([`super::decide`]) and a forwarded one goes to kitty on a connection of its
//! own, its answer (when the request wants one) read as one frame, learned from (a launch's new
//! window), cut down (`ls`) and relayed. The first denial or framing error ends the connection.
//! kitty never sees a byte the decision did not produce.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use crate::{Decision as Logged, DecisionLog};

use super::{
    Command, Decision, FrameBuffer, KittyPolicy, MAX_RESPONSE_FRAME_BYTES, Owned, decide,
    deny_frame_error, encode_frame, error_frame, filter_ls_response, observe_response,
};

/// How long kitty may take to answer a forwarded request.
const KITTY_DEADLINE: Duration = Duration::from_secs(10);
/// A waiting launch is answered when its program exits: as long as a person reviews a diff.
const WAIT_DEADLINE: Duration = Duration::from_secs(24 * 3600);

/// Where the host's kitty listens (`KITTY_LISTEN_ON`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KittySocket {
    /// `unix:/path`
    Path(PathBuf),
    /// `unix:@name`, in the abstract namespace of the host's network namespace (the filter runs
    /// there; the sandbox has its own and could not reach it).
    Abstract(Vec<u8>),
}

impl KittySocket {
    /// Reads `KITTY_LISTEN_ON`; only Unix sockets are supported (`tcp:` is refused: kitty would
    /// then accept commands from anything that reaches the port).
    pub fn parse(listen_on: &str) -> Result<KittySocket, String> {
        match listen_on.strip_prefix("unix:") {
            Some(name) if name.starts_with('@') && name.len() > 1 => {
                Ok(KittySocket::Abstract(name.as_bytes()[1..].to_vec()))
            }
            Some(path) if path.starts_with('/') => Ok(KittySocket::Path(PathBuf::from(path))),
            _ => Err(format!(
                "KITTY_LISTEN_ON={listen_on:?} is not a unix: socket airlock can filter; set \
                 listen_on unix:/tmp/kitty-{{kitty_pid}} in kitty.conf"
            )),
        }
    }

    pub fn connect(&self) -> io::Result<UnixStream> {
        match self {
            KittySocket::Path(path) => UnixStream::connect(path),
            KittySocket::Abstract(name) => {
                use std::os::linux::net::SocketAddrExt;
                let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
                UnixStream::connect_addr(&addr)
            }
        }
    }
}

/// The kitty filter of one sandbox.
pub struct KittyFilter {
    pub policy: KittyPolicy,
    pub host: KittySocket,
    /// Windows kitty reported as created by this sandbox's launches, across its connections.
    pub owned: Mutex<Owned>,
}

impl KittyFilter {
    pub fn new(policy: KittyPolicy, host: KittySocket) -> KittyFilter {
        KittyFilter {
            policy,
            host,
            owned: Mutex::new(Owned::new()),
        }
    }

    fn owned(&self) -> std::sync::MutexGuard<'_, Owned> {
        self.owned.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends `frame` to kitty; its one answer frame's JSON, when `expect` is set.
    fn forward(
        &self,
        frame: &[u8],
        cmd: Command,
        expect: bool,
    ) -> Result<Option<Vec<u8>>, &'static str> {
        let mut kitty = self
            .host
            .connect()
            .map_err(|_| "the host's kitty is unreachable")?;
        let deadline = match cmd {
            Command::LaunchAndWait => WAIT_DEADLINE,
            _ => KITTY_DEADLINE,
        };
        let _ = kitty.set_read_timeout(Some(deadline));
        let _ = kitty.set_write_timeout(Some(KITTY_DEADLINE));
        kitty
            .write_all(frame)
            .map_err(|_| "the host's kitty closed the connection")?;
        if !expect {
            return Ok(None);
        }
        let mut frames = FrameBuffer::with_limit(MAX_RESPONSE_FRAME_BYTES);
        let mut buf = vec![0u8; 64 << 10];
        loop {
            match frames.next_frame() {
                Ok(Some(json)) => return Ok(Some(json)),
                Ok(None) => {}
                Err(_) => return Err("the host's kitty answered with a bad frame"),
            }
            match kitty.read(&mut buf) {
                Ok(0) => return Err("the host's kitty closed without answering"),
                Ok(n) => frames.push(&buf[..n]),
                Err(_) => return Err("the host's kitty did not answer in time"),
            }
        }
    }

    /// Handles one request frame; `false` ends the connection.
    fn request(&self, client: &mut UnixStream, json: &[u8], log: &DecisionLog) -> bool {
        let decision = decide(json, &self.policy, &self.owned());
        let (frame, cmd, expect) = match decision {
            Decision::Deny {
                response,
                cmd,
                reason,
            } => {
                log.write(if cmd.is_empty() { "-" } else { cmd }, Logged::Deny, reason);
                let _ = client.write_all(&response);
                return false;
            }
            Decision::Forward {
                frame,
                cmd,
                expect_response,
            } => (frame, cmd, expect_response),
        };
        let answer = match self.forward(&frame, cmd, expect) {
            Ok(answer) => answer,
            Err(why) => {
                log.write(cmd.name(), Logged::Allow, why);
                let _ = client.write_all(&error_frame(&format!("airlock: {why}")));
                return false;
            }
        };
        let Some(answer) = answer else {
            log.write(cmd.name(), Logged::Allow, "forwarded");
            return true;
        };
        let relayed = match cmd {
            Command::Launch => {
                let recorded = observe_response(cmd, &answer, &mut self.owned()).is_some();
                let reason = if recorded {
                    "forwarded, window owned"
                } else {
                    "forwarded"
                };
                log.write(cmd.name(), Logged::Allow, reason);
                encode_frame(&answer)
            }
            Command::Ls => {
                log.write(cmd.name(), Logged::Allow, "forwarded, answer filtered");
                filter_ls_response(&answer, &self.owned())
            }
            _ => {
                log.write(cmd.name(), Logged::Allow, "forwarded");
                encode_frame(&answer)
            }
        };
        client.write_all(&relayed).is_ok()
    }
}

impl crate::Filter for KittyFilter {
    fn name(&self) -> &'static str {
        "kitty"
    }

    fn serve(&self, mut client: UnixStream, log: &DecisionLog) {
        let mut frames = FrameBuffer::new();
        let mut buf = vec![0u8; 64 << 10];
        loop {
            loop {
                match frames.next_frame() {
                    Ok(Some(json)) => {
                        if !self.request(&mut client, &json, log) {
                            return;
                        }
                    }
                    Ok(None) => break,
                    Err(err) => {
                        refuse(&mut client, log, err);
                        return;
                    }
                }
            }
            match client.read(&mut buf) {
                Ok(0) => {
                    if let Err(err) = frames.finish() {
                        log.write("-", Logged::Deny, err.rule());
                    }
                    return;
                }
                Ok(n) => frames.push(&buf[..n]),
                Err(_) => {
                    if frames.pending() > 0 {
                        log.write("-", Logged::Deny, "no whole frame in time");
                    }
                    return;
                }
            }
        }
    }
}

fn refuse(client: &mut UnixStream, log: &DecisionLog, err: super::FrameError) {
    log.write("-", Logged::Deny, err.rule());
    if let Decision::Deny { response, .. } = deny_frame_error(err) {
        let _ = client.write_all(&response);
    }
}
