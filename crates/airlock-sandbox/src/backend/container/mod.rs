//! The container backend: podman or docker runs the sandbox from the same spec.
//!
//! The spec becomes the engine's `run` argv ([`render`]); the image is airlock's own empty root
//! ([`image`]), so every file inside comes from the spec's binds, as with native. The engine
//! makes the namespaces, drops every capability, sets no_new_privs and loads the seccomp profile
//! airlock generates ([`seccomp`]); airlock's exec wrapper inside ([`exec`]) adds Landlock and
//! airlock's own filter, then stays as the container's init ([`init`]). The supervisor's helpers
//! join the running container's namespaces ([`enter`]): the egress proxy's listener in its
//! network namespace ([`egress`]), the port forwards (native's `PortService`), and the keeper of
//! hidden files in its mount namespace ([`keeper`]); the wrapper runs the command only after
//! their go. Overlays are podman's overlay volumes. What an engine cannot do (overlays with
//! docker, the keeper in another user's containers) is refused by [`Backend::unsupported`],
//! never left out. A remote engine gets the project synced, not bound ([`remote`]).

mod egress;
pub mod engine;
mod enter;
pub mod exec;
mod go;
pub mod image;
pub mod init;
mod keeper;
mod launch;
pub mod remote;
pub mod render;
pub mod seccomp;
mod watchdog;

use std::path::{Path, PathBuf};

use airlock_config::container::ContainerSettings;

use super::{Backend, BackendKind, Gates, LaunchError, Outcome};
use crate::spec::SandboxSpec;
use engine::{Endpoint, Engine, EngineName};

/// A resolved engine and the `[sandbox.container]` settings.
pub struct Container {
    engine: Engine,
    settings: ContainerSettings,
    exe: PathBuf,
    /// The engine sockets on this machine a bind must never expose.
    sockets: Vec<PathBuf>,
    /// Whether this host has a pure cgroup v2 hierarchy (rootless podman's limits need it).
    cgroup_v2: bool,
}

