//! The spec as a container engine's `run` argv, and what an engine cannot honour in it.
//!
//! The image is an empty root holding only the spec's root symlinks (`/bin -> usr/bin`, ...); the
//! spec's binds and tmpfs build the rest, as they do for native, so the system inside is the
//! host's own, read-only. The engine provides `/proc` and `/dev`. The workload starts through
//! airlock's exec wrapper (`exec.rs`), which applies Landlock and airlock's seccomp filter
//! before it execs the spec's argv.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use airlock_config::NetworkMode;

use super::engine::{Engine, EngineName};
use super::exec::{EXEC_PATH, GO_PATH};
use super::init::STATUS_PATH;
use crate::spec::{Limits, MountOp, SandboxSpec, Upper};

/// Where things the launch writes for the engine live on the host: a directory only the
/// supervisor writes (never mounted writable), one per session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionFiles {
    pub dir: PathBuf,
}

impl SessionFiles {
    pub fn seccomp(&self) -> PathBuf {
        self.dir.join("seccomp.json")
    }
    pub fn env(&self) -> PathBuf {
        self.dir.join("env")
    }
    /// The empty read-only file masks are binds of.
    pub fn empty(&self) -> PathBuf {
        self.dir.join("empty")
    }
    /// The private copy of the `n`th copied file.
    pub fn copy(&self, n: usize) -> PathBuf {
        self.dir.join(format!("copy-{n}"))
    }
    /// The overlay work dir of the `n`th overlay whose writes persist: the session's own, since
    /// rootless podman leaves it holding a directory of another uid (the kernel's `work/work`,
    /// mode 0) that only the engine's user namespace can remove.
    pub fn overlay_work(&self, n: usize) -> PathBuf {
        self.dir.join(format!("work-{n}"))
    }
    /// The FIFO the supervisor says go on, bound at [`GO_PATH`].
    pub fn go(&self) -> PathBuf {
        self.dir.join("go")
    }
    /// The FIFO the container's init reports a signal death in (`init.rs`), bound at
    /// [`STATUS_PATH`].
    pub fn status(&self) -> PathBuf {
        self.dir.join("status")
    }
}

/// What a launch renders with, besides the spec.
#[derive(Debug, Clone)]
pub struct Plan<'a> {
    pub engine: &'a Engine,
    pub image: &'a str,
    /// The airlock binary on the host, bound read-only at [`EXEC_PATH`].
    pub exe: &'a Path,
    pub files: &'a SessionFiles,
    /// The container's name (the supervisor finds its pid by it).
    pub name: &'a str,
    /// Keep the container after it exits (`[sandbox.container] keep`); else `--rm`.
    pub keep: bool,
    /// Give the container a terminal (`-t`): the caller's stdin and stdout are one.
    pub tty: bool,
    /// Whether airlock's keeper can enter this engine's containers ([`keeper_enters`]).
    pub keeper: bool,
}

/// Whether the supervisor's keeper can join the mount namespace of `engine`'s containers: the
/// engine runs them as this user (rootless podman) or this user is root. Docker's daemon runs
/// them as root, out of reach of any other user.
pub fn keeper_enters(engine: &Engine, root: bool) -> bool {
    root || (engine.name == EngineName::Podman && engine.rootless)
}

/// Whether `spec` needs the keeper: files to hide, or a file to hold in place (a pin).
pub fn needs_keeper(spec: &SandboxSpec) -> bool {
    spec.hide
        .as_ref()
        .is_some_and(|h| !h.patterns.is_empty() || !h.known.is_empty() || !h.pins.is_empty())
}

