//! The `airlock` binary: parse the command line, call the library, render, map to an exit code.

mod cli;
mod commands;

use clap::Parser;

use cli::{Cli, Command, RunArgs, SandboxesCommand};

/// Exit code for airlock's own failures (the workload's codes pass through unchanged).
const EXIT_AIRLOCK_FAILED: i32 = 125;

fn main() {
    airlock_egress::nss::hosts_from_files_and_dns();
    // Multi-call: started as a shim name (xdg-open, code, git-credential-airlock, ...), act as it.
    let mut args = std::env::args_os();
    let argv0 = args.next();
    if argv0
        .as_ref()
        .is_some_and(|argv0| airlock_tools::git::hint::is_wrapper(argv0))
    {
        std::process::exit(airlock_tools::git::hint::run(args.collect()));
    }
    // Inside a sandbox the bwrap backend built: the stage that becomes its init.
    if argv0.as_ref().is_some_and(|a| {
        std::path::Path::new(a).file_name()
            == Some(std::ffi::OsStr::new(
                airlock_sandbox::native::stage::STAGE_NAME,
            ))
    }) {
        airlock_sandbox::native::stage::main();
    }
    // Inside a container the container backend started: the exec wrapper (Landlock, seccomp).
    if argv0.as_ref().is_some_and(|a| {
        std::path::Path::new(a).file_name()
            == Some(std::ffi::OsStr::new(
                airlock_sandbox::backend::container::exec::EXEC_NAME,
            ))
    }) {
        airlock_sandbox::backend::container::exec::main();
    }
    if let Some(code) = commands::bridge::dispatch_shim() {
        std::process::exit(code);
    }
    let argv = cli::shorthand(std::env::args_os().collect());
    // `airlock run`: the sandbox's init may start on its root while the command line is parsed.
    let early = commands::run::early_prestart_for(&argv);
    if let Some(args) = cli::parse_run(&argv) {
        exit_with(commands::run::run(args, early));
    }
    let cli = Cli::parse_from(argv);
    let early = match &cli.command {
        Some(Command::Run(_)) => early,
        _ => None,
    };
    let result = match cli.command {
        None => commands::run::run(RunArgs::default(), None),
        Some(Command::Run(args)) => commands::run::run(args, early),
        Some(Command::External(argv)) => commands::run::run(
            RunArgs {
                command: argv,
                ..RunArgs::default()
            },
            None,
        ),
        Some(Command::Sandboxes(SandboxesCommand::List(args))) => paths()
            .and_then(|p| commands::sandboxes::list(&p, &args))
            .map(|()| 0),
        Some(Command::Sandboxes(SandboxesCommand::Prune(args))) => paths()
            .and_then(|p| commands::sandboxes::prune(&p, &args))
            .map(|()| 0),
        Some(Command::Trust(command)) => commands::trust::run(command),
        Some(Command::Config(command)) => commands::config::run(command),
        Some(Command::Bridge(command)) => commands::bridge::run(command),
        Some(Command::Herdr(command)) => commands::herdr::run(command),
        Some(Command::Forward(args)) => paths().and_then(|p| commands::forward::run(&p, &args)),
        Some(Command::Sessions(args)) => paths().and_then(|p| commands::sessions::run(&p, &args)),
        Some(Command::Logs(command)) => paths().and_then(|p| commands::logs::run(&p, &command)),
        Some(Command::Tools(command)) => commands::tools::run(command),
        Some(Command::AgentWrappers(command)) => commands::agents::agent_wrappers(command),
        Some(Command::RunAgent(args)) => commands::agents::run_agent(args),
        Some(Command::Completion { shell }) => commands::completion::run(shell),
        Some(Command::Scratchpad(args)) => {
            paths().and_then(|p| commands::scratchpad::run(&p, args))
        }
        Some(Command::Overlay(command)) => {
            paths().and_then(|p| commands::overlay_changes::run(&p, &command))
        }
        Some(Command::OverlayHandoff(args)) => commands::overlay::handoff(args),
        Some(Command::Network(cli::NetworkCommand::Explain { host })) => {
            commands::config::explain_host(&host)
        }
        Some(Command::Network(cli::NetworkCommand::Monitor(args))) => {
            paths().and_then(|p| commands::monitor::run(&p, &args))
        }
        Some(Command::Network(cli::NetworkCommand::Suggest(args))) => {
            paths().and_then(|p| commands::suggest::run(&p, &args))
        }
        Some(Command::Doctor(args)) => {
            let rows = commands::config::doctor_rows();
            commands::doctor::doctor(&args, rows)
        }
    };
    exit_with(result)
}

/// Ends the process: the command's exit code, or airlock's own failure, said on stderr.
fn exit_with(result: anyhow::Result<i32>) -> ! {
    match result {
        Ok(code) => std::process::exit(code),
        Err(error) => {
            eprintln!("airlock: {error:#}");
            std::process::exit(EXIT_AIRLOCK_FAILED);
        }
    }
}

fn paths() -> anyhow::Result<airlock_config::XdgPaths> {
    Ok(airlock_config::XdgPaths::from_env()?)
}
