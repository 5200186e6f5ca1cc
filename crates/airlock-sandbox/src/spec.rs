//! The SandboxSpec: plain data describing one sandbox launch.
//!
//! Every backend consumes the same spec; every policy decision is tested by asserting on it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use airlock_config::NetworkMode;
use serde::{Deserialize, Serialize};

/// Everything a backend needs to launch one sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxSpec {
    /// `<basename>-<sha256(project)[:8]>`; also `AIRLOCK_PROJECT`.
    pub name: String,
    /// The project root on the host, mounted read-write at the same path.
    pub project: PathBuf,
    /// The per-project state root on the host (holds `home/`).
    pub state_root: PathBuf,
    /// The working directory inside the sandbox.
    pub cwd: PathBuf,
    /// The workload's argv; `argv[0]` is looked up on the sandbox's `PATH`.
    pub argv: Vec<String>,
    /// The workload's whole environment (nothing else is inherited).
    pub env: BTreeMap<String, String>,
    /// The uid and gid inside, mapped to the same ids on the host.
    pub uid: u32,
    pub gid: u32,
    pub hostname: String,
    pub network: NetworkMode,
    /// Mount operations, parents before children.
    pub mounts: Vec<MountOp>,
    /// Paths the workload may write (Landlock's second layer); everything else is read-only.
    pub writable: Vec<PathBuf>,
    pub seccomp: SeccompPolicy,
}

/// One step of building the sandbox's root. Targets are absolute paths inside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum MountOp {
    /// A recursive bind of a host path (directory or file).
    Bind {
        source: PathBuf,
        target: PathBuf,
        writable: bool,
    },
    /// A fresh tmpfs.
    Tmpfs { target: PathBuf, writable: bool },
    /// An empty read-only file (a read-only bind of `/dev/null`) over a file.
    MaskFile { target: PathBuf },
    /// A symlink created in the sandbox's root.
    Symlink { target: PathBuf, link_to: PathBuf },
    /// A fresh procfs of the sandbox's pid namespace.
    Proc { target: PathBuf },
    /// A minimal /dev: null zero full random urandom tty, a new devpts, shm.
    Dev { target: PathBuf },
}

impl MountOp {
    /// The path inside the sandbox this operation creates or covers.
    pub fn target(&self) -> &std::path::Path {
        match self {
            MountOp::Bind { target, .. }
            | MountOp::Tmpfs { target, .. }
            | MountOp::MaskFile { target }
            | MountOp::Symlink { target, .. }
            | MountOp::Proc { target }
            | MountOp::Dev { target } => target,
        }
    }
}

/// What the seccomp filter allows beyond its fixed denials.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeccompPolicy {
    /// Allow namespace-creating clone/unshare flags, setns and the mount family.
    pub nested_namespaces: bool,
}
