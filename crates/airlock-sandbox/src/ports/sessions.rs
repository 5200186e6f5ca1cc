//! Session records: `<run dir>/<pid>.json`, one per running supervisor, beside its control
//! socket. `airlock sessions` and `airlock forward` find running sessions here; a record whose
//! supervisor is gone (its pid dead, or reused by a process started at another time) is stale and
//! removed when listed.

use std::path::{Path, PathBuf};

use airlock_config::NetworkMode;
use serde::{Deserialize, Serialize};

/// The most a record may hold.
const RECORD_BYTES: u64 = 64 * 1024;

/// One running session, as its supervisor recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionRecord {
    /// The sandbox's name (`sandboxes list`).
    pub sandbox: String,
    pub project: PathBuf,
    /// The supervisor (the `airlock run` process).
    pub pid: u32,
    /// Its start time, clock ticks since boot (field 22 of `/proc/<pid>/stat`).
    pub started: u64,
    pub network: NetworkMode,
    /// The control socket.
    pub socket: PathBuf,
}

impl SessionRecord {
    /// The record of this process's session of `sandbox`, its control socket in `dir`.
    pub(crate) fn of_this_process(
        sandbox: &str,
        project: &Path,
        network: NetworkMode,
        dir: Option<&Path>,
    ) -> SessionRecord {
        let pid = std::process::id();
        SessionRecord {
            sandbox: sandbox.to_owned(),
            project: project.to_path_buf(),
            pid,
            started: start_time(pid).unwrap_or(0),
            network,
            socket: dir
                .map(|d| d.join(super::socket_name(pid)))
                .unwrap_or_default(),
        }
    }

    /// Whether its supervisor still runs.
    pub fn is_live(&self) -> bool {
        start_time(self.pid) == Some(self.started)
    }
}

/// A process's start time (field 22 of `/proc/<pid>/stat`), to tell it from a reused pid.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(19)?.parse().ok()
}

/// The live sessions recorded in `run_dir`, by pid. Stale records and their sockets are removed;
/// files that are not records (a link, a FIFO, bad JSON, a name that is not `<pid>.json`) are
/// skipped, never followed.
pub fn list(run_dir: &Path) -> Vec<SessionRecord> {
    let Ok(entries) = std::fs::read_dir(run_dir) else {
        return Vec::new();
    };
    let mut live = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".json"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let path = entry.path();
        let Ok(bytes) = airlock_config::hostfs::read_regular(&path, RECORD_BYTES) else {
            continue;
        };
        let Ok(record) = serde_json::from_slice::<SessionRecord>(&bytes) else {
            continue;
        };
        if record.pid != pid {
            continue;
        }
        if record.is_live() {
            live.push(record);
        } else {
            let _ = std::fs::remove_file(&path);
            let _ = std::fs::remove_file(run_dir.join(super::socket_name(pid)));
        }
    }
    live.sort_by_key(|r| r.pid);
    live
}

/// Which running session a command means.
#[derive(Debug, Clone, Copy)]
pub enum Selector<'a> {
    /// `--session PID`: the supervisor's pid.
    Pid(u32),
    /// `--sandbox NAME`, or the current project's sandbox.
    Sandbox(&'a str),
}

/// The one live session `selector` names, or why there is none (or more than one).
pub fn find(run_dir: &Path, selector: Selector<'_>) -> Result<SessionRecord, String> {
    let live = list(run_dir);
    match selector {
        Selector::Pid(pid) => live.into_iter().find(|r| r.pid == pid).ok_or_else(|| {
            format!(
                "no running airlock session has supervisor pid {pid}; `airlock sessions` lists them"
            )
        }),
        Selector::Sandbox(name) => {
            let mut of: Vec<SessionRecord> =
                live.into_iter().filter(|r| r.sandbox == name).collect();
            match of.len() {
                0 => Err(format!(
                    "sandbox {name} has no running session; start one with `airlock run`, or see \
                     `airlock sessions`"
                )),
                1 => Ok(of.remove(0)),
                _ => Err(format!(
                    "sandbox {name} has {} running sessions (pids {}); choose one with --session PID",
                    of.len(),
                    of.iter()
                        .map(|r| r.pid.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            }
        }
    }
}
