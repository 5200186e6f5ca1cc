//! The spec builder: a [`Profile`] and [`HostFacts`] in, a [`SandboxSpec`] out. Pure: no I/O.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use airlock_config::{MountMode, NetworkMode, Profile, ProfileMount};

use crate::host::{HostFacts, MountSource, PathKind};
use crate::spec::{MountOp, SandboxSpec, SeccompPolicy};
use crate::state::sandbox_name;

/// What the user asked for on the command line.
#[derive(Debug, Clone, Default)]
pub struct RunRequest {
    /// The command; empty means the user's `$SHELL`.
    pub argv: Vec<String>,
    /// `--network`, overriding the config.
    pub network: Option<NetworkMode>,
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

/// Environment variables copied from the host when set (besides `env_passthrough`).
const ENV_FROM_HOST: &[&str] = &["TERM", "COLORTERM", "LANG", "LANGUAGE", "TZ"];

/// Environment variables airlock sets itself.
const ENV_RESERVED: &[&str] = &[
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "AIRLOCK",
    "AIRLOCK_PROJECT",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
];

const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Builds the spec of one launch.
pub fn build(
    profile: &Profile,
    host: &HostFacts,
    request: &RunRequest,
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
    if profile.hide_env_files {
        let masks = host.env_files.iter().chain(host.project_config.iter());
        for file in masks {
            if !custom.iter().any(|(op, _)| covers(op, file)) {
                plan.push(
                    MountOp::MaskFile {
                        target: file.clone(),
                    },
                    "a masked file",
                );
            }
        }
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
        vec![shell.clone()]
    } else {
        request.argv.clone()
    };
    Ok(SandboxSpec {
        env: environment(profile, host, &name, &shell)?,
        name,
        project: host.project.clone(),
        state_root,
        cwd,
        argv,
        uid: host.uid,
        gid: host.gid,
        hostname: host.hostname.clone(),
        network: request.network.unwrap_or(profile.network),
        mounts: plan.into_ordered(),
        writable,
        seccomp: SeccompPolicy {
            nested_namespaces: profile.nested_namespaces,
        },
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

/// Whether `op` hides everything below its target (so a mask there is redundant).
fn covers(op: &MountOp, path: &Path) -> bool {
    matches!(op, MountOp::Tmpfs { .. }) && path.starts_with(op.target()) && path != op.target()
}

/// `path` without `.`/`..` components and trailing slashes, or None when it is not absolute or has `..`.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(name) => out.push(name),
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    path.is_absolute().then_some(out)
}

fn custom_mounts(
    profile: &Profile,
    host: &HostFacts,
    plan: &MountPlan,
) -> Result<Vec<(MountOp, &'static str)>, SpecError> {
    // One entry per path: an exact repeat is dropped, a repeat with another mode is an error.
    let mut chosen: BTreeMap<PathBuf, (&ProfileMount, &MountSource)> = BTreeMap::new();
    for mount in &profile.mounts {
        let not_absolute = || SpecError::MountNotAbsolute {
            path: mount.path.clone(),
            origin: mount.origin.clone(),
        };
        let source = host
            .mount_sources
            .get(&mount.path)
            .ok_or_else(not_absolute)?;
        let target = normalize(&source.path).ok_or_else(not_absolute)?;
        if let Some((first, ..)) = chosen.get(&target) {
            if first.mode == mount.mode {
                continue;
            }
            return Err(SpecError::MountDuplicate {
                path: target,
                first: first.mode.as_str(),
                first_origin: first.origin.clone(),
                second: mount.mode.as_str(),
                second_origin: mount.origin.clone(),
            });
        }
        if let Some(what) = plan.owner_of(&target) {
            return Err(SpecError::MountConflict {
                path: target,
                origin: mount.origin.clone(),
                what,
            });
        }
        chosen.insert(target, (mount, source));
    }

    let mut ops = Vec::new();
    for (target, (mount, source)) in &chosen {
        let origin = || mount.origin.clone();
        let resolved = source
            .resolved
            .clone()
            .unwrap_or_else(|| source.path.clone());
        let (source, is_dir) = match source.kind {
            PathKind::Dir => (resolved, true),
            PathKind::File => (resolved, false),
            PathKind::Missing | PathKind::Symlink { .. } => {
                return Err(SpecError::MountMissing {
                    path: target.clone(),
                    origin: origin(),
                });
            }
            PathKind::Other => {
                return Err(SpecError::MountNotFileOrDir {
                    path: target.clone(),
                    origin: origin(),
                });
            }
        };
        let op = match mount.mode {
            MountMode::Readonly | MountMode::Readwrite => MountOp::Bind {
                source,
                target: target.clone(),
                writable: mount.mode == MountMode::Readwrite,
            },
            MountMode::Hidden if is_dir => MountOp::Tmpfs {
                target: target.clone(),
                writable: false,
            },
            MountMode::Hidden => MountOp::MaskFile {
                target: target.clone(),
            },
            MountMode::Tmpfs if is_dir => MountOp::Tmpfs {
                target: target.clone(),
                writable: true,
            },
            MountMode::Tmpfs => {
                return Err(SpecError::TmpfsOnFile {
                    path: target.clone(),
                    origin: origin(),
                });
            }
        };
        // An empty read-only directory cannot hold the mount points of what lies below it.
        if let MountOp::Tmpfs {
            writable: false, ..
        } = op
        {
            let below = plan
                .ops
                .iter()
                .map(|(op, _)| op.target())
                .chain(chosen.keys().map(PathBuf::as_path))
                .find(|t| t.starts_with(target) && *t != target.as_path());
            if let Some(covered) = below {
                return Err(SpecError::MountHides {
                    path: target.clone(),
                    origin: origin(),
                    mode: mount.mode.as_str(),
                    covered: covered.to_owned(),
                });
            }
        }
        ops.push((op, "a custom mount"));
    }
    Ok(ops)
}

fn environment(
    profile: &Profile,
    host: &HostFacts,
    name: &str,
    shell: &str,
) -> Result<BTreeMap<String, String>, SpecError> {
    let home = host.home.to_string_lossy().into_owned();
    let mut env = BTreeMap::new();
    for key in ENV_FROM_HOST {
        if let Some(value) = host.env.get(*key) {
            env.insert((*key).to_owned(), value.clone());
        }
    }
    for (key, value) in &host.env {
        if key.starts_with("LC_") {
            env.insert(key.clone(), value.clone());
        }
    }
    for key in &profile.env_passthrough {
        if ENV_RESERVED.contains(&key.as_str()) {
            return Err(SpecError::ReservedEnv(key.clone()));
        }
        if let Some(value) = host.env.get(key) {
            env.insert(key.clone(), value.clone());
        }
    }
    let path = host
        .env
        .get("PATH")
        .map(String::as_str)
        .unwrap_or(DEFAULT_PATH);
    env.entry("PATH".into()).or_insert_with(|| path.to_owned());
    for (key, value) in [
        ("HOME", home.clone()),
        ("USER", host.user.clone()),
        ("LOGNAME", host.user.clone()),
        ("SHELL", shell.to_owned()),
        ("XDG_CONFIG_HOME", format!("{home}/.config")),
        ("XDG_DATA_HOME", format!("{home}/.local/share")),
        ("XDG_STATE_HOME", format!("{home}/.local/state")),
        ("XDG_CACHE_HOME", format!("{home}/.cache")),
        ("AIRLOCK", "1".into()),
        ("AIRLOCK_PROJECT", name.to_owned()),
    ] {
        env.insert(key.into(), value);
    }
    Ok(env)
}