/// What the container backend cannot honour in `spec` with `engine`: one sentence each, naming
/// the feature and the alternative. A launch with any of them is refused.
pub fn unsupported(
    spec: &SandboxSpec,
    engine: &Engine,
    engine_sockets: &[PathBuf],
    keeper: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    // podman mounts an overlay of its own (`-v LOWER:TARGET:O`, with airlock's upper and work
    // dirs when writes persist); docker has no such mount.
    let overlays = targets(spec, |op| matches!(op, MountOp::Overlay { .. }));
    if !overlays.is_empty() && engine.name != EngineName::Podman {
        out.push(format!(
            "the container backend mounts airlock's overlays with podman only, and this sandbox \
             has {} ({}); use podman ([sandbox.container] engine = \"podman\"), --backend \
             native, or give those tools mount_mode = \"readonly\" or \"readwrite\"",
            overlays.len(),
            overlays.join(", ")
        ));
    }
    // A second session's view of layers another session owns: the owner's upper above the host's
    // dir, two lower layers, which podman's overlay mount cannot stack.
    let stacked = targets(spec, |op| {
        matches!(
            op,
            MountOp::Overlay {
                upper: Upper::Stacked { .. },
                ..
            }
        )
    });
    if !stacked.is_empty() && engine.name == EngineName::Podman {
        out.push(format!(
            "the container backend cannot stack this session's view of {} over the layers \
             another session of this project owns (it is running); end that session, or use \
             --backend native",
            stacked.join(", ")
        ));
    }
    let overlay_paths = spec.mounts.iter().flat_map(|op| match op {
        MountOp::Overlay {
            lower,
            target,
            upper,
        } => {
            let mut paths = vec![lower.as_path(), target.as_path()];
            if let Upper::Persistent { dir } | Upper::Owned { dir } = upper {
                paths.push(dir.as_path());
            }
            paths
        }
        _ => Vec::new(),
    });
    let colons: Vec<String> = overlay_paths
        .filter(|p| p.to_string_lossy().contains(':'))
        .map(|p| format!("{p:?}"))
        .collect();
    if !colons.is_empty() {
        out.push(format!(
            "the container backend cannot name {} in podman's overlay volume (a colon); rename \
             it or use --backend native",
            colons.join(", ")
        ));
    }
    // The keeper runs in the container's mount namespace (`keeper.rs`); an engine whose
    // containers another user owns is out of its reach. A pin (the sanitised `.git/config`)
    // needs it too: when the host's git renames a new config over it (`git remote set-url` with
    // a token), the kernel drops the bind, and only the keeper binds it again (the escape case
    // `trust-git-config-stays-sanitised` showed the leak without it).
    if let Some(hide) = spec.hide.as_ref().filter(|_| !keeper && needs_keeper(spec)) {
        let mut what: Vec<String> = hide.patterns.clone();
        what.extend(hide.pins.iter().map(|p| p.target.display().to_string()));
        out.push(format!(
            "the container backend cannot keep {} hidden or held in place for the whole session \
             with this engine: its containers belong to another user (docker's daemon), so \
             airlock's keeper cannot enter them; use rootless podman, run airlock as root, use \
             --backend native or bwrap, or [sandbox] hide_env_files = false and no hide globs \
             in a project that is not a git repository",
            what.join(", ")
        ));
    }
    let odd = targets(spec, |op| match op {
        MountOp::Proc { target } => target != Path::new("/proc"),
        MountOp::Dev { target } => target != Path::new("/dev"),
        _ => false,
    });
    if !odd.is_empty() {
        out.push(format!(
            "the container backend has the engine's /proc and /dev only, not at {}; use \
             --backend native",
            odd.join(", ")
        ));
    }
    out.extend(unmountable_refusal(spec.mounts.iter().flat_map(paths_of)));
    out.extend(order_problems(spec));
    for socket in engine_sockets {
        for op in &spec.mounts {
            if let MountOp::Bind { source, .. } = op
                && socket.starts_with(source)
            {
                out.push(format!(
                    "{} would give the sandbox the container engine's socket {} (control of \
                     the engine is control of this machine); mount a narrower path, or use \
                     the Docker filter ([tools.docker])",
                    source.display(),
                    socket.display()
                ));
            }
        }
    }
    let multiline: Vec<&str> = spec
        .env
        .iter()
        .filter(|(k, v)| k.contains(['=', '\n', '\0']) || v.contains(['\n', '\0']))
        .map(|(k, _)| k.as_str())
        .collect();
    if !multiline.is_empty() {
        out.push(format!(
            "the container backend passes variables in an env file, one line each, and {} has a \
             newline; use --backend native",
            multiline.join(", ")
        ));
    }
    out
}

/// The refusal of the spec's resource limits when `engine` would ignore them: rootless podman on
/// a host without a pure cgroup v2 hierarchy (v1 or hybrid) sets no `--memory`, `--cpus` or
/// `--pids-limit` and only warns, so the sandbox would run unlimited.
pub fn limits_refusal(limits: &Limits, engine: &Engine, cgroup_v2: bool) -> Option<String> {
    let set: Vec<&str> = [
        ("memory", limits.memory.is_some()),
        ("cpus", limits.cpus_milli.is_some()),
        ("pids", limits.pids.is_some()),
    ]
    .iter()
    .filter(|(_, on)| *on)
    .map(|(key, _)| *key)
    .collect();
    let ignored = engine.name == EngineName::Podman && engine.rootless && !cgroup_v2;
    (ignored && !set.is_empty()).then(|| {
        format!(
            "the container backend cannot apply [sandbox.resources] {} here: rootless podman on a \
             cgroup v1 host ignores resource limits (it only warns), and this sandbox sets them; \
             use --backend native (it applies them or refuses), run podman as root or on a \
             cgroup v2 host, or remove the limits",
            set.join(", ")
        )
    })
}

