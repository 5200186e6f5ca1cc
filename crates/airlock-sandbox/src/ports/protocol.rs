//! The control socket's protocol: one request line in, one answer line out, then the connection
//! closes.
//!
//! | request | answer |
//! |---|---|
//! | `forward <host>:<sandbox>` | `ok <what was opened>` — an inbound forward until the session ends |
//! | `callback <port>` | `ok <what was opened>` — an OAuth callback forward, bounded (see `crate::ports`) |
//! | `remove <host>` | `ok <what was closed>` — the inbound forward on the host's port `<host>` stops listening; connections already open go on |
//! | `ports` | `ok <JSON array of [`ForwardInfo`]>` |
//!
//! Anything else, or a refusal, is `error <reason>`. A request is at most [`MAX_REQUEST`] bytes
//! and ends with `\n`; ports are decimal digits only.

use std::io::{Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use airlock_config::ports::{PortDirection, parse_mapping};
use serde::{Deserialize, Serialize};

/// The longest request line, newline included.
pub const MAX_REQUEST: usize = 64;
/// The longest answer line a client reads.
pub const MAX_ANSWER: usize = 64 * 1024;

/// What a client may ask a supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Open the host's `127.0.0.1:<host>` onto the sandbox's `127.0.0.1:<sandbox>`.
    Forward { host: u16, sandbox: u16 },
    /// The bridge, for an `/open` whose URL names `http://localhost:<port>` as its callback.
    Callback { port: u16 },
    /// Close the inbound forward listening on the host's `127.0.0.1:<host>`.
    Remove { host: u16 },
    /// The session's forwards.
    Ports,
}

impl Request {
    /// The request in `line` (without its `\n`).
    pub fn parse(line: &[u8]) -> Result<Request, String> {
        const EXPECTED: &str =
            "expected `forward HOST:SANDBOX`, `callback PORT`, `remove HOST` or `ports`";
        let text = std::str::from_utf8(line)
            .ok()
            .filter(|t| t.bytes().all(|b| b.is_ascii_graphic() || b == b' '))
            .ok_or_else(|| format!("the request is not one line of plain text; {EXPECTED}"))?;
        let (verb, ports) = text.split_once(' ').unwrap_or((text, ""));
        // One spelling per request: `forward 080:3000` would name the same ports as `forward
        // 80:3000` (found by the ports_request fuzz target).
        if ports.split(':').any(|p| p.len() > 1 && p.starts_with('0')) {
            return Err(format!(
                "{verb}: a port written with a leading zero; {EXPECTED}"
            ));
        }
        match text.split_once(' ') {
            None if text == "ports" => Ok(Request::Ports),
            Some(("forward", mapping)) => {
                let (host, sandbox) = parse_mapping(mapping)?;
                Ok(Request::Forward { host, sandbox })
            }
            Some(("callback", port)) if !port.contains(':') => {
                let (port, _) = parse_mapping(port)?;
                Ok(Request::Callback { port })
            }
            Some(("remove", host)) if !host.contains(':') => {
                let (host, _) = parse_mapping(host)?;
                Ok(Request::Remove { host })
            }
            _ => Err(format!(
                "unknown request {:?}; {EXPECTED}",
                airlock_config::printable(&text.chars().take(32).collect::<String>())
            )),
        }
    }

    /// The line a client sends, `\n` included.
    pub fn line(&self) -> String {
        match self {
            Request::Forward { host, sandbox } => format!("forward {host}:{sandbox}\n"),
            Request::Callback { port } => format!("callback {port}\n"),
            Request::Remove { host } => format!("remove {host}\n"),
            Request::Ports => "ports\n".into(),
        }
    }
}

/// What made a forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ForwardKind {
    /// A `[[network.ports]]` entry.
    Config,
    /// `airlock run --publish`.
    Publish,
    /// `airlock forward`, into the running session.
    Forward,
    /// An OAuth callback the bridge asked for.
    Callback,
}

impl ForwardKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ForwardKind::Config => "config",
            ForwardKind::Publish => "publish",
            ForwardKind::Forward => "forward",
            ForwardKind::Callback => "callback",
        }
    }
}

/// One live forward, as `ports` answers it (and `airlock sessions --json` prints it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForwardInfo {
    pub host: u16,
    pub sandbox: u16,
    pub direction: PortDirection,
    pub kind: ForwardKind,
    /// Seconds until it closes on its own (callback forwards); null: with the session.
    #[serde(default)]
    pub expires_in_secs: Option<u64>,
}

/// Why a supervisor gave no `ok`.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    #[error("cannot reach the session's control socket {path}: {source}")]
    Unreachable {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// The supervisor's own `error` answer.
    #[error("{0}")]
    Refused(String),
    #[error("the session's supervisor gave no valid answer ({0})")]
    BadAnswer(String),
}

/// Sends `request` to the control socket at `socket` and returns the text after `ok `.
pub fn ask(socket: &Path, request: &Request, timeout: Duration) -> Result<String, AskError> {
    let unreachable = |source| AskError::Unreachable {
        path: socket.to_path_buf(),
        source,
    };
    let mut stream = UnixStream::connect(socket).map_err(unreachable)?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .map_err(unreachable)?;
    stream
        .write_all(request.line().as_bytes())
        .map_err(unreachable)?;
    let mut answer = Vec::new();
    (&mut stream)
        .take(MAX_ANSWER as u64)
        .read_to_end(&mut answer)
        .map_err(|e| AskError::BadAnswer(e.to_string()))?;
    parse_answer(&answer)
}

