//! `airlock run`: locate the project, load the config, build the spec, choose the backend, hand
//! them to `airlock_sandbox::session::run` with this launch's gates (`gates.rs`), report.

use std::path::{Path, PathBuf};

use airlock_config::{NetworkMode, XdgPaths};
use airlock_egress::EgressPolicy;
use airlock_sandbox::native::{self, LaunchError, Outcome};
use airlock_sandbox::{HostFacts, RunRequest, host, session, state};
use anyhow::{Context, bail};

mod gates;

use crate::cli::{NetworkArg, RunArgs};

/// `airlock run`; `early`: an init [`early_prestart_for`] cloned before the command line was
/// parsed.
pub fn run(args: RunArgs, early: Option<native::Prestart>) -> anyhow::Result<i32> {
    if let Some(sandbox) = inside_a_sandbox()
        && !args.plan_only()
    {
        return run_here(&sandbox, &args.command);
    }
    let paths = XdgPaths::from_env()?;
    let cwd = current_dir()?;
    let project = locate_project(&paths, &cwd, args.project.as_deref())?;
    let early = early.or_else(|| early_prestart(&paths, &project, &args));
    let loaded = airlock_config::load(&paths, &project)?;
    // With --worktree the sandbox runs in the worktree, under the project's own config.
    let Some(entered) = super::worktree::enter(&paths, &project, &args)? else {
        return launch(&paths, &cwd, &project, loaded, &args, early);
    };
    let worktree = &entered.worktree;
    let inside = cwd
        .strip_prefix(&project)
        .map(|rel| worktree.path.join(rel))
        .ok()
        .filter(|dir| dir.is_dir())
        .unwrap_or_else(|| worktree.path.clone());
    let code = launch(&paths, &inside, &worktree.path, loaded, &args, None);
    if !args.plan_only() {
        super::worktree::finish(worktree, &args);
    }
    code
}

