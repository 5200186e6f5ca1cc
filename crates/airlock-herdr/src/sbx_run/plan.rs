//! The spec as `sbx create` / `sbx exec` / `sbx rm` argv, and what a microVM cannot honour in
//! it. Pure: the spec and the session's facts in, argv or refusals out (one exception: a pinned
//! project file is compared with the host's copy, see [`pin_is_a_copy`]).
//!
//! The VM has its own system, home and user from sbx's template, so what airlock mounts outside
//! the project for its own namespaces (the host's `/usr` and `/etc`, the synthetic home, tool
//! configs, the bridge) is not carried: the VM sees less of the host, never more. What is carried:
//! the project (sbx's workspace, at the same path, writable), the read-only paths in it (`.git`
//! in the `readonly` git mode, also when a linked worktree's repository lies outside it) and
//! `[[sandbox.mounts]]` binds at their own path, as `PATH[:ro]`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use airlock_config::NetworkMode;
use airlock_config::ports::PortDirection;
use airlock_sandbox::SandboxSpec;
use airlock_sandbox::spec::{MountOp, PrepareStep};

use crate::backend::sbx::{create_args, exec_args_for};
use crate::backend::{CreateRequest, ExecRequest};

/// What the git tool sets to the repository it keeps read-only (`airlock_tools::git::hint`).
const GIT_READONLY_ENV: &str = "AIRLOCK_GIT_READONLY";

/// The sbx agent a plain command runs under: sbx's generic one, a shell.
pub const AGENT: &str = "shell";

/// The per-sandbox rule that denies every host (sbx's host pattern for "everything"; a deny rule
/// wins over every allow rule, the user's global policy and a kit's included).
pub const DENY_ALL: &str = "**";

/// Variables carried into the VM whatever the config says: airlock's marker, the terminal and
/// the locale (`LC_*` too). Every other variable airlock sets names a host path or airlock's own
/// proxy, which do not exist inside.
const ALWAYS_CARRIED: &[&str] = &["AIRLOCK", "AIRLOCK_PROJECT", "TERM", "LANG"];

/// What one launch is, besides the spec.
#[derive(Debug, Clone)]
pub struct Session<'a> {
    /// The supervisor's pid: part of the sandbox's name, so two sessions never share a VM.
    pub pid: u32,
    /// Give the command a terminal (`--tty`): stdin and stdout are one.
    pub tty: bool,
    /// The `--env-file` the launch writes (0600, in the host-only state root).
    pub env_file: &'a Path,
}

/// The three sbx calls of a launch, and the environment the env file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub name: String,
    pub create: Vec<String>,
    pub exec: Vec<String>,
    pub rm: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// The session's sbx calls for `spec`; `carried` names the variables the config asked for
/// (`[sandbox] env_passthrough`, `[sandbox.environment]`). Refuses what [`unsupported`] lists.
pub fn plan(
    spec: &SandboxSpec,
    carried: &BTreeSet<String>,
    session: &Session<'_>,
) -> Result<Plan, String> {
    let refused = unsupported(spec);
    if !refused.is_empty() {
        return Err(refused.join("; "));
    }
    let name = sandbox_name(&spec.name, session.pid)?;
    let env = environment(spec, carried);
    let mut request = CreateRequest {
        name: name.clone(),
        agent: AGENT.to_owned(),
        paths: workspaces(spec).map_err(|e| e.join("; "))?,
        ..CreateRequest::default()
    };
    if !env.is_empty() {
        request.env_files = vec![session.env_file.display().to_string()];
    }
    request.publish = spec
        .ports
        .forwards
        .iter()
        .map(|f| format!("127.0.0.1:{}:{}", f.host, f.sandbox))
        .collect();
    request.memory = spec
        .limits
        .memory
        .map(|bytes| format!("{}m", bytes.div_ceil(1 << 20)));
    request.cpus = spec.limits.cpus_milli.map(|m| (m / 1000).to_string());
    if spec.network == NetworkMode::None {
        request.deny_network = vec![DENY_ALL.to_owned()];
    }
    let exec = ExecRequest {
        name: name.clone(),
        workdir: Some(spec.cwd.display().to_string()),
        env: Vec::new(),
        argv: spec.argv.clone(),
    };
    Ok(Plan {
        create: create_args(&request),
        exec: exec_args_for(&exec, true, session.tty),
        rm: vec!["rm".into(), "--force".into(), name.clone()],
        name,
        env,
    })
}

