//! Which container engine runs the sandbox, where it listens, and whether it is on this machine.
//!
//! The engine is the configured one, else the one `CONTAINER_HOST` (podman) or `DOCKER_HOST`
//! (docker) names, else podman when installed, else docker. The program is resolved by the
//! caller from a trusted PATH entry; it runs with a rebuilt environment (only what selects and
//! configures the engine passes, see [`Engine::environment`]).

use std::ffi::OsString;
use std::path::PathBuf;

pub use airlock_config::container::EngineName;

/// Where the engine's API is, as `CONTAINER_HOST` / `DOCKER_HOST` say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// The engine's default on this machine (no variable set).
    Default,
    /// A unix socket on this machine (`unix:///path`): binds of host paths reach this host.
    LocalSocket(PathBuf),
    /// Anything else (`tcp://`, `ssh://`, `npipe://`): another machine, whose files binds name.
    Remote(String),
}

impl Endpoint {
    /// Reads a `CONTAINER_HOST` / `DOCKER_HOST` value; `None` or empty means the default.
    pub fn parse(value: Option<&str>) -> Endpoint {
        match value.filter(|v| !v.is_empty()) {
            None => Endpoint::Default,
            Some(v) => match v.strip_prefix("unix://") {
                Some(path) if path.starts_with('/') => Endpoint::LocalSocket(path.into()),
                _ => Endpoint::Remote(v.to_owned()),
            },
        }
    }
}

/// The engine of a launch, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Engine {
    pub name: EngineName,
    /// The engine's CLI, an absolute path from a trusted PATH entry.
    pub program: PathBuf,
    pub endpoint: Endpoint,
    /// Whether the engine runs containers as the calling user (podman without root): then the
    /// user's uid is kept with `--userns=keep-id`.
    pub rootless: bool,
}

/// The engine to use: `configured`, else the one a variable names (`CONTAINER_HOST` first),
/// else podman if `podman_found`, else docker.
pub fn choose_name(
    configured: Option<EngineName>,
    container_host: Option<&str>,
    docker_host: Option<&str>,
    podman_found: bool,
) -> EngineName {
    let set = |v: Option<&str>| v.is_some_and(|v| !v.is_empty());
    match configured {
        Some(name) => name,
        None if set(container_host) => EngineName::Podman,
        None if set(docker_host) => EngineName::Docker,
        None if podman_found => EngineName::Podman,
        None => EngineName::Docker,
    }
}

impl Engine {
    /// The variable that points `name` at its API.
    pub fn host_variable(name: EngineName) -> &'static str {
        match name {
            EngineName::Podman => "CONTAINER_HOST",
            EngineName::Docker => "DOCKER_HOST",
        }
    }

    /// The environment the engine's CLI runs with: a fixed PATH, and only the variables that
    /// select or configure the engine, taken from `host` (never the sandbox's environment).
    pub fn environment(&self, host: &dyn Fn(&str) -> Option<OsString>) -> Vec<(String, OsString)> {
        let mut env = vec![(
            "PATH".to_owned(),
            OsString::from("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
        )];
        let keep: &[&str] = match self.name {
            EngineName::Podman => &[
                "HOME",
                "XDG_RUNTIME_DIR",
                "XDG_CONFIG_HOME",
                "XDG_DATA_HOME",
                "CONTAINER_HOST",
                "CONTAINERS_CONF",
                "CONTAINERS_STORAGE_CONF",
                "CONTAINERS_REGISTRIES_CONF",
            ],
            EngineName::Docker => &["HOME", "DOCKER_HOST", "DOCKER_CONFIG", "DOCKER_CONTEXT"],
        };
        for name in keep {
            if let Some(value) = host(name) {
                env.push(((*name).to_owned(), value));
            }
        }
        env
    }

    /// The options every engine command starts with: podman is told to use the socket or the
    /// remote URL `CONTAINER_HOST` names (it reads the variable only in remote mode); docker
    /// reads `DOCKER_HOST` itself.
    pub fn global_args(&self) -> Vec<String> {
        match (&self.name, &self.endpoint) {
            (EngineName::Podman, Endpoint::LocalSocket(path)) => {
                vec![
                    "--remote".into(),
                    "--url".into(),
                    format!("unix://{}", path.display()),
                ]
            }
            (EngineName::Podman, Endpoint::Remote(url)) => {
                vec!["--remote".into(), "--url".into(), url.clone()]
            }
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_wins_then_container_host_then_docker_host_then_what_is_installed() {
        use EngineName::{Docker, Podman};
        assert_eq!(
            choose_name(Some(Docker), Some("unix:///a"), None, true),
            Docker
        );
        assert_eq!(
            choose_name(None, Some("unix:///a"), Some("x"), false),
            Podman
        );
        assert_eq!(choose_name(None, None, Some("tcp://h:2375"), true), Docker);
        assert_eq!(choose_name(None, Some(""), None, true), Podman);
        assert_eq!(choose_name(None, None, None, false), Docker);
    }

    #[test]
    fn only_a_unix_socket_path_is_local() {
        assert_eq!(Endpoint::parse(None), Endpoint::Default);
        assert_eq!(Endpoint::parse(Some("")), Endpoint::Default);
        assert_eq!(
            Endpoint::parse(Some("unix:///run/podman/podman.sock")),
            Endpoint::LocalSocket("/run/podman/podman.sock".into())
        );
        for remote in [
            "tcp://10.0.0.2:2375",
            "ssh://dev@box/run/podman.sock",
            "unix://rel",
        ] {
            assert!(
                matches!(Endpoint::parse(Some(remote)), Endpoint::Remote(_)),
                "{remote}"
            );
        }
    }

    #[test]
    fn the_engine_gets_a_fixed_path_and_only_its_own_variables() {
        let engine = Engine {
            name: EngineName::Podman,
            program: "/usr/bin/podman".into(),
            endpoint: Endpoint::Default,
            rootless: false,
        };
        let host = |n: &str| match n {
            "HOME" => Some(OsString::from("/home/dev")),
            "AWS_SECRET_ACCESS_KEY" | "LD_PRELOAD" => Some(OsString::from("x")),
            _ => None,
        };
        let env = engine.environment(&host);
        let names: Vec<&str> = env.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["PATH", "HOME"]);
    }
}
