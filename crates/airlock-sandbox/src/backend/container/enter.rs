//! Entering a running container's namespaces from the host, as the supervisor's forked helpers
//! do (the egress listener in its network namespace, the keeper in its mount namespace), by the
//! host pid of its first process (the go socket names it, `go.rs`). Only a single-threaded
//! process may join a user namespace: each helper is a fork of its own.

use std::time::{Duration, Instant};

use nix::sched::CloneFlags;

/// How long a namespace file may refuse us while the runtime's init still runs (see [`open`]).
const NS_WAIT: Duration = Duration::from_secs(5);

/// Opens `/proc/<pid>/ns/<kind>`.
///
/// The engine may name the pid while the runtime's init still runs in it, not dumpable
/// (rootless podman: its mm belongs to a user namespace above the container's), so the
/// namespace files refuse us until it execs the wrapper, a moment later.
fn open(pid: libc::pid_t, kind: &str) -> Result<std::fs::File, String> {
    let deadline = Instant::now() + NS_WAIT;
    loop {
        match std::fs::File::open(format!("/proc/{pid}/ns/{kind}")) {
            Err(e)
                if e.kind() == std::io::ErrorKind::PermissionDenied
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            other => {
                return other
                    .map_err(|e| format!("cannot open the container's {kind} namespace: {e}"));
            }
        }
    }
}

/// Waits until `/proc/<pid>/ns/<kind>` opens (see [`open`]), for a caller that opens it itself.
pub(super) fn wait_until_open(pid: libc::pid_t, kind: &str) -> Result<(), String> {
    open(pid, kind).map(drop)
}

/// Whether `pid` is in this process's namespace of `kind`.
fn same(pid: libc::pid_t, kind: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    let a = std::fs::metadata(format!("/proc/{pid}/ns/{kind}"));
    let b = std::fs::metadata(format!("/proc/self/ns/{kind}"));
    matches!((a, b), (Ok(a), Ok(b)) if a.ino() == b.ino() && a.dev() == b.dev())
}

/// Joins the user namespace of `pid` (when it is not ours: rootless podman), then its namespace
/// of `kind` (`"net"`, `"mnt"`). An engine that runs as another user (docker's daemon, a root
/// podman's socket) refuses us, and the error says so, then what to do (`hint`).
pub(super) fn join(
    pid: libc::pid_t,
    kind: &str,
    flag: CloneFlags,
    hint: &str,
) -> Result<(), String> {
    if !same(pid, "user") {
        let user = open(pid, "user")?;
        nix::sched::setns(user, CloneFlags::CLONE_NEWUSER)
            .map_err(|e| format!("cannot join the container's user namespace: {e}"))?;
    }
    let ns = open(pid, kind)?;
    nix::sched::setns(ns, flag).map_err(|e| {
        format!(
            "cannot join the container's {kind} namespace ({e}): the engine runs as another \
             user; {hint}"
        )
    })
}
