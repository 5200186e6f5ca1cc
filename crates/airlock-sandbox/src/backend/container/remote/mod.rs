//! A remote engine (`CONTAINER_HOST` / `DOCKER_HOST` = `tcp://…`, `ssh://…`): the project is
//! synced, not bound, since that engine's machine has none of this machine's files.
//!
//! Before anything is created: the spec is checked ([`unsupported`]) and the configured image
//! must be in that engine's store. Then a volume for the project, the container created
//! ([`render::create`]), the project sent into it as a tar ([`send`]) and airlock's exec wrapper
//! beside it, the container started attached. At its end, whatever its status, the container's
//! project comes back as a tar unpacked as data ([`receive`]) and is applied to the host project
//! ([`apply`]); its `.git` is handed to the gates (the git tool's fetch: branches and objects
//! only). Then the container and the volume are removed (`keep` keeps both).

mod apply;
mod plan;
mod receive;
pub mod render;
pub mod send;

use std::io::Write as _;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use super::engine::{Endpoint, Engine};
use super::{Container, image, launch};
use crate::native::{Gates, LaunchError, Outcome};
use crate::spec::SandboxSpec;
pub use plan::unsupported;
use plan::{exclusions, read_only, ro_dirs};

/// Where airlock's exec wrapper is copied in the container's (read-only) root.
pub const EXEC_PATH: &str = "/.airlock/airlock-container-exec";

/// The engine's URL, for messages.
fn url(engine: &Engine) -> String {
    match &engine.endpoint {
        Endpoint::Remote(url) => format!("{}={url}", Engine::host_variable(engine.name)),
        _ => "this machine's engine".into(),
    }
}

/// Why a remote launch without `[sandbox.container] image` is refused (before anything is made).
pub fn no_image(engine: &Engine) -> String {
    format!(
        "the container backend on a remote engine ({}) needs [sandbox.container] image = \"…\" \
         naming a system image in that engine's store (airlock's own image is an empty root over \
         this machine's /usr, which that machine cannot see); build or import one there ({} \
         build / import) and set the key",
        url(engine),
        engine.name.as_str()
    )
}

/// The image a remote launch runs: `[sandbox.container] image`, which must be in that engine's
/// store (airlock's own image is an empty root over this machine's `/usr`).
fn remote_image(c: &Container) -> Result<String, String> {
    let at = url(&c.engine);
    let Some(image) = c.settings.image.as_deref() else {
        return Err(no_image(&c.engine));
    };
    match image::exists(&c.engine, image) {
        Ok(true) => Ok(image.to_owned()),
        Ok(false) => Err(format!(
            "the image {image:?} ([sandbox.container] image) is not in the store of the remote \
             engine {at}, and airlock never pulls; build or import it there, or name an image \
             that engine has"
        )),
        Err(e) => Err(format!("the remote engine {at} does not answer: {e}")),
    }
}

/// The engine command of a remote launch, its output captured, its status checked.
fn engine(c: &Container, args: &[&str]) -> Result<Vec<u8>, String> {
    let out = image::command(&c.engine)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", c.engine.program.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} {} failed on {}: {}",
            c.engine.name.as_str(),
            args.first().copied().unwrap_or(""),
            url(&c.engine),
            airlock_config::printable(String::from_utf8_lossy(&out.stderr).trim())
        ));
    }
    Ok(out.stdout)
}

/// The engine's `create` arguments for `spec` (`run --print-spec --render`).
pub(super) fn argv(c: &Container, spec: &SandboxSpec) -> Vec<String> {
    let image = c
        .settings
        .image
        .as_deref()
        .unwrap_or("<[sandbox.container] image>");
    let name = launch::container_name(spec);
    create_args(c, spec, image, &name, &ro_dirs(spec, &name), false)
}

fn create_args(
    c: &Container,
    spec: &SandboxSpec,
    image: &str,
    name: &str,
    ro: &[(PathBuf, String)],
    tty: bool,
) -> Vec<String> {
    let volume = format!("{name}-project");
    let mounts: Vec<(PathBuf, &str)> = ro
        .iter()
        .map(|(r, v)| (spec.project.join(r), v.as_str()))
        .collect();
    let volumes = render::Volumes {
        project: &volume,
        read_only: &mounts,
    };
    let files = launch::session_files(spec);
    render::create(spec, &c.engine, image, name, &volumes, &files, tty)
}

