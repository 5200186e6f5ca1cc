//! The spec as a bubblewrap argv: namespaces, ids, hostname and the root, op by op.
//!
//! bwrap builds the namespaces and the mounts; airlock's stage (`/run/airlock/airlock-stage`, the
//! command bwrap runs) does the rest as native's init does: the hidden files, the egress listener,
//! Landlock, seccomp, the terminal, and the overlays bwrap 0.8 cannot build. What cannot be
//! built that way is refused by [`unsupported`], never left out.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use airlock_config::NetworkMode;

use crate::spec::{MountOp, SandboxSpec, Upper};

/// Where the stage (the airlock binary) is bound inside, read-only.
pub const STAGE_PATH: &str = "/run/airlock/airlock-stage";

/// The launch socket and the stage's plan, at these descriptors in bwrap and the stage.
pub const SOCK_FD: i32 = 3;
pub const PLAN_FD: i32 = 4;
/// The first descriptor handed to bwrap for `--file` / `--ro-bind-data`.
const FIRST_DATA_FD: i32 = 5;

/// What one data descriptor handed to bwrap holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataFd {
    /// Nothing: the empty read-only file of a mask.
    Empty,
    /// A host file's contents: a private copy inside.
    File(PathBuf),
}

/// The argv after the bwrap program, and the descriptors it names, from [`FIRST_DATA_FD`] on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub args: Vec<OsString>,
    pub data: Vec<DataFd>,
}

/// What the bwrap backend cannot honour in `spec`: one sentence each, naming the feature and the
/// alternative. A launch with any of them is refused.
///
/// The stage mounts each overlay after bwrap has built the whole root (bubblewrap 0.8 has no
/// overlays), so a later mount beneath an overlay's target would end up under the overlay, hidden:
/// refused rather than lost.
pub fn unsupported(spec: &SandboxSpec) -> Vec<String> {
    let mut out = Vec::new();
    for (i, op) in spec.mounts.iter().enumerate() {
        let MountOp::Overlay { target, .. } = op else {
            continue;
        };
        let beneath: Vec<String> = spec.mounts[i + 1..]
            .iter()
            .map(MountOp::target)
            .filter(|t| t.starts_with(target) && *t != target.as_path())
            .map(|t| t.display().to_string())
            .collect();
        if !beneath.is_empty() {
            out.push(format!(
                "the bwrap backend mounts overlays after bubblewrap has built the root, and {} \
                 is mounted beneath the overlay on {}, where it would be hidden; use --backend \
                 native, or give that tool mount_mode = \"readonly\" or \"readwrite\"",
                beneath.join(", "),
                target.display()
            ));
        }
    }
    out
}

/// Where bwrap puts overlay number `i`'s layer dir (its `upper/` and `work/`), or the stage its
/// tmpfs for throwaway writes: the stage detaches it once the overlay is mounted.
pub fn staging_dir(i: usize) -> String {
    format!("/run/airlock/overlays/{i}")
}

/// Where a stacked overlay's saved upper (read-only, the owner's) is staged.
pub fn stacked_dir(i: usize) -> String {
    format!("/run/airlock/overlays/{i}-saved")
}

/// Renders `spec` for bwrap; `stage` is the host path of the airlock binary the stage runs from.
/// The command bwrap runs is the stage, with no arguments: its plan comes on [`PLAN_FD`].
/// Refused (the reasons of [`unsupported`], joined) when the spec asks for what bwrap lacks.
pub fn render(spec: &SandboxSpec, stage: &Path) -> Result<Rendered, String> {
    let refused = unsupported(spec);
    if !refused.is_empty() {
        return Err(refused.join("; "));
    }
    let mut r = Renderer::default();
    r.flag("--unshare-user");
    r.flag("--unshare-pid");
    r.flag("--unshare-ipc");
    r.flag("--unshare-uts");
    if spec.network != NetworkMode::Host {
        r.flag("--unshare-net");
    }
    // The stage is uid 0 of the one user namespace bwrap makes, which owns the mounts: its init
    // keeps files hidden with mounts. The workload runs as the spec's ids in a user namespace of
    // its own below (see native's `own_user_ns`), where mounts are out of its reach.
    r.opt("--uid", "0");
    r.opt("--gid", "0");
    r.opt("--hostname", &spec.hostname);
    r.flag("--die-with-parent");
    // For the stage, in the sandbox's own user namespace: its init hides files with mounts; the
    // workload drops every capability before it runs.
    r.opt("--cap-add", "ALL");
    let tmpfs_size = spec.limits.tmpfs_bytes;
    let keeper_dir = Path::new(crate::hide::PINNED_DIR);
    for op in &spec.mounts {
        if !r.keeper_dir && op.target().starts_with(keeper_dir) && op.target() != keeper_dir {
            // The keeper's directory is a tmpfs of its own (see the empty file below), made before
            // the first thing in it: the pinned files' sources, the empty file.
            r.keeper_dir = true;
            r.opt("--perms", "0755");
            r.opt("--tmpfs", keeper_dir.as_os_str());
        }
        r.mount(op, tmpfs_size);
    }
    r.stage_overlays(&spec.mounts);
    if r.keeper_dir {
        r.opt("--remount-ro", crate::hide::PINNED_DIR);
    }
    r.pair("--ro-bind", stage, Path::new(STAGE_PATH));
    r.opt("--remount-ro", "/");
    r.flag("--");
    r.arg(STAGE_PATH);
    Ok(Rendered {
        args: r.args,
        data: r.data,
    })
}