/// Plans and runs `project`'s sandbox with `loaded` as its config, from the host directory `cwd`:
/// `airlock run` after it has found the project, and `airlock scratchpad` with its workspace.
/// `early`: an init cloned before the config was read ([`early_prestart`]).
pub fn launch(
    paths: &XdgPaths,
    cwd: &Path,
    project: &Path,
    mut loaded: airlock_config::LoadedConfig,
    args: &RunArgs,
    early: Option<native::Prestart>,
) -> anyhow::Result<i32> {
    let kind = airlock_sandbox::backend::choose(
        args.backend.map(crate::cli::BackendArg::kind),
        loaded.profile.backend,
        std::env::var_os("AIRLOCK_BACKEND").as_deref(),
    );
    // A microVM takes its limits from sbx, not from a cgroup of this machine.
    let microvm = kind == Ok(airlock_config::BackendKind::Sbx);
    // A native launch clones its init before it plans, so the kernel makes the sandbox's
    // namespaces (and init builds the root ahead) meanwhile. One that cannot be made here is
    // made (or refused, saying why) at launch. Not with `[sandbox.resources]`: the limits'
    // cgroup takes controllers in the group airlock runs in, which must then hold no process
    // but airlock (it moves itself into a leaf).
    let limits = &loaded.profile.resources;
    let unlimited = limits.memory.is_none() && limits.cpus_milli.is_none() && limits.pids.is_none();
    let prestarts =
        !args.plan_only() && unlimited && kind == Ok(airlock_config::BackendKind::Native);
    let network = network_arg(args).unwrap_or(loaded.profile.network);
    // One cloned early serves only a launch it fits; dropped, it is killed (before the scope
    // below may start airlock anew).
    let early = early.filter(|p| prestarts && p.fits(network));
    if !args.plan_only() && !microvm {
        enter_scope_for_limits(paths, project, &loaded.profile.resources, args.verbose)?;
    }
    let prestart = prestarts
        .then(|| {
            early.or_else(|| {
                native::Prestart::begin(network, Some(record_path(paths, project))).ok()
            })
        })
        .flatten();
    let Plan {
        facts,
        catalog,
        settings,
        view,
        contrib,
        spec,
    } = plan(paths, cwd, project, &mut loaded, args)?;
    // The shell airlock starts reads the user's startup files: name once what they use that is
    // not inside.
    let startup_hint = match (args.command.is_empty(), spec.argv.first()) {
        (true, Some(shell)) => airlock_tools::startup::missing(&view, Path::new(shell), &|p| {
            spec.shows_home_path(&facts.home, p)
        }),
        _ => None,
    };
    // Rules are checked before anything is created, so a bad rule leaves nothing behind.
    let policy = match &spec.egress {
        Some(egress) => Some(EgressPolicy::from_settings(
            &egress.settings,
            &egress.allow_hosts,
            &egress.deny_hosts,
        )?),
        None => None,
    };
    let upstream_proxy = match spec.egress.as_ref().and_then(|e| e.upstream_proxy.as_ref()) {
        Some(url) => {
            let no_proxy = spec.egress.as_ref().map_or("", |e| e.no_proxy.as_str());
            Some(
                airlock_egress::UpstreamProxy::parse(url, no_proxy).map_err(|e| {
                    anyhow::anyhow!("{e}; fix [network] upstream_proxy or the host's HTTPS_PROXY")
                })?,
            )
        }
        None => None,
    };
    let backend = backend_for(args, &loaded.profile, &view, project, prestart)?;
    if args.render {
        // The redacted spec: what it names is shown as --print-spec shows it.
        match backend.render(&spec.redacted()) {
            Ok(steps) if steps.is_empty() => println!(
                "# the {} backend runs no command: airlock itself clones the sandbox",
                backend.kind().as_str()
            ),
            Ok(steps) => {
                for argv in steps {
                    println!("{}", shell_words(&argv));
                }
            }
            Err(e) => bail!("{e}"),
        }
        return Ok(0);
    }
    if args.print_spec {
        // Values `[sandbox.environment]` read from a file or a host variable are usually secrets.
        println!("{}", serde_json::to_string_pretty(&spec.redacted())?);
        return Ok(0);
    }
    let mut refused = backend.unsupported(&spec);
    if microvm {
        refused.extend(gates::refused_in_a_microvm(&settings));
    }
    if !refused.is_empty() {
        bail!("{}", refused.join("; "));
    }
    if args.explain {
        // The spec --print-spec prints, in words (it names variables, never their values).
        let shown = spec.redacted();
        let launch = super::explain::Launch::new(&shown, &contrib, &settings, &catalog, &facts);
        print!("{}", launch.render());
        return Ok(0);
    }
    if native::landlock::abi().is_none() && !microvm {
        warn_once_without_landlock(paths);
    }
    if args.verbose {
        eprintln!(
            "airlock: sandbox {} for {} (network {}, {} mounts, state {})",
            spec.name,
            spec.project.display(),
            spec.network.as_str(),
            spec.mounts.len(),
            spec.state_root.display()
        );
    }
    let mut gates = gates::RunGates {
        microvm,
        paths: Some(paths),
        facts: Some(&facts),
        settings: Some(&settings),
        view: Some(&view),
        contrib: Some(&contrib),
        profile: Some(&loaded.profile),
        startup_hint,
        policy,
        upstream_proxy,
        ..gates::RunGates::default()
    };
    let dirs = session::Dirs {
        sandboxes: &paths.sandboxes_dir(),
        locks: &paths.locks_dir(),
    };
    match session::run(&dirs, spec, backend.as_ref(), &mut gates, args.rm) {
        Ok(Outcome::Exited(code)) => Ok(code),
        Ok(Outcome::Signaled(signal)) => reraise(signal),
        Err(session::SessionError::Launch(LaunchError::Setup(message))) => {
            bail!("sandbox setup failed: {message}")
        }
        Err(e) => Err(e.into()),
    }
}

/// The project's record of its last root, which a prestarted init builds ahead when it may.
fn record_path(paths: &XdgPaths, project: &Path) -> PathBuf {
    native::ahead::path_in(&paths.sandboxes_dir().join(state::sandbox_name(project)))
}

/// The current directory, its links resolved.
fn current_dir() -> anyhow::Result<PathBuf> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    Ok(airlock_config::canonicalize(&cwd).unwrap_or(cwd))
}