/// Whether `/sys/fs/cgroup` is a cgroup v2 mount (not v1 or the hybrid layout).
pub fn cgroup_v2_host() -> bool {
    use nix::sys::statfs::{CGROUP2_SUPER_MAGIC, statfs};
    statfs("/sys/fs/cgroup").is_ok_and(|fs| fs.filesystem_type() == CGROUP2_SUPER_MAGIC)
}

fn targets(spec: &SandboxSpec, pick: impl Fn(&MountOp) -> bool) -> Vec<String> {
    spec.mounts
        .iter()
        .filter(|op| pick(op))
        .map(|op| op.target().display().to_string())
        .collect()
}

fn paths_of(op: &MountOp) -> Vec<&Path> {
    match op {
        MountOp::Bind { source, target, .. } | MountOp::CopyFile { source, target } => {
            vec![source, target]
        }
        other => vec![other.target()],
    }
}

/// The refusal of the paths among `paths` an engine's `--mount` cannot name, if any.
pub(crate) fn unmountable_refusal<'a>(paths: impl IntoIterator<Item = &'a Path>) -> Option<String> {
    let bad: Vec<String> = paths
        .into_iter()
        .filter(|p| unmountable(p))
        .map(|p| format!("{p:?}"))
        .collect();
    (!bad.is_empty()).then(|| {
        format!(
            "the container backend cannot name {} in an engine's --mount (a comma or a control \
             character); rename it or use --backend native",
            bad.join(", ")
        )
    })
}

fn unmountable(path: &Path) -> bool {
    path.to_string_lossy()
        .chars()
        .any(|c| c == ',' || c.is_control())
}

/// Engines mount in their own order (parents before children by depth), not the spec's: a spec
/// whose later mount covers an earlier one, or that mounts twice at one path, would come out
/// different, so it is refused.
fn order_problems(spec: &SandboxSpec) -> Vec<String> {
    let ops: Vec<&MountOp> = spec.mounts.iter().filter(|op| rendered(op, true)).collect();
    let mut out = Vec::new();
    for (i, earlier) in ops.iter().enumerate() {
        for later in &ops[i + 1..] {
            let (a, b) = (earlier.target(), later.target());
            if a.starts_with(b) {
                out.push(format!(
                    "the container backend mounts parents before children, and this sandbox \
                     mounts {} over {} after it; use --backend native",
                    b.display(),
                    a.display()
                ));
            }
        }
    }
    out
}

/// Whether an op becomes an engine mount: the keeper's own files (the empty file, the pinned
/// sources) only when the keeper runs.
fn rendered(op: &MountOp, keeper: bool) -> bool {
    (keeper || !op.target().starts_with(crate::hide::PINNED_DIR))
        && !matches!(
            op,
            MountOp::Symlink { .. } | MountOp::Proc { .. } | MountOp::Dev { .. }
        )
}

/// The spec's root symlinks that go into the image (target, link), in order.
pub fn image_symlinks(spec: &SandboxSpec) -> Vec<(PathBuf, PathBuf)> {
    spec.mounts
        .iter()
        .filter_map(|op| match op {
            MountOp::Symlink { target, link_to } => Some((target.clone(), link_to.clone())),
            _ => None,
        })
        .collect()
}

