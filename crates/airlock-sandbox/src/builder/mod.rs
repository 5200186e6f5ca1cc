//! The spec builder: a [`Profile`] and [`HostFacts`] in, a [`SandboxSpec`] out. Pure: no I/O.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use airlock_config::{NetworkMode, Profile};

use crate::contrib::Contributions;
use crate::host::{HostFacts, PathKind};
use crate::spec::{EgressSpec, MountOp, SandboxSpec, SeccompPolicy};

pub mod bridge;
pub mod credentials;
mod custom;
mod env;
mod hide;
mod ports;
mod tools;

use crate::state::sandbox_name;
pub use custom::MountError;
use custom::{covers, custom_mounts};
pub use env::EnvironmentError;
use env::{environment, proxy_environment};
pub use ports::PortsError;

/// What the user asked for on the command line.
#[derive(Debug, Clone, Default)]
pub struct RunRequest {
    /// The command; empty means the user's `$SHELL`.
    pub argv: Vec<String>,
    /// `--network`, overriding the config.
    pub network: Option<NetworkMode>,
    /// `--allow-host` rules.
    pub allow_hosts: Vec<String>,
    /// `--deny-host` rules.
    pub deny_hosts: Vec<String>,
    /// `--publish HOST[:SANDBOX]`: inbound forwards for this run, as (host, sandbox) ports.
    pub publish: Vec<(u16, u16)>,
}