/// [`early_prestart`] from the command line as the process got it (after [`crate::cli::shorthand`]),
/// before clap parses it (~0.6 ms here): `airlock run` in a project whose record says to build
/// ahead, with no option that names another project or backend or only plans. What the parse
/// then says is checked again by [`launch`], which drops an init that does not fit.
pub fn early_prestart_for(argv: &[std::ffi::OsString]) -> Option<native::Prestart> {
    if argv.get(1).is_none_or(|a| a != "run") {
        return None;
    }
    const UNFIT: [&str; 6] = [
        "--project",
        "--worktree",
        "--backend",
        "--print-spec",
        "--explain",
        "--render",
    ];
    let unfit =
        |arg: &std::ffi::OsString| arg.to_str().is_none() || crate::cli::is_one_of(arg, &UNFIT);
    if argv[2..].iter().take_while(|a| *a != "--").any(unfit) || inside_a_sandbox().is_some() {
        return None;
    }
    let paths = XdgPaths::from_env().ok()?;
    let project = locate_project(&paths, &current_dir().ok()?, None).ok()?;
    early_prestart(&paths, &project, &RunArgs::default())
}

/// A native launch whose project's record says to build its root ahead forks the starter as soon
/// as it knows the project: reading the config takes about as long as making the namespaces.
/// The record gives the namespaces; [`launch`] keeps the init only when the config agrees (a
/// native backend, no `[sandbox.resources]` limits, the same network namespaces). Not for
/// `--print-spec`, `--explain`, `--worktree` (another project) or another backend named on
/// the command line or in `AIRLOCK_BACKEND`.
fn early_prestart(paths: &XdgPaths, project: &Path, args: &RunArgs) -> Option<native::Prestart> {
    let native = airlock_config::BackendKind::Native;
    let flag = args.backend.map(crate::cli::BackendArg::kind);
    let env = std::env::var_os("AIRLOCK_BACKEND").filter(|v| !v.is_empty());
    let other = flag.is_some_and(|k| k != native)
        || env.is_some_and(|v| {
            v.to_str().and_then(airlock_config::BackendKind::parse) != Some(native)
        });
    if args.plan_only() || args.worktree.is_some() || other {
        return None;
    }
    native::Prestart::from_record(record_path(paths, project))
}

/// What `airlock run` plans for `project` before it creates anything: the spec `--print-spec`
/// prints and what went into it (its warnings printed). `airlock overlay` reads the same plan.
pub(crate) struct Plan {
    pub facts: HostFacts,
    pub catalog: airlock_tools::Catalog,
    pub settings: airlock_tools::Settings,
    pub view: airlock_tools::HostView,
    pub contrib: airlock_sandbox::Contributions,
    pub spec: airlock_sandbox::SandboxSpec,
}

/// Plans `project`'s sandbox from `cwd` with `loaded` (adjusted by `args`), as [`launch`] does.
pub(crate) fn plan(
    paths: &XdgPaths,
    cwd: &Path,
    project: &Path,
    loaded: &mut airlock_config::LoadedConfig,
    args: &RunArgs,
) -> anyhow::Result<Plan> {
    super::overrides::hide_env(&mut loaded.profile, args.no_hide_env);
    for warning in loaded.warnings() {
        eprintln!("airlock: warning: {warning}");
    }
    let facts = HostFacts::gather(paths, cwd, project, &loaded.profile);
    // Before anything reads the project's `.git`: what a session that died left unchecked.
    if !args.plan_only() {
        let state_root = paths.sandboxes_dir().join(state::sandbox_name(project));
        for message in airlock_tools::git::session::recover(&state_root, project) {
            eprintln!("airlock: {message}");
        }
    }
    let request = RunRequest {
        argv: args.command.clone(),
        network: network_arg(args),
        allow_hosts: args.allow_hosts.clone(),
        deny_hosts: args.deny_hosts.clone(),
        publish: args.publish.clone(),
    };
    let catalog = airlock_tools::Catalog::builtin();
    let mut settings = airlock_tools::Settings::from_profile(&loaded.profile, &catalog)?;
    super::overrides::git_mode(&mut settings, &loaded.profile, args.git_mode)?;
    let network = request.network.unwrap_or(loaded.profile.network);
    let view = airlock_tools::HostView::from_env(&facts.home);
    if args.verbose {
        for (dir, why) in view.skipped_path_entries(project) {
            eprintln!("airlock: PATH entry {dir} is not searched for host programs: {why}");
        }
    }
    let mut contrib = airlock_tools::plan_for(
        &catalog,
        &settings,
        &view,
        network,
        project,
        args.plan_only(),
    );
    airlock_tools::shell::integrate(&catalog, &settings, &view, &mut contrib);
    for warning in &contrib.warnings {
        eprintln!("airlock: warning: {warning}");
    }
    let spec = airlock_sandbox::build_with_tools(&loaded.profile, &facts, &request, &contrib)?;
    for warning in &spec.warnings {
        eprintln!("airlock: warning: {warning}");
    }
    Ok(Plan {
        facts,
        catalog,
        settings,
        view,
        contrib,
        spec,
    })
}

