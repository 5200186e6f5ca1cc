//! The engine's `create` argv for a remote engine: no host path in it.
//!
//! Honoured as on a local engine: the read-only root, no network (`--network none`), every
//! capability dropped, no_new_privs, the user's ids, hostname, working directory, environment
//! (the env file is read by the engine's client, here), limits, the empty `/sys`, the spec's
//! tmpfs. Not made: the host binds (the system, tools, agent configs: the image provides the
//! system); the home is an empty tmpfs at the spec's home; the project is a volume the supervisor
//! fills. The engine's own seccomp profile applies (podman reads a profile path on the engine's
//! machine), and airlock's own filter is installed by the exec wrapper inside before the command.

use std::path::Path;

use super::super::engine::{Engine, EngineName};
use super::super::render::SessionFiles;
use super::EXEC_PATH;
use crate::spec::{MountOp, SandboxSpec};

/// The targets of the spec's tmpfs mounts.
pub fn tmpfs_targets(spec: &SandboxSpec) -> impl Iterator<Item = &Path> {
    spec.mounts.iter().filter_map(|op| match op {
        MountOp::Tmpfs { target, .. } => Some(target.as_path()),
        _ => None,
    })
}

/// The spec's home inside: the target of the bind of the synthetic home.
pub fn home(spec: &SandboxSpec) -> Option<&Path> {
    let synthetic = spec.state_root.join("home");
    spec.mounts.iter().find_map(|op| match op {
        MountOp::Bind { source, target, .. } if *source == synthetic => Some(target.as_path()),
        _ => None,
    })
}

/// The volumes a remote container gets: the project's, and one read-only volume for each
/// directory inside it the spec mounts read-only (`.git` in git's `readonly` mode).
pub struct Volumes<'a> {
    pub project: &'a str,
    pub read_only: &'a [(std::path::PathBuf, &'a str)],
}

/// The arguments after the engine's program: `create …`, the container named `name`.
pub fn create(
    spec: &SandboxSpec,
    engine: &Engine,
    image: &str,
    name: &str,
    volumes: &Volumes<'_>,
    files: &SessionFiles,
    tty: bool,
) -> Vec<String> {
    let mut a: Vec<String> = engine.global_args();
    let opt = |a: &mut Vec<String>, f: &str, v: String| {
        a.push(f.into());
        a.push(v);
    };
    a.extend(["create", "--pull", "never"].map(String::from));
    opt(&mut a, "--name", name.into());
    a.push("--read-only".into());
    opt(&mut a, "--log-driver", "none".into());
    if engine.name == EngineName::Podman {
        // Not `--passwd=false`: podman's remote client has no such flag (4.3); the engine may add
        // a line naming the user to the image's /etc/passwd, in the container's own layer.
        a.extend(["--read-only-tmpfs=false", "--no-hosts", "--unsetenv-all"].map(String::from));
    }
    opt(&mut a, "--network", "none".into());
    opt(&mut a, "--cap-drop", "ALL".into());
    opt(&mut a, "--security-opt", "no-new-privileges".into());
    opt(&mut a, "--user", format!("{}:{}", spec.uid, spec.gid));
    opt(&mut a, "--hostname", spec.hostname.clone());
    opt(&mut a, "--workdir", spec.cwd.display().to_string());
    opt(&mut a, "--env-file", files.env().display().to_string());
    if let Some(bytes) = spec.limits.memory {
        opt(&mut a, "--memory", bytes.to_string());
    }
    if let Some(milli) = spec.limits.cpus_milli {
        opt(
            &mut a,
            "--cpus",
            format!("{}.{:03}", milli / 1000, milli % 1000),
        );
    }
    if let Some(pids) = spec.limits.pids {
        opt(&mut a, "--pids-limit", pids.to_string());
    }
    opt(
        &mut a,
        "--mount",
        "type=tmpfs,dst=/sys,ro=true,tmpfs-mode=0755".into(),
    );
    let size = match spec.limits.tmpfs_bytes {
        0 => String::new(),
        n => format!(",tmpfs-size={n}"),
    };
    for op in &spec.mounts {
        if let MountOp::Tmpfs { target, writable } = op {
            let how = if *writable {
                format!("tmpfs-mode=1777{size}")
            } else {
                "ro=true,tmpfs-mode=0755".into()
            };
            opt(
                &mut a,
                "--mount",
                format!("type=tmpfs,dst={},{how}", target.display()),
            );
        }
    }
    if let Some(home) = home(spec) {
        opt(
            &mut a,
            "--mount",
            format!("type=tmpfs,dst={},tmpfs-mode=1777{size}", home.display()),
        );
    }
    opt(
        &mut a,
        "--mount",
        format!(
            "type=volume,src={},dst={}",
            volumes.project,
            spec.project.display()
        ),
    );
    for (target, volume) in volumes.read_only {
        opt(
            &mut a,
            "--mount",
            format!("type=volume,src={volume},dst={},ro=true", target.display()),
        );
    }
    a.push("-i".into());
    if tty {
        a.push("-t".into());
    }
    a.push(image.into());
    a.push(EXEC_PATH.into());
    if spec.seccomp.nested_namespaces {
        a.push("--nested-namespaces".into());
    }
    // Landlock over what exists there: the project, the home, the writable tmpfs, the
    // engine's /dev (its null, zero, tty, ...).
    let there = |p: &Path| {
        p.starts_with("/dev")
            || p.starts_with(&spec.project)
            || home(spec).is_some_and(|h| p.starts_with(h))
            || spec
                .mounts
                .iter()
                .any(|op| matches!(op, MountOp::Tmpfs { target, writable: true } if p.starts_with(target)))
    };
    for path in spec.writable.iter().filter(|p| there(p)) {
        a.push(format!("--writable={}", path.display()));
    }
    a.push("--".into());
    a.extend(spec.argv.iter().cloned());
    a
}