/// Why no spec could be built. Each message names the offending value and what to do.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SpecError {
    #[error(
        "refusing to use / as the project: run airlock inside a project directory, or pass --project DIR"
    )]
    ProjectIsRoot,
    #[error(
        "refusing to use your home directory {0} as the project: it would expose every secret in it; \
         run airlock inside a project directory, or pass --project DIR"
    )]
    ProjectIsHome(PathBuf),
    #[error(
        "refusing to use {project} as the project: it contains your home directory {home}; \
         pass --project with a directory inside it"
    )]
    ProjectContainsHome { project: PathBuf, home: PathBuf },
    /// A `[[sandbox.mounts]]` entry that cannot be mounted.
    #[error(transparent)]
    Mount(#[from] MountError),
    #[error(
        "env_passthrough: {0} is set by airlock itself and cannot be passed through; remove it"
    )]
    ReservedEnv(String),
    /// A `[sandbox.environment]` entry that cannot be applied.
    #[error(transparent)]
    Environment(#[from] EnvironmentError),
    /// `[[network.ports]]` or `--publish` forwards that cannot be made.
    #[error(transparent)]
    Ports(#[from] PortsError),
}

/// Builds the spec of one launch without tool contributions.
pub fn build(
    profile: &Profile,
    host: &HostFacts,
    request: &RunRequest,
) -> Result<SandboxSpec, SpecError> {
    build_with_tools(profile, host, request, &Contributions::default())
}

/// Builds the spec of one launch, with what the detected tools contribute.
pub fn build_with_tools(
    profile: &Profile,
    host: &HostFacts,
    request: &RunRequest,
    contrib: &Contributions,
) -> Result<SandboxSpec, SpecError> {
    check_project(&host.project, &host.home)?;
    let name = sandbox_name(&host.project);
    let state_root = host.sandboxes_dir.join(&name);
    let mut plan = MountPlan::default();
    system_mounts(host, &mut plan);
    plan.push(
        MountOp::Bind {
            source: state_root.join("home"),
            target: host.home.clone(),
            writable: true,
        },
        "the sandbox home",
    );
    plan.push(
        MountOp::Bind {
            source: host.project.clone(),
            target: host.project.clone(),
            writable: true,
        },
        "the project",
    );
    let custom = custom_mounts(profile, host, &plan, &state_root)?;
    if profile.hide_env_files
        && let Some(file) = &host.project_config
        && !custom.ops.iter().any(|(op, _)| covers(op, file))
    {
        plan.push(
            MountOp::MaskFile {
                target: file.clone(),
            },
            "a masked file",
        );
    }
    let mut writable = vec![
        host.project.clone(),
        host.home.clone(),
        PathBuf::from("/tmp"),
        PathBuf::from("/var/tmp"),
        PathBuf::from("/run"),
        PathBuf::from("/dev"),
    ];
    for (op, _) in &custom.ops {
        if let MountOp::Bind {
            writable: true,
            target,
            ..
        }
        | MountOp::Tmpfs {
            writable: true,
            target,
        }
        | MountOp::Overlay { target, .. } = op
        {
            writable.push(target.clone());
        }
    }
    for (op, rule) in custom.ops {
        plan.push(op, rule);
    }
    let tools = tools::plan(contrib, &state_root, &plan);
    writable.extend(tools.writable);
    for op in tools.ops {
        plan.push(op, "a tool mount");
    }
    let hide = hide::plan(profile, host, &state_root, &mut plan);

    let cwd = if host.cwd.starts_with(&host.project) {
        host.cwd.clone()
    } else {
        host.project.clone()
    };
    let shell = host
        .env
        .get("SHELL")
        .cloned()
        .unwrap_or_else(|| "/bin/sh".into());
    let argv = if request.argv.is_empty() {
        let name = Path::new(&shell)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        let extra = name
            .and_then(|n| contrib.shell_args.get(&n))
            .cloned()
            .unwrap_or_default();
        std::iter::once(shell.clone()).chain(extra).collect()
    } else {
        request.argv.clone()
    };
    let network = request.network.unwrap_or(profile.network);
    let (ports, port_warnings) = ports::plan(
        &profile.ports,
        &request.publish,
        network,
        host.run_dir.clone(),
    )?;
    let egress = (network == NetworkMode::Proxy).then(|| EgressSpec {
        url: format!("http://127.0.0.1:{}", crate::native::EGRESS_PORT),
        log: state_root.join("logs").join("network.jsonl"),
        allow_hosts: request.allow_hosts.clone(),
        deny_hosts: request.deny_hosts.clone(),
        settings: profile.egress.clone(),
        upstream_proxy: env::upstream_proxy(profile, host),
        no_proxy: ["NO_PROXY", "no_proxy"]
            .iter()
            .find_map(|k| host.env.get(*k).filter(|v| !v.is_empty()).cloned())
            .unwrap_or_default(),
        credentials: profile.credentials.values().cloned().collect(),
        credential_trust: None,
    });
    let mut env = environment(profile, host, &name, &shell)?;
    for (key, value) in &contrib.env {
        if !env::is_reserved(key) {
            env.insert(key.clone(), value.clone());
        }
    }
    for ca in &host.ca_trust {
        env.insert(ca.var.clone(), ca.path.to_string_lossy().into_owned());
        if let Some(bundle) = &ca.bind
            && plan.owner_of(&ca.path).is_none()
        {
            plan.push(
                MountOp::Bind {
                    source: bundle.clone(),
                    target: ca.path.clone(),
                    writable: false,
                },
                "a CA bundle",
            );
        }
    }
    let env_placeholders = env::apply_configured(&mut env, profile, host, network)?;
    let path = env.get("PATH").cloned().unwrap_or_default();
    let bridge = bridge::plan(profile, host, &state_root, &path, &contrib.shims);
    env.extend(bridge.env);
    for op in bridge.ops {
        plan.push(op, "the host bridge");
    }
    if let Some(egress) = &egress {
        proxy_environment(&mut env, &egress.url);
    }
    let mut warnings = custom.warnings;
    let trust = credentials::plan(
        profile,
        host,
        &state_root,
        network,
        &mut env,
        &mut plan,
        &mut warnings,
    );
    let mut egress = egress;
    if let Some(egress) = &mut egress {
        egress.credential_trust = trust;
    }
    Ok(SandboxSpec {
        env,
        env_placeholders,
        name,
        project: host.project.clone(),
        state_root,
        cwd,
        argv,
        uid: host.uid,
        gid: host.gid,
        hostname: host.hostname.clone(),
        network,
        egress,
        mount_origins: plan.origins(),
        mounts: plan.into_ordered(),
        writable,
        prepare: [custom.prepare, tools.prepare, bridge.prepare].concat(),
        warnings: [warnings, port_warnings].concat(),
        ports,
        seccomp: SeccompPolicy {
            nested_namespaces: profile.nested_namespaces,
        },
        hide,
        limits: limits(&profile.resources, host.ram_bytes),
    })
}

/// The share of RAM each tmpfs of the sandbox may fill unless `tmp_size` says otherwise: four of
/// them at the kernel's default (half of RAM each) could take twice the machine's memory.
pub const DEFAULT_TMPFS_PERCENT: u64 = 12;

fn limits(r: &airlock_config::resources::Resources, ram: u64) -> crate::spec::Limits {
    use airlock_config::resources::TmpSize;
    let tmpfs_bytes = match r.tmp_size {
        Some(TmpSize::Bytes(bytes)) => bytes,
        Some(TmpSize::Percent(pct)) => ram / 100 * u64::from(pct),
        None => ram / 100 * DEFAULT_TMPFS_PERCENT,
    };
    crate::spec::Limits {
        // Never below 64 MiB: less breaks package installs in /tmp before any limit is reached.
        tmpfs_bytes: if ram == 0 {
            0
        } else {
            tmpfs_bytes.max(64 << 20)
        },
        memory: r.memory,
        cpus_milli: r.cpus_milli,
        pids: r.pids,
    }
}

fn check_project(project: &Path, home: &Path) -> Result<(), SpecError> {
    if project == Path::new("/") {
        return Err(SpecError::ProjectIsRoot);
    }
    if project == home {
        return Err(SpecError::ProjectIsHome(home.to_owned()));
    }
    if home.starts_with(project) {
        return Err(SpecError::ProjectContainsHome {
            project: project.to_owned(),
            home: home.to_owned(),
        });
    }
    Ok(())
}

/// The mount list under construction; each entry remembers what it is (for error messages and
/// the spec's `mount_origins`): "a system file", or the `[[sandbox.mounts]]` entry of a custom one.
#[derive(Default)]
struct MountPlan {
    ops: Vec<(MountOp, Cow<'static, str>)>,
}

impl MountPlan {
    fn push(&mut self, op: MountOp, what: impl Into<Cow<'static, str>>) {
        self.ops.push((op, what.into()));
    }

    fn owner_of(&self, target: &Path) -> Option<&str> {
        self.ops
            .iter()
            .find(|(op, _)| op.target() == target)
            .map(|(_, what)| what.as_ref())
    }

    /// What each target is for; of two operations on one target, the later (mounted on top).
    fn origins(&self) -> BTreeMap<PathBuf, String> {
        self.ops
            .iter()
            .map(|(op, what)| (op.target().to_owned(), what.to_string()))
            .collect()
    }

    /// Parents before children: a stable sort on depth keeps same-depth entries in insertion order.
    fn into_ordered(self) -> Vec<MountOp> {
        let mut ops: Vec<MountOp> = self.ops.into_iter().map(|(op, _)| op).collect();
        ops.sort_by_key(|op| op.target().components().count());
        ops
    }
}

fn system_mounts(host: &HostFacts, plan: &mut MountPlan) {
    for (path, kind) in &host.system {
        match kind {
            PathKind::Dir => plan.push(
                MountOp::Bind {
                    source: path.clone(),
                    target: path.clone(),
                    writable: false,
                },
                "a system directory",
            ),
            PathKind::Symlink { link_to, .. } => plan.push(
                MountOp::Symlink {
                    target: path.clone(),
                    link_to: link_to.clone(),
                },
                "a system symlink",
            ),
            _ => {}
        }
    }
    for (path, kind) in &host.etc {
        let op = match kind {
            PathKind::Dir | PathKind::File => MountOp::Bind {
                source: path.clone(),
                target: path.clone(),
                writable: false,
            },
            // A link into /usr works as a link inside too (and keeps e.g. the zone name readable from
            // /etc/localtime); a link elsewhere (resolv.conf into /run) is bound as what it points at.
            PathKind::Symlink {
                link_to,
                resolved: Some(resolved),
            } if resolved.starts_with("/usr") => MountOp::Symlink {
                target: path.clone(),
                link_to: link_to.clone(),
            },
            PathKind::Symlink {
                resolved: Some(resolved),
                ..
            } => MountOp::Bind {
                source: resolved.clone(),
                target: path.clone(),
                writable: false,
            },
            _ => continue,
        };
        plan.push(op, "a system file");
    }
    for dir in ["/tmp", "/var/tmp", "/run"] {
        plan.push(
            MountOp::Tmpfs {
                target: PathBuf::from(dir),
                writable: true,
            },
            "a fresh tmpfs",
        );
    }
    plan.push(
        MountOp::Proc {
            target: "/proc".into(),
        },
        "/proc",
    );
    plan.push(
        MountOp::Dev {
            target: "/dev".into(),
        },
        "/dev",
    );
}
