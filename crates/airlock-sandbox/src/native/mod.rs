//! The native Linux backend: namespaces, a root built on tmpfs, pivot_root, Landlock, seccomp.
//!
//! The order of a launch is described in `docs/architecture.md` ("The native backend"); each step
//! lives in one module:
//! `launch` (parent: clone, id maps, supervision), `child` (init and the workload's last steps),
//! `rootfs` (mounts and pivot_root), `keeper` (hidden files, kept by init), `net`, `caps`, `landlock`, `seccomp`, `creds` (groups and the
//! descriptor limit around the clone), `tty` (the sandbox's own pty and its relay), `cgroup`
//! (`[sandbox.resources]`), `notify` (the supervisor's answer to refused namespace calls), and `sys`
//! (raw calls).

pub mod caps;
pub mod cgroup;
mod child;
mod setup;
pub(crate) use child::send;
pub mod ahead;
mod closer;
mod creds;
#[cfg(test)]
mod forked;
pub(crate) mod init;
pub(crate) mod keeper;
pub mod landlock;
pub(crate) mod launch;
mod net;
mod notify;
pub mod prestart;
pub(crate) mod report;
pub(crate) mod rootfs;
pub mod seccomp;
pub mod stage;
mod supervise;
pub(crate) mod sys;
mod tty;
mod workload;

pub use child::SETUP_FAILED;
pub use launch::{
    Gates, LaunchError, NoGates, OOM_MARKER, Outcome, namespaces, run, run_prestarted,
};
pub use net::EGRESS_PORT;
pub use prestart::Prestart;