/// What the sbx backend cannot honour in `spec`: one sentence each, naming the feature and the
/// alternative. A launch with any is refused before sbx is asked for anything.
pub fn unsupported(spec: &SandboxSpec) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(hide) = spec
        .hide
        .as_ref()
        .filter(|h| !h.patterns.is_empty() || !h.known.is_empty())
    {
        out.push(format!(
            "the sbx backend mounts the project into the microVM whole, so it cannot keep {} \
             hidden; pass --no-hide-env (or [sandbox] hide_env_files = false and no hide globs) \
             if those files may be read, or use --backend native",
            hide.patterns.join(", ")
        ));
    }
    if let Err(problems) = workspaces(spec) {
        out.extend(problems);
    }
    match spec.network {
        NetworkMode::Proxy => out.push(
            "the sbx backend cannot put airlock's egress proxy in front of a microVM (sbx's own \
             proxy enforces the policy chosen with sbx policy init); use --network none (every \
             host denied with --deny-network \"**\"), --network host (the VM gets what your sbx \
             policy allows), or --backend native"
                .into(),
        ),
        NetworkMode::None | NetworkMode::Host => {}
    }
    for forward in &spec.ports.forwards {
        if forward.direction == PortDirection::Out {
            out.push(format!(
                "the sbx backend publishes ports into the microVM only, not the host's \
                 127.0.0.1:{} out to it ({}); drop the forward or use --backend native",
                forward.host, forward.origin
            ));
        }
    }
    if spec
        .limits
        .cpus_milli
        .is_some_and(|m| m == 0 || m % 1000 != 0)
    {
        out.push(
            "the sbx backend gives a microVM whole CPUs; set [sandbox.resources] cpus to a whole \
             number, or use --backend native"
                .into(),
        );
    }
    if spec.limits.pids.is_some() {
        out.push(
            "the sbx backend has no process limit for a microVM; remove [sandbox.resources] \
             pids, or use --backend native"
                .into(),
        );
    }
    if !spec.cwd.starts_with(&spec.project) {
        out.push(format!(
            "the sbx backend's microVM has the project only, not the working directory {}; run \
             from inside {}",
            spec.cwd.display(),
            spec.project.display()
        ));
    }
    let bad_env: Vec<&str> = spec
        .env
        .iter()
        .filter(|(k, v)| !crate::config::valid_env_name(k) || v.contains(['\n', '\r', '\0']))
        .map(|(k, _)| k.as_str())
        .collect();
    if !bad_env.is_empty() {
        out.push(format!(
            "the sbx backend passes variables in an env file, one line each, and {} has a \
             newline or is not a variable name; fix it or use --backend native",
            bad_env.join(", ")
        ));
    }
    out
}

/// sbx's workspace arguments: the project first, then `PATH[:ro]` for each read-only path in it
/// and each `[[sandbox.mounts]]` bind at its own path; or every mount sbx cannot make.
fn workspaces(spec: &SandboxSpec) -> Result<Vec<String>, Vec<String>> {
    let project = &spec.project;
    // The repository the `readonly` git mode keeps read-only: outside the project for a linked
    // worktree (`run --worktree`), whose `.git` file points there.
    let git_dir = spec.env.get(GIT_READONLY_ENV).map(Path::new);
    let mut paths = vec![project.clone()];
    let mut problems = Vec::new();
    for op in &spec.mounts {
        let target = op.target();
        let custom = spec
            .mount_origins
            .get(target)
            .filter(|o| o.contains("[[sandbox.mounts]]"));
        let inside = target.starts_with(project);
        let guarded = inside || git_dir.is_some_and(|g| target.starts_with(g));
        if !guarded && custom.is_none() {
            continue; // airlock's own plumbing for its namespaces: the VM has its own system
        }
        match op {
            MountOp::Bind {
                source, writable, ..
            } if source == target => {
                if target == project {
                    continue;
                }
                if inside && *writable {
                    continue; // already writable as part of the project
                }
                let mut path = target.display().to_string();
                if !writable {
                    path.push_str(":ro");
                }
                paths.push(PathBuf::from(path));
            }
            MountOp::Bind { source, .. } if guarded && pin_is_a_copy(spec, source, target) => {}
            other => problems.push(format!(
                "the sbx backend mounts the project as a whole workspace and can add only \
                 same-path binds (read-only inside it), not {} at {}{}; {}",
                kind(other),
                target.display(),
                custom.map_or(String::new(), |o| format!(" ({o})")),
                way_out(other, spec)
            )),
        }
    }
    for path in &paths {
        let text = path.display().to_string();
        let bare = text.strip_suffix(":ro").unwrap_or(&text);
        if !path.is_absolute() || bare.contains(':') || bare.chars().any(char::is_control) {
            problems.push(format!(
                "the sbx backend cannot name {bare:?} as a workspace (sbx reads ':' as its \
                 read-only suffix, and a control character has no place in it); rename it or \
                 use --backend native"
            ));
        }
    }
    if problems.is_empty() {
        Ok(paths.iter().map(|p| p.display().to_string()).collect())
    } else {
        Err(problems)
    }
}