/// The whole remote launch.
pub(super) fn run(
    c: &Container,
    spec: &SandboxSpec,
    gates: &mut dyn Gates,
) -> Result<Outcome, LaunchError> {
    let refused = unsupported(spec, &c.engine);
    if !refused.is_empty() {
        return Err(LaunchError::Plan(refused.join("; ")));
    }
    let image = remote_image(c).map_err(LaunchError::Setup)?;
    for line in left_behind(c, spec) {
        eprintln!("airlock: {line}");
    }
    let ex = exclusions(spec).map_err(LaunchError::Plan)?;
    let files = launch::session_files(spec);
    launch::write_files(spec, &files)
        .map_err(|e| LaunchError::Setup(format!("cannot write {}: {e}", files.dir.display())))?;
    let name = launch::container_name(spec);
    let volume = format!("{name}-project");
    let tty = crate::backend::foreground::is_terminal() && !spec.argv.is_empty();
    let ro = ro_dirs(spec, &name);
    let result = (|| {
        for v in std::iter::once(&volume).chain(ro.iter().map(|(_, v)| v)) {
            engine(c, &["volume", "create", v]).map_err(LaunchError::Setup)?;
        }
        let args = create_args(c, spec, &image, &name, &ro, tty);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        engine(c, &args).map_err(LaunchError::Setup)?;
        let spool = files.dir.join("spool");
        let sent = send_in(c, spec, &ex, &name, &ro, &spool).map_err(LaunchError::Setup)?;
        let mut start = c.engine.global_args();
        start.extend([
            "start".into(),
            "--attach".into(),
            "--interactive".into(),
            name.clone(),
        ]);
        let start: Vec<std::ffi::OsString> = start.into_iter().map(Into::into).collect();
        let outcome = launch::run_engine(c, spec, &name, &start, None, &mut false, gates);
        // Whatever the workload's end: its work comes back, whole. A signal meanwhile (a second
        // Ctrl-C) waits until the apply is done rather than stop it half way.
        let held = hold_signals();
        let back = bring_back(c, spec, &ex, &name, &files.dir.join("back"), &sent, gates);
        drop(held);
        match (outcome, back) {
            (Ok(o), Ok(())) => Ok(o),
            (Err(e), _) => Err(e),
            (Ok(_), Err(e)) => Err(LaunchError::Setup(e)),
        }
    })();
    if !files.dir.join("back").exists() {
        let _ = std::fs::remove_dir_all(&files.dir);
    }
    if c.settings.keep {
        eprintln!(
            "airlock: kept the container {name} and its volume {volume} on {} ({} rm {name}; \
             {} volume rm {volume} and its -ro- volumes remove them)",
            url(&c.engine),
            c.engine.name.as_str(),
            c.engine.name.as_str()
        );
    } else {
        let _ = engine(c, &["rm", "--force", &name]);
        for v in std::iter::once(&volume).chain(ro.iter().map(|(_, v)| v)) {
            let _ = engine(c, &["volume", "rm", "--force", v]);
        }
    }
    result
}

/// Blocks SIGINT, SIGTERM, SIGHUP and SIGQUIT until dropped (then a pending one is delivered).
struct HeldSignals(nix::sys::signal::SigSet);

fn hold_signals() -> Option<HeldSignals> {
    use nix::sys::signal::{SigSet, SigmaskHow, sigprocmask};
    let set = crate::backend::foreground::stop_signals();
    let mut previous = SigSet::empty();
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set), Some(&mut previous)).ok()?;
    Some(HeldSignals(previous))
}

impl Drop for HeldSignals {
    fn drop(&mut self) {
        use nix::sys::signal::{SigmaskHow, sigprocmask};
        let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&self.0), None);
    }
}

/// The containers of this sandbox on the engine whose airlock is gone (killed before its
/// copy-back): their work is still in them, so they are named with how to look and remove, never
/// removed or applied by a later session.
fn left_behind(c: &Container, spec: &SandboxSpec) -> Vec<String> {
    let prefix = format!("airlock-{}-", spec.name);
    let Ok(names) = engine(c, &["ps", "--all", "--format", "{{.Names}}"]) else {
        return Vec::new();
    };
    let mut words = vec![c.engine.name.as_str().to_owned()];
    words.extend(c.engine.global_args());
    let cli = words.join(" ");
    String::from_utf8_lossy(&names)
        .lines()
        .filter_map(|name| Some((name, name.strip_prefix(&prefix)?.parse::<u32>().ok()?)))
        .filter(|(_, pid)| !Path::new(&format!("/proc/{pid}")).exists())
        .map(|(name, _)| {
            format!(
                "the container {name} on {} is left from a session that ended before its copy-back \
                 (its changes are not in the project); see them with `{cli} cp {name}:{}/. - | \
                 tar -t`, remove it with `{cli} rm --force {name}` and `{cli} volume rm \
                 {name}-project`",
                url(&c.engine),
                spec.project.display()
            )
        })
        .collect()
}

