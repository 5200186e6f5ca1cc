//! When a launch gets the herdr filter, and with which policy (`[tools.herdr] mode`).
//!
//! Active when all hold: the launch runs inside a herdr pane (`HERDR_ENV=1`), `herdr` is on the
//! host's `PATH`, the host's socket answers, and a capability applies (a direct launch of an agent
//! whose herdr integration reports its session: claude, pi, codex) — or `mode = "enforce"`, which
//! needs no capability (the filter then answers `ping` and denies the rest). An unreachable socket
//! is a warning in `auto` mode (the launch goes on without the filter) and an error in `enforce`.

use std::ffi::OsString;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use super::{AgentReporting, FilterPolicy, LaunchOverlay, session_dir};

/// The host environment variables herdr sets in a pane that the sandbox gets as they are.
pub const PASSED_ENV: &[&str] = &[
    "HERDR_ENV",
    "HERDR_SESSION",
    "HERDR_WORKSPACE_ID",
    "HERDR_TAB_ID",
    "HERDR_PANE_ID",
];

/// What the launch does about herdr.
#[derive(Debug)]
pub enum Activation {
    /// No filter (not in herdr, disabled, or nothing asks for it).
    Off,
    /// No filter, and why the user should know (auto mode, socket unreachable).
    Warn(String),
    /// Start the filter with this policy in front of this socket.
    On {
        policy: FilterPolicy,
        host_socket: PathBuf,
    },
}

/// The host's herdr socket: `$HERDR_SOCKET_PATH`, a named session's under
/// `~/.config/herdr/sessions/<name>/`, else `$XDG_CONFIG_HOME/herdr/herdr.sock` (`~/.config`).
pub fn host_socket(home: &Path, env: &dyn Fn(&str) -> Option<OsString>) -> PathBuf {
    if let Some(path) = env("HERDR_SOCKET_PATH").filter(|v| !v.is_empty()) {
        return PathBuf::from(path);
    }
    let config = env("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".config"));
    match env("HERDR_SESSION").filter(|v| !v.is_empty()) {
        Some(name) => config.join("herdr/sessions").join(name).join("herdr.sock"),
        None => config.join("herdr/herdr.sock"),
    }
}

/// The id of airlock's own liveness check, so a log or a test can tell it from the sandbox's.
pub const PROBE_ID: &str = "airlock-probe";

/// Asks herdr for `ping` and checks the answer is a `pong`: the socket is herdr's and it serves.
fn ping(socket: &Path) -> std::io::Result<()> {
    use std::io::{Error, Write};
    let mut herdr = UnixStream::connect(socket)?;
    let deadline = Some(std::time::Duration::from_secs(2));
    herdr.set_read_timeout(deadline)?;
    herdr.set_write_timeout(deadline)?;
    let request = serde_json::json!({"id": PROBE_ID, "method": "ping", "params": {}});
    herdr.write_all(format!("{request}\n").as_bytes())?;
    let line = airlock_sockets::read_line(&mut herdr, super::MAX_LINE_BYTES)
        .map_err(|e| Error::other(format!("no answer to ping: {e:?}")))?;
    let answer: serde_json::Value = serde_json::from_slice(&line)
        .map_err(|_| Error::other("its answer to ping is not JSON"))?;
    if answer["result"]["type"] == "pong" {
        Ok(())
    } else {
        Err(Error::other("it did not answer ping with pong"))
    }
}

/// The agents whose direct launch reports its session through the filter.
pub const REPORTING_AGENTS: &[&str] = &["claude", "pi", "codex"];

/// Decides for one launch. `argv` is the command the sandbox runs (a direct agent launch when its
/// program is one of [`REPORTING_AGENTS`]); `mode` is `[tools.herdr] mode`; `launch_overlay` is
/// revdiff's capability when revdiff is a tool of this launch.
pub fn activation(
    mode: &str,
    herdr_on_path: bool,
    argv: &[String],
    home: &Path,
    env: &dyn Fn(&str) -> Option<OsString>,
    launch_overlay: Option<LaunchOverlay>,
) -> Result<Activation, String> {
    let enforce = mode == "enforce";
    if mode == "disabled" || env("HERDR_ENV").is_none_or(|v| v != "1") || !herdr_on_path {
        return Ok(Activation::Off);
    }
    let agent = argv
        .first()
        .and_then(|p| Path::new(p).file_name())
        .and_then(|n| n.to_str())
        .filter(|n| REPORTING_AGENTS.contains(n));
    let pane = env("HERDR_PANE_ID").and_then(|v| v.into_string().ok());
    let agent_reporting = match (agent, pane) {
        (Some(agent), Some(pane_id)) => {
            session_dir(agent, home, |k| env(k)).map(|session_dir| AgentReporting {
                pane_id,
                agent: agent.to_owned(),
                session_dir,
            })
        }
        _ => None,
    };
    if agent_reporting.is_none() && launch_overlay.is_none() && !enforce {
        return Ok(Activation::Off);
    }
    let socket = host_socket(home, env);
    if let Err(e) = ping(&socket) {
        let why = format!(
            "the herdr socket {} does not answer ({e})",
            socket.display()
        );
        return if enforce {
            Err(format!(
                "{why}; [tools.herdr] mode = \"enforce\" needs it: start herdr, or set mode = \"auto\""
            ))
        } else {
            Ok(Activation::Warn(format!(
                "{why}: the sandbox starts without herdr (agent session reports and overlays are off)"
            )))
        };
    }
    Ok(Activation::On {
        policy: FilterPolicy {
            notify: false,
            agent_reporting,
            launch_overlay,
        },
        host_socket: socket,
    })
}

/// What `airlock tools check herdr` says: the mode, the capabilities, and whether agent
/// reporting would be active for a direct agent launch from here, or which anchor is missing.
pub fn check_notes(
    mode: &str,
    herdr_on_path: bool,
    home: &Path,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Vec<String> {
    let mut notes = vec![format!("mode: {mode}")];
    if mode == "disabled" {
        notes.push(
            "the filter is off: no herdr socket inside, agent sessions are not reported".into(),
        );
        return notes;
    }
    notes.push(format!(
        "capabilities: ping always; agent_reporting for a direct `airlock {}` launch in a herdr pane",
        REPORTING_AGENTS.join("|")
    ));
    let mut missing = Vec::new();
    if env("HERDR_ENV").is_none_or(|v| v != "1") {
        missing.push("not inside a herdr pane (HERDR_ENV is not 1)".to_owned());
    }
    if env("HERDR_PANE_ID").is_none_or(|v| v.is_empty()) {
        missing.push("no HERDR_PANE_ID (the pane anchor)".to_owned());
    }
    if !herdr_on_path {
        missing.push("herdr is not on PATH".to_owned());
    }
    let socket = host_socket(home, env);
    if missing.is_empty() && ping(&socket).is_err() {
        missing.push(format!(
            "the herdr socket {} does not answer",
            socket.display()
        ));
    }
    if missing.is_empty() {
        notes.push(format!(
            "agent reporting: active for a direct launch of {} here (an agent typed in an airlock shell is not: the launched agent is the other anchor)",
            REPORTING_AGENTS.join(", ")
        ));
    } else {
        notes.push(format!("agent reporting: off here: {}", missing.join("; ")));
    }
    notes
}
