//! A container launch: the session's files for the engine (seccomp profile, env file, the empty
//! mask file, private copies) in a host-only directory, the image, then the engine's `run` in
//! the foreground; the supervisor waits, passes on signals sent to it, and maps the end.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use super::go::GoSocket;
use super::render::{self, SessionFiles};
use super::{Container, image};
use crate::backend::{Backend, foreground};
use crate::native::{Gates, LaunchError, Outcome};
use crate::spec::{MountOp, SandboxSpec, Upper};

/// What the engine exits with when it could not create or start the container.
const ENGINE_FAILED: i32 = 125;

/// The session's directory for the engine: `<state_root>/container/<pid>`; the state root is
/// host-trusted and never mounted, so the sandbox cannot swap what the engine reads.
pub(super) fn session_files(spec: &SandboxSpec) -> SessionFiles {
    SessionFiles {
        dir: spec
            .state_root
            .join("container")
            .join(std::process::id().to_string()),
    }
}

/// The name of a kept container: `airlock-<sandbox>-<pid>`.
pub(super) fn container_name(spec: &SandboxSpec) -> String {
    format!("airlock-{}-{}", spec.name, std::process::id())
}

pub(super) fn run(
    c: &Container,
    spec: &SandboxSpec,
    gates: &mut dyn Gates,
) -> Result<Outcome, LaunchError> {
    if matches!(c.engine.endpoint, super::engine::Endpoint::Remote(_)) {
        return super::remote::run(c, spec, gates);
    }
    let refused = c.unsupported(spec);
    if !refused.is_empty() {
        return Err(LaunchError::Plan(refused.join("; ")));
    }
    check_sources(spec)?;
    let symlinks = render::image_symlinks(spec);
    let configured = c.settings.image.as_deref();
    let image = image::name(configured, &symlinks);
    let ensure = || {
        image::ensure(&c.engine, configured.is_some(), &image, &symlinks)
            .map_err(LaunchError::Setup)
    };
    let seen = image::Seen::new(&spec.state_root, &c.engine, &image);
    let trusted = seen.holds();
    if !trusted {
        ensure()?;
        seen.record();
    }
    let (result, ran) = launch_once(c, spec, &image, gates);
    if ran || !trusted || !matches!(result, Err(LaunchError::Setup(_))) {
        return result;
    }
    // The engine failed before the container ran, on an image only the record said was there.
    seen.forget();
    if image::exists(&c.engine, &image).map_err(LaunchError::Setup)? {
        return result;
    }
    if configured.is_none() {
        eprintln!(
            "airlock: airlock's image {image} has gone from {}'s store since it was imported; \
             importing it again",
            c.engine.name.as_str()
        );
    }
    ensure()?;
    seen.record();
    launch_once(c, spec, &image, gates).0
}

/// One start of the engine on `image`: the session's files, the go socket, the `run`, the end;
/// and whether the container ran (its wrapper connected to the go socket).
fn launch_once(
    c: &Container,
    spec: &SandboxSpec,
    image: &str,
    gates: &mut dyn Gates,
) -> (Result<Outcome, LaunchError>, bool) {
    let files = session_files(spec);
    let go = match write_files(spec, &files).and_then(|()| GoSocket::bind(spec, &files.go())) {
        Ok(go) => go,
        Err(e) => {
            let e = format!("cannot write {}: {e}", files.dir.display());
            return (Err(LaunchError::Setup(e)), false);
        }
    };
    let name = container_name(spec);
    let plan = c.plan(spec, image, &files, &name);
    let mut ran = false;
    let result = render::render(spec, &plan, &c.sockets)
        .map_err(LaunchError::Plan)
        .and_then(|args| run_engine(c, spec, &name, &args, Some(go), &mut ran, gates));
    if c.settings.keep && ran {
        eprintln!(
            "airlock: kept the container {name} ({} rm {name} removes it; its files are in {})",
            c.engine.name.as_str(),
            files.dir.display()
        );
    } else {
        remove_session_files(c, &files);
    }
    (result, ran)
}

