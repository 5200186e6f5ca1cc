//! docker: opt-in (`[tools.docker] enabled = true`). Nothing of the host's Docker is mounted;
//! the sandbox gets a read-only filter of the Engine API (`airlock_sockets::docker`) at
//! `$HOME/.run/<pid>/docker.sock`, `DOCKER_HOST` pointing at it: inspect, logs, stats, exec
//! (not privileged, not as root unless `allow_root_exec`), nothing that creates, changes or
//! reads files out of containers or images.

use crate::tool::{KeyKind, KeySpec, Tool};

pub(crate) struct Docker;

const KEYS: &[KeySpec] = &[
    KeySpec {
        name: "socket",
        kind: KeyKind::Path,
        default: "\"/run/docker.sock\"",
        help: "the engine's socket; default: $DOCKER_HOST when unix://, /run/docker.sock, \
               /var/run/docker.sock, $XDG_RUNTIME_DIR/docker.sock, $XDG_RUNTIME_DIR/podman/podman.sock, \
               /run/podman/podman.sock (the first that exists)",
    },
    KeySpec {
        name: "allow_root_exec",
        kind: KeyKind::Bool,
        default: "false",
        help: "true: `docker exec -u root` (and user 0) is allowed; privileged exec never is",
    },
];

impl Tool for Docker {
    fn name(&self) -> &'static str {
        "docker"
    }
    fn description(&self) -> &'static str {
        "Docker Engine API, read-only + exec, through airlock's filter (opt-in)"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["docker", "podman"]
    }
    fn has_mount_mode(&self) -> bool {
        false
    }
    fn keys(&self) -> &'static [KeySpec] {
        KEYS
    }
    fn enabled_by_default(&self) -> bool {
        false
    }
}
