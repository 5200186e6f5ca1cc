//! `airlock tools list|info|check`: the tool catalog as this machine and config see it.

use std::path::PathBuf;

use airlock_config::{NetworkMode, XdgPaths};
use airlock_tools::report::{self, CheckReport, ToolInfo};
use airlock_tools::{Catalog, HostView, PathState, Settings, Status};
use anyhow::{Context, bail};
use clap::Subcommand;
use comfy_table::{ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};

#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// List the tools this machine has (NAME STATUS DESCRIPTION)
    List {
        /// Include missing and disabled tools
        #[arg(long)]
        all: bool,
        /// Print JSON (documented in docs/tools.md)
        #[arg(long)]
        json: bool,
    },
    /// Show a tool's binary, mounts with their mode, environment, shell init and config keys
    Info {
        /// The tool (see `airlock tools list --all`)
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        name: Option<String>,
        /// Every tool
        #[arg(long)]
        all: bool,
        #[arg(long)]
        json: bool,
    },
    /// Check that tools are available, their paths usable, and that each runs inside a sandbox
    /// (its version command, all in one launch); exit 1 when a named tool fails
    Check {
        /// Tools to check (default: all)
        names: Vec<String>,
        #[arg(long)]
        json: bool,
        /// Only look at the host (no sandbox is started)
        #[arg(long)]
        fast: bool,
    },
}

/// What every tools subcommand needs: the catalog, the validated settings, the host.
struct ToolsContext {
    catalog: Catalog,
    settings: Settings,
    host: HostView,
    network: NetworkMode,
    project: PathBuf,
}

fn context() -> anyhow::Result<ToolsContext> {
    let paths = XdgPaths::from_env()?;
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let cwd = airlock_config::canonicalize(&cwd).unwrap_or(cwd);
    let host = HostView::from_env(&paths.home);
    let project = airlock_sandbox::host::project_root(&cwd, &host.home);
    let loaded = airlock_config::load(&paths, &project)?;
    for warning in loaded.warnings() {
        eprintln!("airlock: warning: {warning}");
    }
    let catalog = Catalog::builtin();
    let settings = Settings::from_profile(&loaded.profile, &catalog)?;
    Ok(ToolsContext {
        catalog,
        settings,
        network: loaded.profile.network,
        host,
        project,
    })
}

pub fn run(command: ToolsCommand) -> anyhow::Result<i32> {
    let cx = context()?;
    match command {
        ToolsCommand::List { all, json } => {
            let rows = report::list(&cx.catalog, &cx.settings, &cx.host, all);
            if json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else if rows.is_empty() {
                println!(
                    "no tools found; `airlock tools list --all` shows every tool airlock knows"
                );
            } else {
                let mut table = Table::new();
                table
                    .load_preset(UTF8_FULL_CONDENSED)
                    .set_content_arrangement(ContentArrangement::Dynamic)
                    .set_header(["NAME", "STATUS", "DESCRIPTION"]);
                for row in rows {
                    table.add_row([row.name, row.status.as_str(), row.description]);
                }
                println!("{table}");
            }
            Ok(0)
        }
        ToolsCommand::Info { name, all, json } => {
            let tools: Vec<_> = match name {
                Some(name) => vec![known(&cx.catalog, &name)?],
                None => cx.catalog.iter().collect(),
            };
            let infos: Vec<ToolInfo> = tools
                .into_iter()
                .map(|t| report::info(t, &cx.settings, &cx.host, cx.network, &cx.project))
                .collect();
            if json {
                // One tool: an object; `--all`: an array.
                let text = match infos.as_slice() {
                    [one] if !all => serde_json::to_string_pretty(one)?,
                    _ => serde_json::to_string_pretty(&infos)?,
                };
                println!("{text}");
            } else {
                let blocks: Vec<String> = infos.iter().map(render_info).collect();
                print!("{}", blocks.join("\n"));
            }
            Ok(0)
        }
        ToolsCommand::Check { names, json, fast } => {
            for name in &names {
                known(&cx.catalog, name)?;
            }
            let mut report = report::check(&cx.catalog, &cx.settings, &cx.host, &names);
            if let Some(herdr) = report.tools.iter_mut().find(|t| t.name == "herdr") {
                let config = cx.settings.tool("herdr");
                herdr.notes = airlock_herdr::filter::activate::check_notes(
                    config.choice("mode", "auto"),
                    cx.host.find_binary("herdr").is_some(),
                    &cx.host.home,
                    &|k| std::env::var_os(k),
                );
            }
            if let Some(kitty) = report.tools.iter_mut().find(|t| t.name == "kitty") {
                let config = cx.settings.tool("kitty");
                kitty.notes = airlock_sockets::kitty::activate::check_notes(
                    config.choice("mode", "auto"),
                    cx.host.find_binary("kitty").is_some(),
                    &super::filters::kitty_capabilities(&cx.settings, &cx.host),
                    &|k| std::env::var_os(k),
                );
            }
            if let Some(portal) = report.tools.iter_mut().find(|t| t.name == "portal") {
                let project = std::env::current_dir().unwrap_or_default();
                portal.notes =
                    match super::filters::portal_missing(&cx.settings, &cx.host, &project) {
                        None => vec![
                            "notifications: on (a filtered session bus inside)".into(),
                            format!(
                                "xdg-dbus-proxy rules: {}",
                                airlock_sockets::portal::rules().join(" ")
                            ),
                        ],
                        Some(why) => vec![format!("notifications: off here: {why}")],
                    };
            }
            if let Some(docker) = report.tools.iter_mut().find(|t| t.name == "docker") {
                docker.notes =
                    super::filters::docker_check_notes(&cx.settings.tool("docker"), &|k| {
                        std::env::var_os(k)
                    });
            }
            if !fast {
                check_inside(&cx, &mut report)?;
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", render_check(&report));
            }
            let named_missing = !names.is_empty()
                && report.tools.iter().any(|t| {
                    t.status != Status::Available || t.inside.as_ref().is_some_and(|i| !i.ok)
                });
            Ok(i32::from(named_missing))
        }
    }
}