/// Removes the session's files; what rootless podman left there owned by one of the user's
/// subordinate ids (an overlay's `work/work`) is removed inside its user namespace.
fn remove_session_files(c: &Container, files: &SessionFiles) {
    if std::fs::remove_dir_all(&files.dir).is_ok() || !c.engine.rootless {
        return;
    }
    let mut rm = image::command(&c.engine);
    rm.arg("unshare")
        .arg("rm")
        .arg("-rf")
        .arg("--")
        .arg(&files.dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    if !rm.status().is_ok_and(|s| s.success()) {
        eprintln!(
            "airlock: warning: cannot remove {} (podman unshare rm -rf removes it)",
            files.dir.display()
        );
    }
}

/// Refuses a bind whose source (an overlay's lower), or a mount whose target, passes through a symlink inside a
/// sandbox-writable tree: the engine resolves sources by host path and targets inside the
/// container, so a link planted there by an earlier session would bind what it points at, or
/// put a mount somewhere else than the spec says (native refuses such targets too).
fn check_sources(spec: &SandboxSpec) -> Result<(), LaunchError> {
    // Each writable bind: where it is inside, and the host tree it shows.
    let writable: Vec<(&Path, &Path)> = spec
        .mounts
        .iter()
        .filter_map(|op| match op {
            MountOp::Bind {
                source,
                target,
                writable: true,
            } => Some((target.as_path(), source.as_path())),
            _ => None,
        })
        .collect();
    for op in &spec.mounts {
        if let MountOp::Bind { source, .. }
        | MountOp::CopyFile { source, .. }
        | MountOp::Overlay { lower: source, .. } = op
        {
            for (_, tree) in &writable {
                if let Some(rel) = source
                    .strip_prefix(tree)
                    .ok()
                    .filter(|r| !r.as_os_str().is_empty())
                {
                    refuse_links(tree, rel, source)?;
                }
            }
        }
        let target = op.target();
        for (inside, tree) in &writable {
            if let Some(rel) = target
                .strip_prefix(inside)
                .ok()
                .filter(|r| !r.as_os_str().is_empty())
            {
                refuse_links(tree, rel, target)?;
            }
        }
    }
    Ok(())
}

/// An error when a component of `tree/rel` (on the host) is a symlink; `what` is the spec's path.
fn refuse_links(tree: &Path, rel: &Path, what: &Path) -> Result<(), LaunchError> {
    let mut at = tree.to_path_buf();
    for part in rel.components() {
        at.push(part);
        if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(LaunchError::Setup(format!(
                "{} is a symlink in a sandbox-writable tree ({}), so the container engine cannot \
                 mount {} safely; remove the link, or use --backend native",
                at.display(),
                tree.display(),
                what.display()
            )));
        }
    }
    Ok(())
}

/// What the supervisor runs beside a local container for the session, dropped at its end.
#[derive(Default)]
struct Helpers {
    keeper: Option<super::keeper::Running>,
    /// The forwards and the control socket (`airlock forward`, `airlock sessions`), as native's.
    ports: Option<crate::ports::PortService>,
    /// Whether the container's wrapper connected to the go socket: the container ran.
    ran: bool,
}

/// Once the wrapper of a local container has connected to the go socket (which names its host
/// pid): in proxy mode, the egress listener in the container's network namespace, served by the
/// gates; the port forwards and the control socket, through native's helper in that namespace;
/// with files to hide or hold, the keeper in its mount namespace; then the gates' threads (the
/// helpers are forked before they start); then go for the wrapper, which runs the command only
/// after it. A remote engine's container has none of these (`go` is `None`).
fn start_gates(
    spec: &SandboxSpec,
    go: Option<GoSocket>,
    engine: &mut std::process::Child,
    gates: &mut dyn Gates,
    helpers: &mut Helpers,
) -> Result<(), LaunchError> {
    let Some(go) = go else {
        return gates.started().map_err(LaunchError::Setup);
    };
    let Some(wrapper) = go.accept(engine).map_err(LaunchError::Setup)? else {
        // The engine ended before the container ran: its status says why.
        return Ok(());
    };
    helpers.ran = true;
    let pid = wrapper.pid;
    let listener = if spec.network == airlock_config::NetworkMode::Proxy {
        Some(
            super::egress::listener_in(pid, crate::native::EGRESS_PORT)
                .map_err(LaunchError::Setup)?,
        )
    } else {
        None
    };
    if !spec.ports.forwards.is_empty() || spec.ports.control_dir.is_some() {
        // The namespace files refuse us while the runtime's init still runs (`enter.rs`).
        super::enter::wait_until_open(pid, "net").map_err(LaunchError::Setup)?;
        let mut service =
            crate::ports::PortService::start(spec, pid).map_err(LaunchError::Setup)?;
        service.serve();
        for warning in service.warnings() {
            eprintln!("airlock: warning: {warning}");
        }
        helpers.ports = Some(service);
    }
    if let Some(hide) = spec.hide.as_ref().filter(|_| render::needs_keeper(spec)) {
        helpers.keeper = Some(super::keeper::start(pid, hide).map_err(LaunchError::Setup)?);
    }
    gates.started().map_err(LaunchError::Setup)?;
    if let Some(listener) = listener {
        gates.serve_egress(listener).map_err(LaunchError::Setup)?;
    }
    wrapper.go().map_err(LaunchError::Setup)
}

