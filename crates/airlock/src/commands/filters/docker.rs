//! The Docker filter of a launch (`[tools.docker] enabled = true`): the engine's API, read-only
//! plus exec, at `$HOME/.run/<pid>/docker.sock` inside.

use std::ffi::OsString;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use airlock_sandbox::SandboxSpec;
use airlock_sockets::docker::{DockerFilter, DockerPolicy};
use airlock_sockets::{DecisionLog, Filter};
use airlock_tools::ToolConfig;

use super::{Filters, session_sockets};

/// The engine's socket: `[tools.docker] socket`, else `$DOCKER_HOST` when it is `unix://`, else
/// the first of the usual places that is a socket.
pub fn host_socket(config: &ToolConfig, env: &dyn Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    if let Some(path) = config.text("socket") {
        return Some(PathBuf::from(path));
    }
    if let Some(host) = env("DOCKER_HOST").and_then(|v| v.into_string().ok())
        && let Some(path) = host.strip_prefix("unix://")
    {
        return Some(PathBuf::from(path));
    }
    let runtime = env("XDG_RUNTIME_DIR").map(PathBuf::from);
    let candidates = [
        Some(PathBuf::from("/run/docker.sock")),
        Some(PathBuf::from("/var/run/docker.sock")),
        runtime.as_ref().map(|d| d.join("docker.sock")),
        runtime.as_ref().map(|d| d.join("podman/podman.sock")),
        Some(PathBuf::from("/run/podman/podman.sock")),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.file_type().is_socket()))
}

/// What `airlock tools check docker` says.
pub fn check_notes(config: &ToolConfig, env: &dyn Fn(&str) -> Option<OsString>) -> Vec<String> {
    if !config.enabled {
        return vec!["mode: disabled (opt in with [tools.docker] enabled = true)".into()];
    }
    let exec = if config.flag("allow_root_exec", false) {
        "read-only + exec, root allowed"
    } else {
        "read-only + exec"
    };
    let mut notes = vec![format!("mode: enabled ({exec})")];
    match host_socket(config, env) {
        Some(socket) => {
            let state = if UnixStream::connect(&socket).is_ok() {
                "accepts connections"
            } else {
                "does not accept connections"
            };
            notes.push(format!("socket: {} ({state})", socket.display()));
        }
        None => notes.push("socket: none found (set [tools.docker] socket)".into()),
    }
    notes
}

/// Plans the Docker filter into `filters`; a warning to print, if any.
pub fn plan_docker(
    filters: &mut Filters,
    spec: &mut SandboxSpec,
    config: &ToolConfig,
    home: &Path,
) -> anyhow::Result<Option<String>> {
    if !config.enabled {
        return Ok(None);
    }
    let env = |k: &str| std::env::var_os(k);
    let Some(host) = host_socket(config, &env) else {
        return Ok(Some(
            "[tools.docker] is enabled but no Docker socket was found (/run/docker.sock, \
             $XDG_RUNTIME_DIR/docker.sock, podman's); set [tools.docker] socket: the sandbox \
             starts without Docker"
                .into(),
        ));
    };
    if let Err(e) = UnixStream::connect(&host) {
        return Ok(Some(format!(
            "the Docker socket {} does not accept connections ({e}): the sandbox starts without Docker",
            host.display()
        )));
    }
    let sockets = session_sockets(filters, spec, home)?;
    let listener = sockets.bind("docker")?;
    spec.env.insert(
        "DOCKER_HOST".into(),
        format!("unix://{}", sockets.inside_path("docker").display()),
    );
    let log = Arc::new(DecisionLog::open(&spec.state_root, "docker"));
    let filter: Arc<dyn Filter> = Arc::new(DockerFilter {
        policy: DockerPolicy {
            allow_root_exec: config.flag("allow_root_exec", false),
        },
        host,
    });
    filters.pending.push((listener, filter, log));
    Ok(None)
}
