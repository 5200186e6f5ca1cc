//! The least a daemon serving `/open` can cost, for `scripts/bench-bridge`: airlock's own checks
//! (the session record and its supervisor, the URL's rules and the sandbox's scope, the audit
//! line) and the opener run as the daemon runs it (in `/`, the same environment, a process group
//! of its own, stderr read to its end), but on one blocking thread with no async runtime, no HTTP
//! library and no timeouts. The shim calls it exactly as it calls the daemon.
//!
//! The environment matters: with `LANG=C.UTF-8` the opener loads its locale, 0.43 ms here
//! (paired), so a floor that passed less than the daemon would flatter it.
//!
//! What this leaves out is what a real daemon must have and this one must not be used without:
//! per-connection deadlines, the connection cap, rate buckets, the other routes, SIGTERM. So the
//! shim's time against this server, less the spawn floor, is the floor under the bridge's own
//! cost on this machine; the real daemon's excess over it is what tokio and hyper add.
//!
//! Usage: daemon_floor STATE_DIR (serves STATE_DIR/run/bridge.sock; sessions in
//! STATE_DIR/sessions, the audit log at STATE_DIR/log; the opener is `xdg-open` on PATH)

use std::ffi::OsString;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Stdio};

use airlock_bridge::BridgePaths;
use airlock_bridge::audit::{AuditLog, LONG_FIELD, Outcome, clip};
use airlock_bridge::launcher;
use airlock_bridge::routes::open;
use airlock_bridge::scope;

fn main() {
    let dir = std::env::args_os()
        .nth(1)
        .expect("usage: daemon_floor STATE_DIR");
    let paths = BridgePaths::at(&dir);
    let socket = paths.socket();
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket).expect("bind the socket");
    let audit = AuditLog::open(&paths.log()).expect("open the audit log");
    let opener = launcher::find("xdg-open").expect("xdg-open on PATH");
    for stream in listener.incoming().flatten() {
        let (status, reason) = serve(&paths, &audit, &opener, &stream);
        // One write, as hyper makes it (`write!` on the bare stream would send each piece).
        let head =
            format!("HTTP/1.1 {status} {reason}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        let mut stream = stream;
        let _ = stream.write_all(head.as_bytes());
    }
}

/// One request: the status line's code and reason.
fn serve(
    paths: &BridgePaths,
    audit: &AuditLog,
    opener: &Path,
    stream: &UnixStream,
) -> (u16, &'static str) {
    let mut reader = BufReader::new(stream);
    let mut bearer = None;
    let mut length = 0usize;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return (400, "Bad Request");
        }
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let Some((name, value)) = header.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("authorization") {
            bearer = value.strip_prefix("Bearer ").map(str::to_owned);
        } else if name.eq_ignore_ascii_case("content-length") {
            length = value.parse().unwrap_or(usize::MAX);
        }
    }
    if length > 16 * 1024 {
        return (413, "Payload Too Large");
    }
    let mut body = vec![0u8; length];
    if reader.read_exact(&mut body).is_err() {
        return (400, "Bad Request");
    }
    let Some(scope) = bearer.and_then(|t| scope::lookup(paths, t.as_bytes())) else {
        audit.unauthenticated("/open");
        return (401, "Unauthorized");
    };
    let url = match open::decide(&body) {
        Ok(url) => url,
        Err(reason) => {
            audit.record("/open", &Outcome::Rejected(reason), &[]);
            return (400, "Bad Request");
        }
    };
    let fields = [("url", clip(&open::loggable(&url), LONG_FIELD))];
    if let Err(reason) = scope.allows_open(&url) {
        audit.record("/open", &Outcome::Rejected(reason), &fields);
        return (403, "Forbidden");
    }
    let mut child = match Command::new(opener)
        .arg(OsString::from(url.as_str()))
        .current_dir("/")
        .env_clear()
        .envs(launcher::host_env())
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            audit.record("/open", &Outcome::Failed(e.to_string()), &fields);
            return (502, "Bad Gateway");
        }
    };
    let mut stderr = Vec::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = pipe.read_to_end(&mut stderr);
    }
    match child.wait() {
        Ok(status) if status.success() => {
            audit.record("/open", &Outcome::Ok, &fields);
            (204, "No Content")
        }
        _ => {
            let reason = String::from_utf8_lossy(&stderr).into_owned();
            audit.record("/open", &Outcome::Failed(reason), &fields);
            (502, "Bad Gateway")
        }
    }
}