/// Sends the project (its read-only trees each into its volume, and the exec wrapper) into the
/// created container.
fn send_in(
    c: &Container,
    spec: &SandboxSpec,
    ex: &send::Exclusions,
    name: &str,
    ro: &[(PathBuf, String)],
    spool: &Path,
) -> Result<send::Sent, String> {
    let skip: Vec<PathBuf> = ro.iter().map(|(r, _)| r.clone()).collect();
    let mut sent = send::Sent::new();
    for base in std::iter::once(Path::new("")).chain(skip.iter().map(PathBuf::as_path)) {
        let others: Vec<PathBuf> = skip.iter().filter(|s| *s != base).cloned().collect();
        let dest = format!("{name}:{}", spec.project.join(base).display());
        let what = spec.project.join(base).display().to_string();
        let tree = copy_in(c, spool, &dest, &what, |pipe| {
            send::write_tree(&spec.project, base, &others, ex, (spec.uid, spec.gid), pipe)
        })?;
        sent.extend(tree?);
    }
    let exe = std::fs::read(&c.exe).map_err(|e| format!("cannot read {}: {e}", c.exe.display()))?;
    let mut wrapper = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_mode(0o755);
    h.set_size(exe.len() as u64);
    wrapper
        .append_data(&mut h, EXEC_PATH.trim_start_matches('/'), &exe[..])
        .and_then(|()| wrapper.finish())
        .map_err(|e| format!("cannot pack the exec wrapper: {e}"))?;
    let body = wrapper.into_inner().map_err(|e| e.to_string())?;
    let dest = format!("{name}:/");
    copy_in(c, spool, &dest, "the exec wrapper", |mut pipe| {
        pipe.write_all(&body)
    })?
    .map_err(|e| format!("cannot send the exec wrapper into {name}: {e}"))?;
    Ok(sent)
}

/// `cp - dest` fed the tar `write` makes. The engine CLI spools that tar in its `TMPDIR` (podman
/// 4.3 in `/var/tmp`, and never removes it): it is given `spool`, a directory of this session's
/// own (`0700`, in airlock's state), emptied once the copy is done, so no copy of the project
/// outlives the session on this machine.
fn copy_in<R>(
    c: &Container,
    spool: &Path,
    dest: &str,
    what: &str,
    write: impl FnOnce(std::process::ChildStdin) -> R,
) -> Result<R, String> {
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(spool)
        .map_err(|e| format!("cannot make {}: {e}", spool.display()))?;
    let copied = (|| {
        let mut child = image::command(&c.engine)
            .env("TMPDIR", spool)
            .args(["cp", "-", dest])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", c.engine.program.display()))?;
        let written = write(child.stdin.take().expect("piped"));
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!(
                "{} cp of {what} into {dest} failed on {}: {}",
                c.engine.name.as_str(),
                url(&c.engine),
                airlock_config::printable(String::from_utf8_lossy(&out.stderr).trim())
            ));
        }
        Ok(written)
    })();
    let removed = crate::state::remove_tree(spool);
    let written = copied?;
    removed.map_err(|e| format!("cannot remove {}: {e}", spool.display()))?;
    Ok(written)
}

/// Copies the container's project back as data and applies it; the `.git` staged goes to the
/// gates (the git tool's fetch) when the spec has the git layer.
fn bring_back(
    c: &Container,
    spec: &SandboxSpec,
    ex: &send::Exclusions,
    name: &str,
    staging: &Path,
    sent: &send::Sent,
    gates: &mut dyn Gates,
) -> Result<(), String> {
    let _ = crate::state::remove_tree(staging);
    let source = format!("{name}:{}/.", spec.project.display());
    let mut cmd = image::command(&c.engine);
    cmd.args(["cp", &source, "-"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", c.engine.program.display()))?;
    let stdout = child.stdout.take().expect("piped");
    let unpacked = receive::unpack(stdout, staging, receive::Caps::DEFAULT);
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let where_ = format!("the container {name} on {}", url(&c.engine));
    if !out.status.success() {
        return Err(format!(
            "cannot copy the project back from {where_}: {}; nothing was applied",
            airlock_config::printable(String::from_utf8_lossy(&out.stderr).trim())
        ));
    }
    let dropped = unpacked?;
    for line in &dropped {
        eprintln!("airlock: not brought back from the container: {line}");
    }
    let read_only = read_only(spec);
    let guard = |rel: &Path| -> Option<&'static str> {
        if rel.components().any(|c| c.as_os_str() == ".git") {
            Some("git metadata (commits come back through git fetch)")
        } else if ex.hidden(rel) {
            Some("hidden by the spec")
        } else if read_only.iter().any(|r| rel.starts_with(r)) {
            Some("read-only in the spec")
        } else {
            None
        }
    };
    let applied = apply::apply(&spec.project, staging, sent, &guard)?;
    for (path, why) in &applied.refused {
        eprintln!("airlock: not brought back: {} ({why})", path.display());
    }
    for (path, why) in &applied.kept {
        eprintln!(
            "airlock: left as it is on this machine: {} ({why})",
            path.display()
        );
    }
    let git_layer = spec
        .owned_layer()
        .is_some_and(|(_, target, _)| target == spec.project.join(".git"));
    if git_layer {
        for line in gates.bring_back_git(&staging.join(".git")) {
            eprintln!("airlock: {line}");
        }
    }
    if applied.kept.is_empty() {
        let _ = crate::state::remove_tree(staging);
    } else {
        // The developer is pointed at this copy: git must not open the container's repository.
        receive::retire_git(staging);
        eprintln!(
            "airlock: the container's copy is kept in {} (its git metadata renamed {})",
            staging.display(),
            receive::RETIRED_GIT
        );
    }
    Ok(())
}

#[cfg(test)]
mod apply_tests;
#[cfg(test)]
mod tests;
