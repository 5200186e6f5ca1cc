//! The spec builder: a [`Profile`] and [`HostFacts`] in, a [`SandboxSpec`] out. Pure: no I/O.

use std::path::{Path, PathBuf};

use airlock_config::{NetworkMode, Profile};

use crate::contrib::Contributions;
use crate::host::{HostFacts, PathKind};
use crate::spec::{EgressSpec, MountOp, SandboxSpec, SeccompPolicy};

pub mod bridge;
mod custom;
mod env;
mod hide;
mod tools;

use crate::state::sandbox_name;
use custom::{covers, custom_mounts};
use env::{environment, proxy_environment};

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
    #[error("{origin}: mount path {path:?} must be absolute or start with ~/")]
    MountNotAbsolute { path: String, origin: PathBuf },
    #[error(
        "{origin}: mount path {path} does not exist; create it or remove the [[sandbox.mounts]] entry"
    )]
    MountMissing { path: PathBuf, origin: PathBuf },
    #[error("{origin}: mount path {path} is not a file or directory")]
    MountNotFileOrDir { path: PathBuf, origin: PathBuf },
    #[error(
        "mount path {path} is listed twice with different modes ({first} in {first_origin}, {second} in \
         {second_origin}); keep one entry"
    )]
    MountDuplicate {
        path: PathBuf,
        first: &'static str,
        first_origin: PathBuf,
        second: &'static str,
        second_origin: PathBuf,
    },
    #[error(
        "{origin}: mount path {path} is one of airlock's own mounts ({what}); choose a path inside it"
    )]
    MountConflict {
        path: PathBuf,
        origin: PathBuf,
        what: &'static str,
    },
    #[error("{origin}: mode {mode} at {path} would hide {covered}; choose a narrower path")]
    MountHides {
        path: PathBuf,
        origin: PathBuf,
        mode: &'static str,
        covered: PathBuf,
    },
    #[error("{origin}: mode tmpfs needs a directory, but {path} is a file; use mode = \"hidden\"")]
    TmpfsOnFile { path: PathBuf, origin: PathBuf },
    #[error(
        "env_passthrough: {0} is set by airlock itself and cannot be passed through; remove it"
    )]
    ReservedEnv(String),
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
    let custom = custom_mounts(profile, host, &plan)?;
    if profile.hide_env_files
        && let Some(file) = &host.project_config
        && !custom.iter().any(|(op, _)| covers(op, file))
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
    for (op, _) in &custom {
        if let MountOp::Bind {
            writable: true,
            target,
            ..
        }
        | MountOp::Tmpfs {
            writable: true,
            target,
        } = op
        {
            writable.push(target.clone());
        }
    }
    for (op, what) in custom {
        plan.push(op, what);
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
    let path = env.get("PATH").cloned().unwrap_or_default();
    let bridge = bridge::plan(profile, host, &state_root, &path, &contrib.shims);
    env.extend(bridge.env);
    for op in bridge.ops {
        plan.push(op, "the host bridge");
    }
    if let Some(egress) = &egress {
        proxy_environment(&mut env, &egress.url);
    }
    Ok(SandboxSpec {
        env,
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
        mounts: plan.into_ordered(),
        writable,
        prepare: [tools.prepare, bridge.prepare].concat(),
        seccomp: SeccompPolicy {
            nested_namespaces: profile.nested_namespaces,
        },
        hide,
    })
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

/// The mount list under construction; each entry remembers what it is for error messages.
#[derive(Default)]
struct MountPlan {
    ops: Vec<(MountOp, &'static str)>,
}

impl MountPlan {
    fn push(&mut self, op: MountOp, what: &'static str) {
        self.ops.push((op, what));
    }

    fn owner_of(&self, target: &Path) -> Option<&'static str> {
        self.ops
            .iter()
            .find(|(op, _)| op.target() == target)
            .map(|(_, what)| *what)
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