/// Runs every available tool's version command in one sandbox of this project (`--network none`,
/// so nothing waits on the network) and folds the results into `report`.
fn check_inside(cx: &ToolsContext, report: &mut CheckReport) -> anyhow::Result<()> {
    let Some(script) = report::inside_script(report, &cx.catalog) else {
        return Ok(());
    };
    let exe = std::env::current_exe().context("cannot find the airlock binary")?;
    let out = std::process::Command::new(exe)
        .args(["run", "--network", "none", "--", "sh", "-c", &script])
        .current_dir(&cx.project)
        .stdin(std::process::Stdio::null())
        .output()
        .context("cannot start a sandbox to check the tools in")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let failure = (!out.status.success()).then(|| {
        let last = stderr.lines().last().unwrap_or("").trim().to_owned();
        format!("the sandbox did not start: {last}")
    });
    report::apply_inside(report, &cx.catalog, &stdout, failure.as_deref());
    Ok(())
}

fn known<'a>(catalog: &'a Catalog, name: &str) -> anyhow::Result<&'a dyn airlock_tools::Tool> {
    match catalog.get(name) {
        Some(tool) => Ok(tool),
        None => bail!(
            "unknown tool {name:?}; known tools: {}",
            catalog.names().join(", ")
        ),
    }
}

fn render_info(info: &ToolInfo) -> String {
    let mut out = format!(
        "Tool: {}\nStatus: {}\nDescription: {}\n",
        info.name,
        info.status.as_str(),
        info.description
    );
    let binary = match (&info.binary, info.binaries.as_slice()) {
        (Some(path), _) => path.display().to_string(),
        (None, []) => "(none)".to_owned(),
        (None, names) => format!("(not found: {})", names.join(", ")),
    };
    out.push_str(&format!("Binary: {binary}\n\nBindings:"));
    if info.mounts.is_empty() {
        out.push_str(" (none)\n");
    } else {
        out.push('\n');
        for m in &info.mounts {
            let mode = match m.mode {
                "readonly" => "read-only",
                "readwrite" => "read-write",
                other => other,
            };
            let need = if m.required { "required" } else { "optional" };
            let state = match m.state {
                PathState::Dir | PathState::File => String::new(),
                other => format!(", {}", state_name(other)),
            };
            let target = if m.target == m.source {
                String::new()
            } else {
                format!(" -> {}", m.target)
            };
            out.push_str(&format!(
                "  {:<35} ({mode}, {need}{state}){target}\n",
                m.source
            ));
        }
    }
    out.push_str("\nEnvironment Variables:");
    if info.env.is_empty() {
        out.push_str(" (none)\n");
    } else {
        out.push('\n');
        for (k, v) in &info.env {
            out.push_str(&format!("  {k}={v}\n"));
        }
    }
    if !info.files.is_empty() {
        out.push_str("\nGenerated Files:\n");
        for f in &info.files {
            out.push_str(&format!("  {f}\n"));
        }
    }
    out.push_str("\nShell Init:");
    if info.shell_init.is_empty() {
        out.push_str(" (none)\n");
    } else {
        out.push('\n');
        for (shell, line) in &info.shell_init {
            out.push_str(&format!("  {shell}: {line}\n"));
        }
    }
    out.push_str("\nConfig Keys ([tools.");
    out.push_str(info.name);
    out.push_str("]):\n");
    for k in &info.keys {
        let values = if k.values.is_empty() {
            String::new()
        } else {
            format!(" ({})", k.values.join(" | "))
        };
        out.push_str(&format!(
            "  {} = {}{values}: {}\n",
            k.name, k.default, k.help
        ));
    }
    out
}

fn state_name(state: PathState) -> &'static str {
    match state {
        PathState::Dir | PathState::File => "present",
        PathState::Missing => "missing",
        PathState::Dangling => "dangling symlink",
        PathState::Unreadable => "unreadable",
        PathState::Other => "not a file or directory",
    }
}

fn render_check(report: &CheckReport) -> String {
    let mut out = String::from("Checking tools...\n\n");
    for t in &report.tools {
        let head = match (t.status, &t.binary) {
            (Status::Available, Some(bin)) => format!("✓ {} ({})", t.name, bin.display()),
            (Status::Available, None) => format!("✓ {} (configuration found)", t.name),
            (Status::Missing, _) => format!("✗ {} (not available)", t.name),
            (Status::Disabled, _) => format!("○ {} (disabled in config)", t.name),
        };
        out.push_str(&head);
        out.push('\n');
        for p in &t.paths {
            let line = match p.state {
                PathState::Dir | PathState::File => format!("✓ {}", p.path),
                PathState::Missing if p.required => format!("✗ {} (required, missing)", p.path),
                PathState::Missing => format!("○ {} (optional, missing)", p.path),
                other => format!("✗ {} ({})", p.path, state_name(other)),
            };
            out.push_str(&format!("    {line}\n"));
        }
        if let Some(inside) = t.inside.as_ref().filter(|i| i.ok) {
            out.push_str(&format!("    ✓ runs inside: {}\n", inside.output));
        }
        for note in &t.notes {
            out.push_str(&format!("    · {note}\n"));
        }
        for problem in &t.problems {
            out.push_str(&format!("    ! {problem}\n"));
        }
    }
    out.push_str(&format!(
        "\nSummary: {}/{} tools available\n",
        report.available, report.total
    ));
    out
}