/// Resolves the engine: `[sandbox.container] engine`, else the one `CONTAINER_HOST` /
/// `DOCKER_HOST` names, else podman when found, else docker. `find` looks a program up on
/// trusted PATH entries; `var` reads the host's environment.
pub fn resolve(
    settings: &ContainerSettings,
    find: &dyn Fn(&str) -> Option<PathBuf>,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Container, String> {
    let podman = find("podman");
    let name = engine::choose_name(
        settings.engine,
        var("CONTAINER_HOST").as_deref(),
        var("DOCKER_HOST").as_deref(),
        podman.is_some(),
    );
    let program = match name {
        EngineName::Podman => podman,
        EngineName::Docker => find("docker"),
    }
    .ok_or_else(|| {
        format!(
            "the container backend needs {0}, which is not on PATH (outside the project and \
             home); install it (as root: apt-get install {0}), set [sandbox.container] engine, \
             or use --backend native",
            name.as_str()
        )
    })?;
    let endpoint = Endpoint::parse(var(Engine::host_variable(name)).as_deref());
    let root = nix::unistd::geteuid().is_root();
    let engine = Engine {
        name,
        program,
        rootless: name == EngineName::Podman && !root,
        endpoint,
    };
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot find the airlock binary for the container: {e}"))?;
    let sockets = engine_sockets(
        &engine,
        var("XDG_RUNTIME_DIR").as_deref(),
        var("HOME").as_deref(),
    );
    Ok(Container {
        engine,
        settings: settings.clone(),
        exe,
        sockets,
        cgroup_v2: render::cgroup_v2_host(),
    })
}

/// Where engines listen on this machine: the endpoint in use and the usual places.
fn engine_sockets(engine: &Engine, runtime: Option<&str>, home: Option<&str>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = [
        "/run/podman/podman.sock",
        "/var/run/podman/podman.sock",
        "/run/docker.sock",
        "/var/run/docker.sock",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    if let Some(runtime) = runtime {
        out.push(Path::new(runtime).join("podman/podman.sock"));
        out.push(Path::new(runtime).join("docker.sock"));
    }
    if let Some(home) = home {
        out.push(Path::new(home).join(".docker/run/docker.sock"));
    }
    if let Endpoint::LocalSocket(path) = &engine.endpoint {
        out.push(path.clone());
    }
    out
}

/// `airlock doctor`'s row for the container backend: the engine found, its version, whether
/// its API answers, and the refusals every launch with it has.
pub fn doctor_row(container: Result<&Container, String>) -> crate::doctor::Check {
    use crate::doctor::{Check, Status};
    let c = match container {
        Ok(c) => c,
        Err(e) => {
            return Check {
                name: "backend container",
                status: Status::Warn,
                detail: e,
                fix: Some("install podman (as root: apt-get install podman); only for --backend container".into()),
            };
        }
    };
    let e = &c.engine;
    let place = match &e.endpoint {
        Endpoint::Default => "this machine's default".to_owned(),
        Endpoint::LocalSocket(path) => format!("the socket {}", path.display()),
        Endpoint::Remote(url) => format!(
            "{url} (remote: the project is synced, network none only, needs [sandbox.container] \
             image; see docs/backends.md)"
        ),
    };
    match c.probe() {
        Ok(version) if !matches!(e.endpoint, Endpoint::Remote(_)) => Check {
            name: "backend container",
            status: Status::Ok,
            detail: format!(
                "{} {version} at {place}, reachable{}{}{}{}",
                e.program.display(),
                if e.rootless { ", rootless" } else { "" },
                if e.name == EngineName::Podman {
                    "; airlock's overlays are podman's overlay volumes (a second session's \
                     stacked view is refused)"
                } else {
                    "; overlays are refused with it"
                },
                if c.keeper() {
                    ""
                } else {
                    ", and so are hidden files (its containers belong to another user, out of \
                     the keeper's reach)"
                },
                if e.rootless && !c.cgroup_v2 {
                    ", and so are [sandbox.resources] limits (rootless podman on cgroup v1 \
                     ignores them)"
                } else {
                    ""
                }
            ),
            fix: None,
        },
        Ok(version) => {
            let image = c.settings.image.as_deref();
            let there = image.map(|i| image::exists(e, i));
            let (status, fix) = match there {
                Some(Ok(true)) => (Status::Ok, None),
                Some(_) => (
                    Status::Warn,
                    Some(format!(
                        "build or import {} on that engine (airlock never pulls)",
                        image.unwrap_or_default()
                    )),
                ),
                None => (
                    Status::Warn,
                    Some(
                        "set [sandbox.container] image to a system image in that engine's store"
                            .into(),
                    ),
                ),
            };
            Check {
                name: "backend container",
                status,
                detail: format!(
                    "{} {version} at {place}, reachable; image {}",
                    e.program.display(),
                    match (image, there) {
                        (Some(i), Some(Ok(true))) => format!("{i} is there"),
                        (Some(i), _) => format!("{i} is not there"),
                        (None, _) => "not set".into(),
                    }
                ),
                fix,
            }
        }
        Err(why) => Check {
            name: "backend container",
            status: Status::Warn,
            detail: format!("{} at {place} does not answer: {why}", e.program.display()),
            fix: Some("start the engine, or check CONTAINER_HOST / DOCKER_HOST".into()),
        },
    }
}

impl Container {
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// `airlock doctor`'s answer: the engine's version, or why it cannot be reached.
    pub fn probe(&self) -> Result<String, String> {
        image::exists(&self.engine, "localhost/airlock-root:probe")?;
        let mut cmd = image::command(&self.engine);
        cmd.args(["version", "--format", "{{.Client.Version}}"]);
        let out = cmd.output().map_err(|e| e.to_string())?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    fn plan<'a>(
        &'a self,
        spec: &SandboxSpec,
        image: &'a str,
        files: &'a render::SessionFiles,
        name: &'a str,
    ) -> render::Plan<'a> {
        render::Plan {
            engine: &self.engine,
            image,
            exe: &self.exe,
            files,
            name,
            keep: self.settings.keep,
            tty: super::foreground::is_terminal() && !spec.argv.is_empty(),
            keeper: self.keeper(),
        }
    }

    /// Whether airlock's keeper can enter this engine's containers (hidden files, pins).
    fn keeper(&self) -> bool {
        render::keeper_enters(&self.engine, nix::unistd::geteuid().is_root())
    }
}

impl Backend for Container {
    fn kind(&self) -> BackendKind {
        BackendKind::Container
    }

    fn unsupported(&self, spec: &SandboxSpec) -> Vec<String> {
        match self.engine.endpoint {
            Endpoint::Remote(_) => {
                let mut out = remote::unsupported(spec, &self.engine);
                if self.settings.image.is_none() {
                    out.push(remote::no_image(&self.engine));
                }
                out
            }
            _ => {
                let mut out = render::unsupported(spec, &self.engine, &self.sockets, self.keeper());
                out.extend(render::limits_refusal(
                    &spec.limits,
                    &self.engine,
                    self.cgroup_v2,
                ));
                out
            }
        }
    }

    fn render(&self, spec: &SandboxSpec) -> Result<Vec<Vec<String>>, String> {
        if let Endpoint::Remote(_) = self.engine.endpoint {
            let refused = remote::unsupported(spec, &self.engine);
            if !refused.is_empty() {
                return Err(refused.join("; "));
            }
            let mut argv = vec![self.engine.program.display().to_string()];
            argv.extend(remote::argv(self, spec));
            return Ok(vec![argv]);
        }
        let refused = self.unsupported(spec);
        if !refused.is_empty() {
            return Err(refused.join("; "));
        }
        let image = match &self.settings.image {
            Some(image) => image.clone(),
            None => image::own_tag(&render::image_symlinks(spec)),
        };
        let files = launch::session_files(spec);
        let name = launch::container_name(spec);
        let args = render::render(spec, &self.plan(spec, &image, &files, &name), &self.sockets)?;
        let mut argv = vec![self.engine.program.display().to_string()];
        argv.extend(args.iter().map(|a| a.to_string_lossy().into_owned()));
        Ok(vec![argv])
    }

    fn launch(&self, spec: &SandboxSpec, gates: &mut dyn Gates) -> Result<Outcome, LaunchError> {
        launch::run(self, spec, gates)
    }
}