/// `--network`, as the config names it.
fn network_arg(args: &RunArgs) -> Option<NetworkMode> {
    args.network.map(|n| match n {
        NetworkArg::Proxy => NetworkMode::Proxy,
        NetworkArg::Host => NetworkMode::Host,
        NetworkArg::None => NetworkMode::None,
    })
}

/// The backend of this launch (see [`airlock_sandbox::backend::choose`]), bwrap, the container
/// engine and sbx resolved from PATH entries outside the project and every sandbox-writable
/// directory; native with `prestart`'s init when there is one.
fn backend_for(
    args: &RunArgs,
    profile: &airlock_config::Profile,
    view: &airlock_tools::HostView,
    project: &Path,
    prestart: Option<native::Prestart>,
) -> anyhow::Result<Box<dyn airlock_sandbox::backend::Backend>> {
    use airlock_sandbox::backend;
    let kind = backend::choose(
        args.backend.map(crate::cli::BackendArg::kind),
        profile.backend,
        std::env::var_os("AIRLOCK_BACKEND").as_deref(),
    )
    .map_err(anyhow::Error::msg)?;
    if let (airlock_config::BackendKind::Native, Some(prestart)) = (kind, prestart) {
        return Ok(Box::new(backend::Native::prestarted(prestart)));
    }
    let bwrap = match kind {
        airlock_config::BackendKind::Bwrap => view.find_host_program("bwrap", project),
        _ => None,
    };
    let container = (kind == airlock_config::BackendKind::Container).then(|| {
        backend::container::resolve(
            &profile.container,
            &|name| view.find_host_program(name, project),
            &|name| std::env::var(name).ok(),
        )
    });
    let sbx = (kind == airlock_config::BackendKind::Sbx).then(|| {
        airlock_herdr::sbx_run::resolve(
            view.find_host_program("sbx", project),
            carried_variables(profile),
        )
        .map(|b| Box::new(b) as Box<dyn backend::Backend>)
    });
    backend::select(kind, bwrap, container, sbx).map_err(anyhow::Error::msg)
}

/// The variables the config itself sets inside (`[sandbox] env_passthrough`,
/// `[sandbox.environment]`): what the sbx backend carries into its microVM.
pub(crate) fn carried_variables(
    profile: &airlock_config::Profile,
) -> std::collections::BTreeSet<String> {
    profile
        .env_passthrough
        .iter()
        .chain(profile.environment.keys())
        .cloned()
        .collect()
}

/// `argv` as one line a shell reads back the same (single quotes where needed).
fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b));
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The project and the sandbox state root `airlock run` would use from the current directory.
pub fn project_here(paths: &XdgPaths) -> anyhow::Result<(PathBuf, PathBuf)> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let cwd = airlock_config::canonicalize(&cwd).unwrap_or(cwd);
    let project = locate_project(paths, &cwd, None)?;
    let state_root = paths.sandboxes_dir().join(state::sandbox_name(&project));
    Ok((project, state_root))
}

/// `--project DIR`, else the git toplevel of the cwd, else the cwd.
fn locate_project(paths: &XdgPaths, cwd: &Path, flag: Option<&Path>) -> anyhow::Result<PathBuf> {
    let home = airlock_config::canonicalize(&paths.home).unwrap_or_else(|_| paths.home.clone());
    match flag {
        Some(dir) => airlock_config::canonicalize(dir).with_context(|| {
            format!(
                "--project {}: no such directory; pass an existing project directory",
                dir.display()
            )
        }),
        None => Ok(host::project_root(cwd, &home)),
    }
}