#[derive(Default)]
struct Renderer {
    args: Vec<OsString>,
    data: Vec<DataFd>,
    /// Whether the keeper's directory (`/run/airlock/hidden`) is a tmpfs of its own, made
    /// read-only once everything in it is in place.
    keeper_dir: bool,
}

impl Renderer {
    fn arg(&mut self, a: impl Into<OsString>) {
        self.args.push(a.into());
    }

    fn flag(&mut self, f: &str) {
        self.arg(f);
    }

    fn opt(&mut self, f: &str, v: impl Into<OsString>) {
        self.arg(f);
        self.arg(v);
    }

    fn pair(&mut self, f: &str, a: &Path, b: &Path) {
        self.arg(f);
        self.arg(a.as_os_str());
        self.arg(b.as_os_str());
    }

    /// A data descriptor's number, its contents recorded for the launch.
    fn data_fd(&mut self, what: DataFd) -> String {
        self.data.push(what);
        (FIRST_DATA_FD + self.data.len() as i32 - 1).to_string()
    }

    /// Each overlay's layers where the stage finds them: the layer dir bound writable for a
    /// persistent or owned upper, an empty dir for the stage's tmpfs otherwise, and a stacked
    /// overlay's saved upper read-only.
    fn stage_overlays(&mut self, mounts: &[MountOp]) {
        let uppers = mounts.iter().filter_map(|op| match op {
            MountOp::Overlay { upper, .. } => Some(upper),
            _ => None,
        });
        for (i, upper) in uppers.enumerate() {
            let staged = staging_dir(i);
            match upper {
                Upper::Persistent { dir } | Upper::Owned { dir } => {
                    self.pair("--bind", dir, Path::new(&staged));
                }
                Upper::Throwaway => self.opt("--dir", staged),
                Upper::Stacked { dir } => {
                    self.opt("--dir", staged);
                    self.pair("--ro-bind", &dir.join("upper"), Path::new(&stacked_dir(i)));
                }
            }
        }
    }

    fn mount(&mut self, op: &MountOp, tmpfs_size: u64) {
        match op {
            MountOp::Bind {
                source,
                target,
                writable,
            } => {
                let flag = if *writable { "--bind" } else { "--ro-bind" };
                self.pair(flag, source, target);
            }
            MountOp::Tmpfs { target, writable } => {
                if *writable {
                    self.opt("--perms", "1777");
                    if tmpfs_size > 0 {
                        self.opt("--size", tmpfs_size.to_string());
                    }
                    self.opt("--tmpfs", target.as_os_str());
                } else {
                    self.opt("--perms", "0755");
                    self.opt("--tmpfs", target.as_os_str());
                    self.opt("--remount-ro", target.as_os_str());
                }
            }
            // The keeper's empty file, which its masks are clones of: a real file on a read-only
            // tmpfs. (A --ro-bind-data file is a bind of a file bwrap then deletes, and the kernel
            // refuses to attach a clone of a deleted file: the masks would fail with ENOENT.)
            MountOp::MaskFile { target } if target == Path::new(crate::hide::EMPTY) => {
                let fd = self.data_fd(DataFd::Empty);
                self.opt("--perms", "0444");
                self.opt("--file", fd);
                self.arg(target.as_os_str());
            }
            MountOp::MaskFile { target } => {
                let fd = self.data_fd(DataFd::Empty);
                self.opt("--perms", "0444");
                self.opt("--ro-bind-data", fd);
                self.arg(target.as_os_str());
            }
            MountOp::CopyFile { source, target } => {
                let fd = self.data_fd(DataFd::File(source.clone()));
                self.opt("--perms", "0644");
                self.opt("--file", fd);
                self.arg(target.as_os_str());
            }
            MountOp::Symlink { target, link_to } => self.pair("--symlink", link_to, target),
            MountOp::Proc { target } => self.opt("--proc", target.as_os_str()),
            // bwrap binds the host's device nodes writable (and has no read-only bind that keeps
            // devices working): the stage makes them read-only before the workload runs.
            MountOp::Dev { target } => self.opt("--dev", target.as_os_str()),
            // The lower, read-only at the target; the stage puts the overlay on it (see
            // stage_overlays and native/stage/overlays.rs).
            MountOp::Overlay { lower, target, .. } => self.pair("--ro-bind", lower, target),
        }
    }
}

#[cfg(test)]
mod tests;