pub(super) fn write_files(spec: &SandboxSpec, files: &SessionFiles) -> std::io::Result<()> {
    let _ = std::fs::remove_dir_all(&files.dir);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&files.dir)?;
    let create = |path: &Path, mode: u32| {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
    };
    create(&files.seccomp(), 0o600)?.write_all(super::seccomp::profile(spec.seccomp).as_bytes())?;
    let mut env = String::new();
    for (k, v) in &spec.env {
        env.push_str(k);
        env.push('=');
        env.push_str(v);
        env.push('\n');
    }
    create(&files.env(), 0o600)?.write_all(env.as_bytes())?;
    create(&files.empty(), 0o444)?;
    fifo(spec, &files.status())?;
    let copies = spec.mounts.iter().filter_map(|op| match op {
        MountOp::CopyFile { source, .. } => Some(source),
        _ => None,
    });
    for (n, source) in copies.enumerate() {
        let body = std::fs::read(source)?;
        create(&files.copy(n), 0o644)?.write_all(&body)?;
    }
    let persistent = spec.mounts.iter().filter(|op| {
        matches!(
            op,
            MountOp::Overlay {
                upper: Upper::Persistent { .. } | Upper::Owned { .. },
                ..
            }
        )
    });
    for (n, _) in persistent.enumerate() {
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(files.overlay_work(n))?;
    }
    Ok(())
}

/// The init's status FIFO, 0600 in the host-only session directory, owned by the container's
/// user.
fn fifo(spec: &SandboxSpec, path: &Path) -> std::io::Result<()> {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600))?;
    // The wrapper runs as the spec's user (the same as ours, unless root launches for another).
    if nix::unistd::geteuid().is_root() && spec.uid != 0 {
        std::os::unix::fs::chown(path, Some(spec.uid), Some(spec.gid))?;
    }
    Ok(())
}

/// Runs the engine in the foreground, starts the gates, waits for it ([`foreground::run`]:
/// signals sent to airlock alone are passed on to the engine, which passes them to the
/// container).
pub(super) fn run_engine(
    c: &Container,
    spec: &SandboxSpec,
    name: &str,
    args: &[std::ffi::OsString],
    go: Option<GoSocket>,
    ran: &mut bool,
    gates: &mut dyn Gates,
) -> Result<Outcome, LaunchError> {
    // `args` starts with the socket options already (render puts them there).
    let mut command = image::bare_command(&c.engine);
    command.args(args);
    let what = c.engine.program.display().to_string();
    // Open before the engine starts, so the init finds a reader (a remote engine binds none).
    let fifo = session_files(spec).status();
    let record = super::init::Status::open(&fifo)
        .map_err(|e| LaunchError::Setup(format!("cannot open {}: {e}", fifo.display())))?;
    // Stops the container if airlock dies before the engine's client returns (`watchdog.rs`).
    let mut kill = image::command(&c.engine);
    kill.args(["kill", name]);
    let watchdog = super::watchdog::Watchdog::start(kill).map_err(LaunchError::Setup)?;
    let mut helpers = Helpers::default();
    let mut go = go;
    let status = foreground::run(&mut command, &what, &mut |child| {
        start_gates(spec, go.take(), child, gates, &mut helpers).inspect_err(|_| {
            let _ = image::command(&c.engine)
                .args(["kill", name])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status();
        })
    });
    *ran = helpers.ran;
    // Every forward ends with the container: listeners closed, relays shut, the helper gone.
    drop(helpers.ports.take());
    // The keeper's last word first: a file it could not hide stopped the sandbox.
    if let Some(stopped) = helpers.keeper.and_then(super::keeper::Running::finish) {
        watchdog.done();
        return Err(LaunchError::Stopped(stopped));
    }
    let status = status?;
    watchdog.done();
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(ENGINE_FAILED), _) => Err(LaunchError::Setup(format!(
            "{what} could not run the container (exit {ENGINE_FAILED}); its message is above"
        ))),
        // A death by signal N inside comes back as 128+N with the init's record (`init.rs`).
        (Some(code), _) => Ok(record.outcome(code)),
        (None, Some(signal)) => Ok(Outcome::Signaled(signal)),
        (None, None) => Err(LaunchError::Lost),
    }
}
