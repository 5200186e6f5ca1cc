//! What the sandbox inherits from the supervisor's credentials and limits, adjusted around the clone:
//! root's supplementary groups are dropped for the sandbox, and the descriptor limit the supervisor
//! raises for the egress proxy is put back for the workload.

use std::io;

use nix::sys::resource::{Resource, getrlimit, setrlimit};

/// Root's supplementary groups, dropped while the sandbox is cloned and restored right after.
///
/// A user namespace keeps the groups of the process that made it (shown as 65534 inside when
/// unmapped) and they still grant group access to host inodes, such as a root-only `ssl-cert` or
/// `docker` group's files in a mounted path. Only a process with CAP_SETGID can drop them; an
/// unprivileged caller keeps its own (docs/security.md says so).
pub(super) struct DroppedGroups(Vec<libc::gid_t>);

impl DroppedGroups {
    /// Drops the supplementary groups when running as root; `None` when there is nothing to drop
    /// or the caller is unprivileged. The caller must be single-threaded (the raw call changes only
    /// the calling thread's credentials).
    pub(super) fn for_clone() -> io::Result<Option<DroppedGroups>> {
        let groups = nix::unistd::getgroups()?;
        if groups.is_empty() || !nix::unistd::geteuid().is_root() {
            return Ok(None);
        }
        // SAFETY: setgroups with an empty list reads no memory.
        if unsafe { libc::syscall(libc::SYS_setgroups, 0usize, std::ptr::null::<libc::gid_t>()) }
            != 0
        {
            let e = io::Error::last_os_error();
            let listed: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "cannot drop the supplementary groups {} before starting the sandbox ({e}); \
                     run airlock with CAP_SETGID, or as a user without supplementary groups",
                    listed.join(",")
                ),
            ));
        }
        Ok(Some(DroppedGroups(
            groups.into_iter().map(|g| g.as_raw()).collect(),
        )))
    }

    /// Gives the supervisor its groups back; the sandbox, already cloned, keeps none.
    pub(super) fn restore(self) {
        // SAFETY: a valid pointer to `self.0.len()` gids.
        let rc = unsafe { libc::syscall(libc::SYS_setgroups, self.0.len(), self.0.as_ptr()) };
        if rc != 0 {
            // Root without its supplementary groups loses nothing it needs (it bypasses DAC).
            eprintln!(
                "airlock: warning: cannot restore the supervisor's supplementary groups: {}",
                io::Error::last_os_error()
            );
        }
    }
}

/// The supervisor's descriptor limit before [`raise_fd_limit`], to restore in the workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdLimit {
    pub soft: u64,
    pub hard: u64,
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit: each connection through the egress proxy
/// holds two descriptors, and the common soft limit of 1024 would run out long before the proxy's
/// connection cap. Returns the limit as it was, or `None` when it cannot be read (nothing changes).
pub(super) fn raise_fd_limit() -> Option<FdLimit> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    if soft < hard {
        // Best effort: if this fails the proxy sizes its cap from the limit it has.
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
    Some(FdLimit { soft, hard })
}

/// Puts the limit the supervisor was started with back, so the workload sees the developer's own
/// (programs that loop up to the soft limit, or still use select(), expect 1024, not a million).
pub(super) fn restore_fd_limit(limit: FdLimit) -> io::Result<()> {
    setrlimit(Resource::RLIMIT_NOFILE, limit.soft, limit.hard).map_err(io::Error::from)
}
