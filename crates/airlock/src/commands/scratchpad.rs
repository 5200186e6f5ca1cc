//! `airlock scratchpad [NAME] [-- CMD…]`, `scratchpad list [--json]`, `scratchpad rm NAME|--all`:
//! empty managed workspaces for throwaway agent work (`airlock_sandbox::state::scratchpads`).
//! No project config is ever loaded from one: only the global config and its includes.

use std::time::SystemTime;

use airlock_config::XdgPaths;
use airlock_sandbox::state::scratchpads::{self, DEFAULT_NAME, ScratchpadInfo};
use anyhow::bail;
use comfy_table::{ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};

use crate::cli::{NetworkArg, RunArgs};

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ScratchpadArgs {
    #[command(subcommand)]
    pub action: Option<ScratchpadCommand>,
    #[command(flatten)]
    pub open: OpenArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum ScratchpadCommand {
    /// List the scratchpads: name, status, size, last use, workspace
    List {
        /// Print a JSON array with the fields name, path, sandbox, status, size_bytes,
        /// last_used_unix and live_sessions
        #[arg(long)]
        json: bool,
    },
    /// Remove a scratchpad's workspace and sandbox state (never one in use)
    Rm {
        /// The scratchpad to remove
        #[arg(
            value_name = "NAME",
            required_unless_present = "all",
            conflicts_with = "all"
        )]
        name: Option<String>,
        /// Remove every scratchpad (those in use are skipped and named)
        #[arg(long)]
        all: bool,
    },
}

#[derive(Debug, clap::Args)]
pub struct OpenArgs {
    /// The scratchpad (made on first use; letters, digits, . _ -)
    #[arg(value_name = "NAME", default_value = DEFAULT_NAME)]
    pub name: String,
    /// Network access, as for `airlock run`: proxy, none or host
    #[arg(long, value_enum, value_name = "MODE")]
    pub network: Option<NetworkArg>,
    /// Also allow HOST through the egress proxy (repeatable)
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_hosts: Vec<String>,
    /// Deny HOST through the egress proxy (repeatable)
    #[arg(long = "deny-host", value_name = "HOST")]
    pub deny_hosts: Vec<String>,
    /// Remove the scratchpad (workspace and state) when the command ends
    #[arg(long)]
    pub rm: bool,
    /// Print the sandbox spec as JSON and exit
    #[arg(long)]
    pub print_spec: bool,
    /// Print what the sandbox would be and exit
    #[arg(long, conflicts_with = "print_spec")]
    pub explain: bool,
    /// Say what airlock does on stderr
    #[arg(short, long)]
    pub verbose: bool,
    /// The command (default: your $SHELL), after `--`
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

pub fn run(paths: &XdgPaths, args: ScratchpadArgs) -> anyhow::Result<i32> {
    match args.action {
        Some(ScratchpadCommand::List { json }) => list(paths, json).map(|()| 0),
        Some(ScratchpadCommand::Rm { name, all }) => remove(paths, name.as_deref(), all),
        None => open(paths, args.open),
    }
}

/// Runs the sandbox in the scratchpad `name`, made on first use.
fn open(paths: &XdgPaths, args: OpenArgs) -> anyhow::Result<i32> {
    if super::run::inside_a_sandbox().is_some() {
        bail!("airlock scratchpad: already inside a sandbox; start scratchpads from a host shell");
    }
    scratchpads::check_name(&args.name)?;
    let plan_only = args.print_spec || args.explain;
    let workspace = match plan_only {
        // Planning makes nothing: the path it would have.
        true => paths.scratchpads_dir().join(&args.name),
        false => scratchpads::open(&paths.scratchpads_dir(), &args.name)?,
    };
    let loaded = airlock_config::load_global(paths, &workspace)?;
    let run = RunArgs {
        network: args.network,
        allow_hosts: args.allow_hosts,
        deny_hosts: args.deny_hosts,
        rm: args.rm,
        print_spec: args.print_spec,
        explain: args.explain,
        verbose: args.verbose,
        command: args.command,
        ..RunArgs::default()
    };
    let code = super::run::launch(paths, &workspace, &workspace, loaded, &run, None)?;
    if args.rm && !plan_only {
        match scratchpads::remove(
            &paths.scratchpads_dir(),
            &paths.sandboxes_dir(),
            &paths.locks_dir(),
            &args.name,
        ) {
            Ok(()) if args.verbose => eprintln!("airlock: removed scratchpad {}", args.name),
            Ok(()) => {}
            Err(e) => eprintln!("airlock: scratchpad {} kept: {e}", args.name),
        }
    }
    Ok(code)
}

fn list(paths: &XdgPaths, json: bool) -> anyhow::Result<()> {
    let infos = scratchpads::list(&paths.scratchpads_dir(), &paths.sandboxes_dir(), true)?;
    if json {
        let rows: Vec<serde_json::Value> = infos
            .iter()
            .map(|info| {
                let mut row = serde_json::to_value(info)?;
                if let Some(fields) = row.as_object_mut() {
                    fields.insert("status".into(), status(info).into());
                }
                Ok(row)
            })
            .collect::<serde_json::Result<_>>()?;
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else if infos.is_empty() {
        println!(
            "no scratchpads in {}; `airlock scratchpad [NAME]` makes one",
            paths.scratchpads_dir().display()
        );
    } else {
        println!("{}", table(&infos, SystemTime::now()));
    }
    Ok(())
}

fn status(info: &ScratchpadInfo) -> &'static str {
    match info.live_sessions {
        0 => "idle",
        _ => "running",
    }
}

fn table(infos: &[ScratchpadInfo], now: SystemTime) -> Table {
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(["NAME", "STATUS", "SIZE", "LAST USED", "WORKSPACE"]);
    for info in infos {
        table.add_row([
            info.name.clone(),
            status(info).to_owned(),
            super::sandboxes::format_size(info.size_bytes),
            super::sandboxes::format_age(info.last_used, now),
            info.path.display().to_string(),
        ]);
    }
    table
}

/// `scratchpad rm NAME` or `--all`; with `--all`, one in use is skipped and named (exit 1).
fn remove(paths: &XdgPaths, name: Option<&str>, all: bool) -> anyhow::Result<i32> {
    let remove_one = |name: &str| {
        scratchpads::remove(
            &paths.scratchpads_dir(),
            &paths.sandboxes_dir(),
            &paths.locks_dir(),
            name,
        )
    };
    if let Some(name) = name {
        remove_one(name)?;
        println!("removed scratchpad {name}");
        return Ok(0);
    }
    debug_assert!(all);
    let mut failed = 0;
    let infos = scratchpads::list(&paths.scratchpads_dir(), &paths.sandboxes_dir(), false)?;
    for info in &infos {
        match remove_one(&info.name) {
            Ok(()) => println!("removed scratchpad {}", info.name),
            Err(e) => {
                eprintln!("airlock: {e}");
                failed += 1;
            }
        }
    }
    if infos.is_empty() {
        println!("no scratchpads to remove");
    }
    Ok(i32::from(failed > 0))
}