/// Whether the bind of `source` over the project file `target` shows what the host file holds
/// already (the `readonly` git mode's copy of `.git/config` when nothing had to be taken out):
/// then the read-only workspace path shows the VM the same bytes.
fn pin_is_a_copy(spec: &SandboxSpec, source: &Path, target: &Path) -> bool {
    let generated = spec.prepare.iter().find_map(|step| match step {
        PrepareStep::WriteFile { path, content } if path == source => Some(content),
        _ => None,
    });
    let Some(generated) = generated else {
        return false;
    };
    airlock_config::hostfs::read_regular(target, generated.len() as u64 + 1)
        .is_ok_and(|host| host == generated.as_bytes())
}

fn kind(op: &MountOp) -> &'static str {
    match op {
        MountOp::Bind { .. } => "a file airlock made for the sandbox",
        MountOp::Tmpfs { .. } => "a tmpfs",
        MountOp::MaskFile { .. } => "a hidden file",
        MountOp::Overlay { .. } => "an overlay",
        MountOp::CopyFile { .. } => "a private copy",
        MountOp::Symlink { .. } => "a symlink",
        MountOp::Proc { .. } | MountOp::Dev { .. } => "a kernel filesystem",
    }
}

fn way_out(op: &MountOp, spec: &SandboxSpec) -> String {
    let git = spec.project.join(".git");
    let linked = spec.env.get(GIT_READONLY_ENV).map(Path::new);
    let in_git = |t: &Path| t.starts_with(&git) || linked.is_some_and(|g| t.starts_with(g));
    match op {
        MountOp::Overlay { target, .. } if target.starts_with(&git) => {
            "use --git-mode readonly (.git read-only in the VM), or --backend native".into()
        }
        MountOp::Bind { target, .. } if in_git(target) => format!(
            "{} holds what airlock takes out for the sandbox (credentials, tokens); remove them \
             from it, or use --backend native",
            target.display()
        ),
        _ => "change or remove that mount, or use --backend native".into(),
    }
}

/// What the env file holds: the variables the config asked for and [`ALWAYS_CARRIED`].
fn environment(spec: &SandboxSpec, carried: &BTreeSet<String>) -> Vec<(String, String)> {
    spec.env
        .iter()
        .filter(|(k, _)| {
            carried.contains(*k) || ALWAYS_CARRIED.contains(&k.as_str()) || k.starts_with("LC_")
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// `airlock-<sandbox>-<pid>` with everything sbx does not accept in a name (`[A-Za-z0-9.-]`,
/// starting alphanumeric) made a `-`: a project directory's name never reaches sbx as a flag.
pub fn sandbox_name(sandbox: &str, pid: u32) -> Result<String, String> {
    let cleaned: String = sandbox
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    // The hash at the end keeps two projects apart when their names are cut.
    let keep = cleaned.len().saturating_sub(48);
    let name = format!("airlock-{}-{pid}", &cleaned[keep..]);
    if name.len() >= 2 && name != "default" && crate::config::valid_name_part(&name) {
        Ok(name)
    } else {
        Err(format!(
            "cannot make an sbx sandbox name from {sandbox:?} (got {name:?})"
        ))
    }
}
