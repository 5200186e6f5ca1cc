//! The SandboxSpec: plain data describing one sandbox launch.
//!
//! Every backend consumes the same spec; every policy decision is tested by asserting on it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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
    /// What `--print-spec` shows instead of each value `[sandbox.environment]` took from a host
    /// variable or a file (`<from file ~/.x>`), see [`SandboxSpec::redacted`]. Never serialised.
    #[serde(skip)]
    pub env_placeholders: BTreeMap<String, String>,
    /// The uid and gid inside, mapped to the same ids on the host.
    pub uid: u32,
    pub gid: u32,
    pub hostname: String,
    pub network: NetworkMode,
    /// The egress proxy, in `proxy` network mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub egress: Option<EgressSpec>,
    /// Mount operations, parents before children.
    pub mounts: Vec<MountOp>,
    /// Why each planned mount's target is there: what airlock mounts ("a system file", "a tool
    /// mount", ...) or the `[[sandbox.mounts]]` entry that produced it, e.g.
    /// `<file>: [[sandbox.mounts]] #2 (pattern = "**/*.key", mode = "hidden")`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mount_origins: BTreeMap<PathBuf, String>,
    /// Paths the workload may write (Landlock's second layer); everything else is read-only.
    pub writable: Vec<PathBuf>,
    /// Host-side steps before the launch (overlay dirs, seeded and generated files).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub prepare: Vec<PrepareStep>,
    pub seccomp: SeccompPolicy,
    /// What the sandbox's init keeps hidden in the project for the whole session.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub hide: Option<crate::hide::HideSpec>,
    /// Resource limits (`[sandbox.resources]`) and the size of the sandbox's own tmpfs.
    #[serde(default)]
    pub limits: Limits,
    /// Lines to print before the launch: a `[[sandbox.mounts]]` pattern that matched nothing, ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Port forwards (`[[network.ports]]`, `--publish`) and where the session's control socket goes.
    #[serde(default, skip_serializing_if = "PortsSpec::is_empty")]
    pub ports: PortsSpec,
}

/// The session's port forwards and its control socket (`airlock forward`, `airlock sessions`, the
/// bridge's OAuth callbacks): carried out by the supervisor ([`crate::ports`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortsSpec {
    /// The forwards made at launch, in order: the config's, then `--publish`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forwards: Vec<PortForward>,
    /// The host-only directory (`<state dir>/run`) for the control socket and the session record;
    /// None: no control socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_dir: Option<PathBuf>,
}

impl PortsSpec {
    pub fn is_empty(&self) -> bool {
        self.forwards.is_empty() && self.control_dir.is_none()
    }

    /// The control socket of the supervisor `pid`: `<control_dir>/<pid>.sock`.
    pub fn control_socket(&self, pid: u32) -> Option<PathBuf> {
        self.control_dir
            .as_ref()
            .map(|dir| dir.join(crate::ports::socket_name(pid)))
    }
}

/// One forward between the host's `127.0.0.1:<host>` and the sandbox's `127.0.0.1:<sandbox>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortForward {
    pub host: u16,
    pub sandbox: u16,
    pub direction: airlock_config::ports::PortDirection,
    /// What asked for it: `--publish 3000` or the `[[network.ports]]` entry's label.
    pub origin: String,
}

/// What the sandbox may use: cgroup v2 limits (none by default) and the size each of its own
/// tmpfs (`/tmp`, `/var/tmp`, `/run`, `/dev/shm`, tmpfs mounts) may grow to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Bytes per tmpfs; 0: the kernel's default (half of RAM).
    pub tmpfs_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus_milli: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pids: Option<u64>,
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
    /// An empty read-only file over a file.
    MaskFile { target: PathBuf },
    /// An overlay: `lower` (a host directory) seen at `target`, writes going to `upper`.
    Overlay {
        lower: PathBuf,
        target: PathBuf,
        upper: Upper,
    },
    /// A private, writable copy of a host file, discarded at exit.
    CopyFile { source: PathBuf, target: PathBuf },
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
            | MountOp::Overlay { target, .. }
            | MountOp::CopyFile { target, .. }
            | MountOp::Symlink { target, .. }
            | MountOp::Proc { target }
            | MountOp::Dev { target } => target,
        }
    }
}

