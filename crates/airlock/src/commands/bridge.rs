//! `airlock bridge install | status | uninstall | daemon`, and the multi-call shim dispatch.

use std::path::PathBuf;

use airlock_bridge::BridgePaths;
use airlock_bridge::daemon::{self, DaemonOptions};
use airlock_bridge::install::{self, InstallContext};
use airlock_bridge::paths::PREFERRED_PORT;
use airlock_bridge::shims;
use airlock_bridge::supervisor::SupervisorKind;
use airlock_config::XdgPaths;
use anyhow::Context as _;
use clap::{Args, Subcommand, ValueEnum};

#[derive(Debug, Subcommand)]
pub enum BridgeCommand {
    /// Generate the token, write the supervisor unit (systemd user unit / LaunchAgent), start the daemon
    Install(SupervisorArgs),
    /// Show install state, port, socket, daemon liveness and the supervisor's status
    Status {
        /// Print as JSON
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        supervisor: SupervisorArgs,
    },
    /// Stop the daemon, remove the unit and the state dir (token included)
    Uninstall(SupervisorArgs),
    /// Run the bridge daemon in the foreground (what the supervisor runs; by hand after
    /// `install --supervisor none`)
    Daemon(DaemonArgs),
}

#[derive(Debug, Args)]
pub struct SupervisorArgs {
    /// The supervisor: systemd (Linux default), launchd (macOS default), or none (write the state
    /// only; run `airlock bridge daemon` yourself)
    #[arg(long, value_enum, value_name = "KIND")]
    pub supervisor: Option<SupervisorArg>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum SupervisorArg {
    Systemd,
    Launchd,
    None,
}

#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// The bridge state dir (default ~/.local/state/airlock/bridge)
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// The global config file with [bridge.commands] (default ~/.config/airlock/config.toml)
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The TCP port tried first (an ephemeral one when it is busy)
    #[arg(long, value_name = "PORT", default_value_t = PREFERRED_PORT)]
    pub port: u16,
}

/// If this process was started under a shim name, runs that shim and returns its exit code.
pub fn dispatch_shim() -> Option<i32> {
    let mut args = std::env::args_os();
    let argv0 = args.next()?;
    let shim = shims::shim_for(&argv0)?;
    Some(shims::run(&shim, args.collect()))
}

pub fn run(command: BridgeCommand) -> anyhow::Result<i32> {
    let paths = XdgPaths::from_env()?;
    match command {
        BridgeCommand::Install(args) => {
            refuse_root("install")?;
            let ctx = context(&paths, args.supervisor)?;
            let report = install::install(&ctx)?;
            for line in &report.lines {
                println!("bridge: {line}");
            }
            for warning in &report.warnings {
                eprintln!("warning: {warning}");
            }
            println!("bridge: installed");
            Ok(0)
        }
        BridgeCommand::Uninstall(args) => {
            refuse_root("uninstall")?;
            let ctx = context(&paths, args.supervisor)?;
            let report = install::uninstall(&ctx)?;
            for line in &report.lines {
                println!("bridge: {line}");
            }
            for warning in &report.warnings {
                eprintln!("warning: {warning}");
            }
            if report.state_left {
                println!("bridge: daemon removed; state dir left behind");
            } else {
                println!("bridge: uninstalled");
            }
            Ok(0)
        }
        BridgeCommand::Status { json, supervisor } => {
            let ctx = context(&paths, supervisor.supervisor)?;
            let status = airlock_bridge::status::status(&ctx);
            if json {
                println!("{}", serde_json::to_string_pretty(&status)?);
            } else {
                print_status(&status);
            }
            Ok(0)
        }
        BridgeCommand::Daemon(args) => {
            let bridge = match args.state_dir {
                Some(dir) => BridgePaths::at(dir),
                None => BridgePaths::from_xdg(&paths),
            };
            let config = args.config.unwrap_or_else(|| paths.config_file());
            let options = DaemonOptions {
                preferred_port: args.port,
            };
            daemon::run(&bridge, &config, &options, &|line| {
                eprintln!("airlock bridge daemon: {line}")
            })?;
            Ok(0)
        }
    }
}

fn refuse_root(verb: &'static str) -> anyhow::Result<()> {
    let euid = nix::unistd::geteuid().as_raw();
    install::ensure_user_context(verb, euid, std::env::var("SUDO_USER").ok())?;
    Ok(())
}

fn context(paths: &XdgPaths, supervisor: Option<SupervisorArg>) -> anyhow::Result<InstallContext> {
    let exe = std::env::current_exe().context("cannot locate the airlock binary for the unit")?;
    let exe = airlock_config::canonicalize(&exe).unwrap_or(exe);
    Ok(InstallContext {
        bridge: BridgePaths::from_xdg(paths),
        supervisor: match supervisor {
            None => SupervisorKind::native(),
            Some(SupervisorArg::Systemd) => SupervisorKind::Systemd,
            Some(SupervisorArg::Launchd) => SupervisorKind::Launchd,
            Some(SupervisorArg::None) => SupervisorKind::None,
        },
        home: paths.home.clone(),
        config_home: paths.config_home.clone(),
        config_file: paths.config_file(),
        exe,
        path_env: std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()),
        uid: nix::unistd::getuid().as_raw(),
    })
}

fn print_status(s: &airlock_bridge::status::BridgeStatus) {
    let yes = |b: bool| if b { "yes" } else { "no" };
    println!("state dir   {}", s.state_dir.display());
    println!(
        "token       {}",
        if s.token_present {
            "present"
        } else {
            "missing (run `airlock bridge install`)"
        }
    );
    println!(
        "port        {}",
        s.port.map_or("none".to_owned(), |p| p.to_string())
    );
    println!(
        "socket      {} (present={})",
        s.socket.display(),
        s.socket_present
    );
    println!(
        "daemon      {}{}",
        if s.daemon_responding {
            "responding"
        } else {
            "not responding"
        },
        s.pid.map_or(String::new(), |p| format!(" (pid file: {p})"))
    );
    let sup = &s.supervisor;
    match &sup.unit {
        Some(unit) => println!(
            "supervisor  {} {}: installed={} running={}",
            sup.kind,
            unit.display(),
            yes(sup.installed),
            sup.running.map_or("unknown", yes)
        ),
        None => println!("supervisor  none"),
    }
    if let Some(detail) = &sup.detail {
        for line in detail.lines() {
            println!("            {line}");
        }
    }
}
