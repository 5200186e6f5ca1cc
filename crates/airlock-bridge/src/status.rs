//! `airlock bridge status`: read-only on the state dir; asks the supervisor and the daemon.

use std::path::PathBuf;

use serde::Serialize;

use crate::install::{InstallContext, read_pid, run_tool};
use crate::supervisor::{SupervisorKind, launchd, systemd};

/// `airlock bridge status`, as printed and as `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct BridgeStatus {
    pub state_dir: PathBuf,
    pub token_present: bool,
    pub port: Option<u16>,
    pub socket: PathBuf,
    pub socket_present: bool,
    pub pid: Option<u32>,
    /// `GET /healthz` answered on either transport.
    pub daemon_responding: bool,
    pub supervisor: SupervisorStatus,
}

#[derive(Debug, Clone, Serialize)]
pub struct SupervisorStatus {
    pub kind: &'static str,
    pub unit: Option<PathBuf>,
    pub installed: bool,
    /// None when the supervisor could not be asked.
    pub running: Option<bool>,
    /// The supervisor's own status excerpt.
    pub detail: Option<String>,
}

/// Reads the state (read-only) and asks the supervisor and the daemon.
pub fn status(ctx: &InstallContext) -> BridgeStatus {
    let unit = ctx.unit();
    let installed = unit.as_ref().is_some_and(|u| u.exists());
    let (running, detail) = match ctx.supervisor {
        SupervisorKind::Systemd if installed => {
            let active = run_tool("systemctl", systemd::IS_ACTIVE).ok();
            let detail = run_tool("systemctl", systemd::STATUS)
                .ok()
                .map(|o| excerpt(&o.stdout, &o.stderr));
            (active.map(|o| o.stdout.trim() == "active"), detail)
        }
        SupervisorKind::Launchd if installed => {
            match run_tool("launchctl", &["print", &launchd::service(ctx.uid)]) {
                Ok(out) => (
                    Some(out.success && out.stdout.contains("state = running")),
                    Some(excerpt(&out.stdout, &out.stderr)),
                ),
                Err(e) => (None, Some(e)),
            }
        }
        _ => (None, None),
    };
    BridgeStatus {
        state_dir: ctx.bridge.dir.clone(),
        token_present: ctx.bridge.token().exists(),
        port: std::fs::read_to_string(ctx.bridge.port())
            .ok()
            .and_then(|p| p.trim().parse().ok()),
        socket: ctx.bridge.socket(),
        socket_present: std::fs::symlink_metadata(ctx.bridge.socket()).is_ok(),
        pid: read_pid(&ctx.bridge),
        daemon_responding: crate::client::healthz(&ctx.bridge),
        supervisor: SupervisorStatus {
            kind: ctx.supervisor.as_str(),
            unit,
            installed,
            running,
            detail,
        },
    }
}

/// The first few lines of a supervisor's status output.
fn excerpt(stdout: &str, stderr: &str) -> String {
    let text = if stdout.trim().is_empty() {
        stderr
    } else {
        stdout
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .take(6)
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
}