/// The egress proxy of a sandbox in `proxy` network mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressSpec {
    /// The proxy URL inside the sandbox (its own network namespace).
    pub url: String,
    /// The decision log on the host (JSON lines).
    pub log: PathBuf,
    /// `--allow-host` rules, on top of the config's.
    pub allow_hosts: Vec<String>,
    /// `--deny-host` rules, on top of the config's.
    pub deny_hosts: Vec<String>,
    /// The `[network]` policy from the config files.
    pub settings: airlock_config::EgressSettings,
    /// The proxy allowed traffic goes through (`[network] upstream_proxy`, else the host's
    /// `HTTPS_PROXY`/`HTTP_PROXY`); shown without its credentials.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "redacted"
    )]
    pub upstream_proxy: Option<String>,
    /// The host's `NO_PROXY`, for the upstream proxy.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub no_proxy: String,
    /// `[network.credentials]`: the rules (never a value), and where the session CA is written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credentials: Vec<airlock_config::credentials::Credential>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential_trust: Option<CredentialTrust>,
}

/// Where a launch with `[network.credentials]` writes the session CA it trusts inside (the proxy
/// makes the CA; the launch writes these files before the sandbox starts).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialTrust {
    /// The session CA's certificate (`/run/airlock/egress/ca.pem` inside).
    pub ca: PathBuf,
    /// `base` plus the CA (`/run/airlock/egress/bundle.pem` inside, and over the system bundle).
    pub bundle: PathBuf,
    /// The host's trust the bundle starts from; `None`: the CA alone.
    pub base: Option<PathBuf>,
}

/// A proxy URL with its userinfo replaced by `***`.
fn redacted<S: serde::Serializer>(url: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    let shown = url.as_deref().map(airlock_config::without_userinfo);
    serde::Serialize::serialize(&shown, s)
}

/// Where an overlay's writes go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Upper {
    /// `dir/upper` and `dir/work` in the state root: writes persist across runs.
    Persistent { dir: PathBuf },
    /// A tmpfs inside the sandbox: writes are discarded at exit.
    Throwaway,
    /// `dir/upper` and `dir/work`, owned by one session at a time through a lock its owner
    /// takes (the git layer); the spec never leases or demotes it.
    Owned { dir: PathBuf },
    /// A second session's view of a persistent layer another session owns: `dir/upper` read-only
    /// above the lower, writes to a tmpfs discarded at exit.
    Stacked { dir: PathBuf },
}

/// Host-side work done before a launch (the builder stays pure; `state::prepare` performs these).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "kebab-case")]
pub enum PrepareStep {
    /// Create `dir/upper` and an empty `dir/work` for a persistent overlay.
    OverlayDirs { dir: PathBuf },
    /// Copy `from` to `to` unless `to` exists (a persistent copy of a host file).
    SeedFile { from: PathBuf, to: PathBuf },
    /// Write `content` to `path` (generated files), replacing what was there.
    WriteFile { path: PathBuf, content: String },
    /// Make `dir` hold exactly one symlink to `link_to` (a path inside the sandbox) per name: the
    /// host bridge's shim directory, bound read-only.
    Symlinks {
        dir: PathBuf,
        link_to: PathBuf,
        names: Vec<String>,
    },
}

impl SandboxSpec {
    /// The spec as `--print-spec` shows it: each value `[sandbox.environment]` took from a host
    /// variable or a file, usually a secret, replaced by where it came from. The launch uses the
    /// spec itself.
    pub fn redacted(&self) -> SandboxSpec {
        let mut shown = self.clone();
        for (name, placeholder) in &self.env_placeholders {
            if let Some(value) = shown.env.get_mut(name) {
                *value = placeholder.clone();
            }
        }
        shown
    }