/// `ok <text>\n` → the text; `error <reason>\n` → [`AskError::Refused`].
pub fn parse_answer(answer: &[u8]) -> Result<String, AskError> {
    let text = String::from_utf8_lossy(answer);
    let line = text
        .strip_suffix('\n')
        .filter(|l| !l.contains('\n'))
        .ok_or_else(|| AskError::BadAnswer("not one line".into()))?;
    if let Some(ok) = line.strip_prefix("ok ") {
        return Ok(ok.to_owned());
    }
    match line.strip_prefix("error ") {
        Some(reason) => Err(AskError::Refused(airlock_config::printable(reason))),
        None => Err(AskError::BadAnswer(airlock_config::printable(
            &line.chars().take(64).collect::<String>(),
        ))),
    }
}

/// The answer line for `result`.
pub(crate) fn answer_line(result: &Result<String, String>) -> String {
    // One line whatever the text holds: a newline would end the answer early.
    let flat = |s: &str| s.replace(['\n', '\r'], " ");
    match result {
        Ok(text) => format!("ok {}\n", flat(text)),
        Err(reason) => format!("error {}\n", flat(reason)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_strictly() {
        assert_eq!(
            Request::parse(b"forward 8080:3000"),
            Ok(Request::Forward {
                host: 8080,
                sandbox: 3000
            })
        );
        assert_eq!(
            Request::parse(b"forward 3000"),
            Ok(Request::Forward {
                host: 3000,
                sandbox: 3000
            })
        );
        assert_eq!(
            Request::parse(b"callback 1455"),
            Ok(Request::Callback { port: 1455 })
        );
        assert_eq!(Request::parse(b"ports"), Ok(Request::Ports));
        assert_eq!(
            Request::parse(b"remove 8080"),
            Ok(Request::Remove { host: 8080 })
        );
        for bad in [
            &b""[..],
            b"ports ",
            b"PORTS",
            b"forward",
            b"forward ",
            b"forward 0:1",
            b"forward 1:70000",
            b"forward  80:80",
            b"forward +80:80",
            b"forward 80:80 extra",
            b"callback 1:2",
            b"callback -1",
            b"callback 1455\r",
            b"remove",
            b"remove 0",
            b"remove 08080",
            b"forward 8:03000",
            b"callback 01455",
            b"remove 8080:3000",
            b"remove 65536",
            b"remove 80 80",
            b"REMOVE 80",
            b"shell rm -rf /",
            b"forward 80:80\x00",
            b"\xff\xfe",
        ] {
            assert!(
                Request::parse(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        for r in [
            Request::Ports,
            Request::Callback { port: 9 },
            Request::Remove { host: 65535 },
            Request::Forward {
                host: 1,
                sandbox: 2,
            },
        ] {
            let line = r.line();
            assert_eq!(Request::parse(line.trim_end().as_bytes()), Ok(r));
            assert!(line.len() <= MAX_REQUEST);
        }
    }

    proptest::proptest! {
        /// Arbitrary bytes never panic; what is accepted is one of the four requests, with ports
        /// from 1 to 65535, and reads back the same from the line a client sends.
        #[test]
        fn any_bytes_are_one_of_four_requests_or_refused(
            line in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80)
        ) {
            if let Ok(request) = Request::parse(&line) {
                let sent = request.line();
                proptest::prop_assert!(sent.len() <= MAX_REQUEST);
                proptest::prop_assert_eq!(Request::parse(sent.trim_end().as_bytes()), Ok(request));
                let ports = match request {
                    Request::Forward { host, sandbox } => vec![host, sandbox],
                    Request::Callback { port } | Request::Remove { host: port } => vec![port],
                    Request::Ports => vec![],
                };
                proptest::prop_assert!(ports.iter().all(|p| *p != 0));
            }
        }

        #[test]
        fn forward_lines_are_accepted_exactly_for_ports_in_range(host in 0u32..100_000, sandbox in 0u32..100_000) {
            let parsed = Request::parse(format!("forward {host}:{sandbox}").as_bytes());
            let in_range = |p: u32| (1..=65535).contains(&p);
            proptest::prop_assert_eq!(parsed.is_ok(), in_range(host) && in_range(sandbox));
        }
    }

    #[test]
    fn answers_are_one_line_each_way() {
        assert_eq!(answer_line(&Ok("a\nb".into())), "ok a b\n");
        assert_eq!(answer_line(&Err("no\r\nway".into())), "error no  way\n");
        assert_eq!(parse_answer(b"ok fine\n").unwrap(), "fine");
        assert!(matches!(
            parse_answer(b"error in use\n"),
            Err(AskError::Refused(r)) if r == "in use"
        ));
        assert!(matches!(parse_answer(b"ok x"), Err(AskError::BadAnswer(_))));
        assert!(matches!(
            parse_answer(b"ok x\nok y\n"),
            Err(AskError::BadAnswer(_))
        ));
        assert!(matches!(
            parse_answer(b"error \x1b]52;c;AAAA\x07\n"),
            Err(AskError::Refused(r)) if !r.contains('\x1b')
        ));
    }
}