/// Renders `spec` as the engine's arguments (after its program). Refused (the reasons of
/// [`unsupported`], joined) when the spec asks for what the engine lacks.
pub fn render(
    spec: &SandboxSpec,
    plan: &Plan<'_>,
    sockets: &[PathBuf],
) -> Result<Vec<OsString>, String> {
    let refused = unsupported(spec, plan.engine, sockets, plan.keeper);
    if !refused.is_empty() {
        return Err(refused.join("; "));
    }
    let keeper = plan.keeper && needs_keeper(spec);
    let mut r = Args::default();
    let podman = plan.engine.name == EngineName::Podman;
    for a in plan.engine.global_args() {
        r.arg(a);
    }
    r.arg("run");
    // Never a registry: the image is airlock's own, built here, or one the user named.
    r.opt("--pull", "never");
    r.opt("--name", plan.name);
    if !plan.keep {
        r.arg("--rm");
    }
    // The image's root is read-only; the spec's own tmpfs are the only writable places. No
    // log file of the session's output in the engine's store.
    r.arg("--read-only");
    r.opt("--log-driver", "none");
    if podman {
        r.arg("--read-only-tmpfs=false");
        r.arg("--no-hosts");
        r.arg("--passwd=false");
        r.arg("--unsetenv-all");
    }
    r.opt(
        "--network",
        if spec.network == NetworkMode::Host {
            "host"
        } else {
            "none"
        },
    );
    r.opt("--cap-drop", "ALL");
    r.opt("--security-opt", "no-new-privileges");
    r.opt(
        "--security-opt",
        format!("seccomp={}", plan.files.seccomp().display()),
    );
    if podman && plan.engine.rootless {
        r.opt("--userns", "keep-id");
    }
    r.opt("--user", format!("{}:{}", spec.uid, spec.gid));
    r.opt("--hostname", &spec.hostname);
    r.opt("--workdir", spec.cwd.as_os_str());
    r.opt("--env-file", plan.files.env().as_os_str());
    if let Some(bytes) = spec.limits.memory {
        r.opt("--memory", bytes.to_string());
    }
    if let Some(milli) = spec.limits.cpus_milli {
        r.opt("--cpus", format!("{}.{:03}", milli / 1000, milli % 1000));
    }
    if let Some(pids) = spec.limits.pids {
        r.opt("--pids-limit", pids.to_string());
    }
    // The engine's sysfs names the host's devices, cgroups and kernel; the spec has none.
    r.mount("type=tmpfs,dst=/sys,ro=true,tmpfs-mode=0755");
    let (mut copies, mut works) = (0, 0);
    for op in spec.mounts.iter().filter(|op| rendered(op, keeper)) {
        r.mount_op(
            op,
            spec.limits.tmpfs_bytes,
            plan.files,
            &mut copies,
            &mut works,
        );
    }
    r.bind(&plan.files.go(), Path::new(GO_PATH), false);
    r.mount(format!(
        "type=bind,src={},dst={EXEC_PATH},ro=true",
        plan.exe.display()
    ));
    r.mount(format!(
        "type=bind,src={},dst={STATUS_PATH}",
        plan.files.status().display()
    ));
    r.arg("-i");
    if plan.tty {
        r.arg("-t");
    }
    r.arg(plan.image);
    r.arg(EXEC_PATH);
    if spec.seccomp.nested_namespaces {
        r.arg("--nested-namespaces");
    }
    if spec.network == NetworkMode::Proxy {
        // The supervisor's listener in the container's network namespace (`egress.rs`).
        r.arg(format!("--egress-port={}", crate::native::EGRESS_PORT));
    }
    // Until the supervisor's gates run: the listener, the forwards, the keeper (`launch.rs`).
    r.arg("--wait-go");
    for path in &spec.writable {
        let mut a = OsString::from("--writable=");
        a.push(path.as_os_str());
        r.arg(a);
    }
    r.arg("--");
    for a in &spec.argv {
        r.arg(a);
    }
    Ok(r.0)
}

#[derive(Default)]
struct Args(Vec<OsString>);

impl Args {
    fn arg(&mut self, a: impl Into<OsString>) {
        self.0.push(a.into());
    }

    fn opt(&mut self, f: &str, v: impl Into<OsString>) {
        self.arg(f);
        self.arg(v);
    }

    fn mount(&mut self, spec: impl Into<OsString>) {
        self.opt("--mount", spec);
    }

    fn bind(&mut self, source: &Path, target: &Path, writable: bool) {
        let ro = if writable { "" } else { ",ro=true" };
        self.mount(format!(
            "type=bind,src={},dst={}{ro}",
            source.display(),
            target.display()
        ));
    }

    fn mount_op(
        &mut self,
        op: &MountOp,
        tmpfs_size: u64,
        files: &SessionFiles,
        copies: &mut usize,
        works: &mut usize,
    ) {
        match op {
            MountOp::Bind {
                source,
                target,
                writable,
            } => self.bind(source, target, *writable),
            MountOp::Tmpfs {
                target,
                writable: true,
            } => {
                let size = if tmpfs_size > 0 {
                    format!(",tmpfs-size={tmpfs_size}")
                } else {
                    String::new()
                };
                self.mount(format!(
                    "type=tmpfs,dst={},tmpfs-mode=1777{size}",
                    target.display()
                ));
            }
            MountOp::Tmpfs {
                target,
                writable: false,
            } => self.mount(format!(
                "type=tmpfs,dst={},ro=true,tmpfs-mode=0755",
                target.display()
            )),
            MountOp::MaskFile { target } => self.bind(&files.empty(), target, false),
            MountOp::CopyFile { target, .. } => {
                self.bind(&files.copy(*copies), target, true);
                *copies += 1;
            }
            // In the image, and the engine's own (see `rendered`); overlays were refused.
            MountOp::Symlink { .. } | MountOp::Proc { .. } | MountOp::Dev { .. } => {}
            // podman's overlay volume; docker's were refused before rendering.
            MountOp::Overlay {
                lower,
                target,
                upper,
            } => {
                let mut v = format!("{}:{}:O", lower.display(), target.display());
                if let Upper::Persistent { dir } | Upper::Owned { dir } = upper {
                    v.push_str(&format!(
                        ",upperdir={},workdir={}",
                        dir.join("upper").display(),
                        files.overlay_work(*works).display()
                    ));
                    *works += 1;
                }
                self.opt("-v", v);
            }
        }
    }
}

#[cfg(test)]
mod tests;