    /// The spec without its mount operations (and their origins): what a sandbox's init needs
    /// once its root is built.
    pub fn without_mounts(&self) -> SandboxSpec {
        SandboxSpec {
            mounts: Vec::new(),
            mount_origins: BTreeMap::new(),
            ..self.clone()
        }
    }

    /// Whether `path`, a host path under `home`, shows inside: a mount other than the synthetic
    /// home's own covers it, or the sandbox's home already has it.
    pub fn shows_home_path(&self, home: &std::path::Path, path: &std::path::Path) -> bool {
        let covered = self.mounts.iter().any(|op| {
            let target = op.target();
            target != home && target.starts_with(home) && path.starts_with(target)
        });
        covered
            || path.strip_prefix(home).is_ok_and(|rel| {
                std::fs::symlink_metadata(self.state_root.join("home").join(rel)).is_ok()
            })
    }

    /// Whether an overlay keeps its writes in the state root (so the session needs the lease).
    pub fn has_persistent_uppers(&self) -> bool {
        self.mounts.iter().any(|op| {
            matches!(
                op,
                MountOp::Overlay {
                    upper: Upper::Persistent { .. },
                    ..
                }
            )
        })
    }

    /// Points the read-only bind at `target` to `source` instead (a file made for this session,
    /// such as its bridge token). Returns whether there was such a bind.
    pub fn rebind(&mut self, target: &Path, new_source: PathBuf) -> bool {
        for op in &mut self.mounts {
            if let MountOp::Bind {
                source,
                target: t,
                writable: false,
            } = op
                && t == target
            {
                *source = new_source;
                return true;
            }
        }
        false
    }

    /// The overlay with an [`Upper::Owned`] layer: `(lower, target, layer dir)`.
    pub fn owned_layer(&self) -> Option<(PathBuf, PathBuf, PathBuf)> {
        self.mounts.iter().find_map(|op| match op {
            MountOp::Overlay {
                lower,
                target,
                upper: Upper::Owned { dir },
            } => Some((lower.clone(), target.clone(), dir.clone())),
            _ => None,
        })
    }

    /// Replaces the owned layer with a read-only bind of its lower dir, and binds `config`
    /// read-only at `<target>/config` when given: for a session that cannot take the layer.
    pub fn owned_layer_readonly(&mut self, config: Option<PathBuf>) {
        let Some(at) = self.mounts.iter().position(|op| {
            matches!(
                op,
                MountOp::Overlay {
                    upper: Upper::Owned { .. },
                    ..
                }
            )
        }) else {
            return;
        };
        let MountOp::Overlay { lower, target, .. } = self.mounts[at].clone() else {
            return;
        };
        self.mounts[at] = MountOp::Bind {
            source: lower,
            target: target.clone(),
            writable: false,
        };
        if let Some(source) = config {
            self.mounts.insert(
                at + 1,
                MountOp::Bind {
                    source,
                    target: target.join("config"),
                    writable: false,
                },
            );
        }
    }

    /// Turns every persistent overlay into a stacked one: for a session that does not own the
    /// sandbox's overlay layers (another session of the project does). It sees what the owner has
    /// saved (its upper, read-only, over the host's files) and its own writes are discarded.
    /// Returns how many changed.
    pub fn demote_persistent_uppers(&mut self) -> usize {
        let mut changed = 0;
        for op in &mut self.mounts {
            if let MountOp::Overlay { upper, .. } = op
                && let Upper::Persistent { dir } = upper
            {
                *upper = Upper::Stacked { dir: dir.clone() };
                changed += 1;
            }
        }
        self.prepare
            .retain(|step| !matches!(step, PrepareStep::OverlayDirs { .. }));
        changed
    }
}

/// What the seccomp filter allows beyond its fixed denials.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeccompPolicy {
    /// Allow namespace-creating clone/unshare flags, setns and the mount family.
    pub nested_namespaces: bool,
}