/// `[sandbox.resources]` limits need a cgroup holding airlock alone. When the one airlock runs in
/// is not such (a terminal's scope holds the shell too) and the user has a systemd user manager,
/// airlock runs itself again in a delegated scope of its own (`systemd-run --user --scope`), once;
/// else the launch goes on and refuses with the reason if the group cannot take the limits.
fn enter_scope_for_limits(
    paths: &XdgPaths,
    project: &Path,
    resources: &airlock_config::resources::Resources,
    verbose: bool,
) -> anyhow::Result<()> {
    use native::cgroup;
    let limits = airlock_sandbox::spec::Limits {
        tmpfs_bytes: 0,
        memory: resources.memory,
        cpus_milli: resources.cpus_milli,
        pids: resources.pids,
    };
    if std::env::var_os(cgroup::SCOPE_ENV).is_some() {
        return Ok(());
    }
    let Some(why) = cgroup::preflight(&limits) else {
        return Ok(());
    };
    let runtime = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from);
    if !cgroup::user_manager(runtime.as_deref()) {
        return Ok(());
    }
    let view = airlock_tools::HostView::from_env(&paths.home);
    let Some(systemd_run) = view.find_host_program("systemd-run", project) else {
        return Ok(());
    };
    if verbose {
        eprintln!("airlock: {why}; running again in a systemd user scope for [sandbox.resources]");
    }
    let unit = format!(
        "airlock-{}-{}.scope",
        state::sandbox_name(project),
        std::process::id()
    );
    let error = cgroup::reexec_in_scope(&systemd_run, &unit);
    bail!(
        "cannot run {} for [sandbox.resources]: {error}; remove the limits or fix systemd-run",
        systemd_run.display()
    )
}

/// Says once per user (a marker in the state dir) that writes are confined by mounts alone.
fn warn_once_without_landlock(paths: &XdgPaths) {
    let marker = paths.state_dir().join("landlock-warning-shown");
    if marker.exists() {
        return;
    }
    eprintln!(
        "airlock: warning: this kernel has no Landlock, so writes are confined by the read-only mounts \
         alone (no second layer); `airlock doctor` shows how to enable it. This warning is shown once."
    );
    let _ = std::fs::create_dir_all(paths.state_dir()).and_then(|()| std::fs::write(&marker, b""));
}

/// Dies of the workload's signal, so airlock's parent sees what the workload's would have.
fn reraise(signal: i32) -> anyhow::Result<i32> {
    // SAFETY: restoring the default action and raising are sound at any point of a single thread.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signal);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(signal);
    }
    // Signals whose default is to be ignored or to stop: report the shell convention instead.
    Ok(128 + signal)
}

/// The sandbox this process runs in, when it is one (airlock sets `AIRLOCK=1` and
/// `AIRLOCK_PROJECT` in every sandbox).
pub(crate) fn inside_a_sandbox() -> Option<String> {
    (std::env::var_os("AIRLOCK").is_some_and(|v| v == "1"))
        .then(|| std::env::var("AIRLOCK_PROJECT").ok())
        .flatten()
}

/// `airlock run` inside a sandbox: a sandbox cannot start another (no user namespaces in it), so
/// the command runs right here, in the same sandbox, and says so.
fn run_here(sandbox: &str, command: &[String]) -> anyhow::Result<i32> {
    use std::os::unix::process::CommandExt;
    let argv: Vec<String> = if command.is_empty() {
        vec![std::env::var("SHELL").unwrap_or_else(|_| "/bin/sh".into())]
    } else {
        command.to_vec()
    };
    eprintln!(
        "airlock: already inside the airlock sandbox {sandbox}; running {} here (its network and \
         mounts stay as they are)",
        argv[0]
    );
    let error = std::process::Command::new(&argv[0]).args(&argv[1..]).exec();
    let code = if error.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    };
    eprintln!("airlock: cannot run {}: {error}", argv[0]);
    Ok(code)
}
