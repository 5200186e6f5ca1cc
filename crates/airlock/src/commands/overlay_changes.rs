//! `airlock overlay diff|apply`: what this project's overlay-mode mounts kept in its sandbox,
//! and copying it onto your files (docs/tools.md, "What an overlay kept: airlock overlay").
//! The comparing and copying is `airlock_sandbox::overlay_changes`; this file parses, plans
//! the sandbox as `airlock run --print-spec` does, holds the project's idle lock, and renders.

use std::io::{self, Write as _};
use std::path::{Component, Path, PathBuf};

use airlock_config::XdgPaths;
use airlock_sandbox::overlay_changes::{
    Action, Change, ChangeKind, EntryType, Layer, LayerKind, Overlays, Scope,
};
use airlock_sandbox::state;
use anyhow::Context as _;

use crate::cli::RunArgs;

/// `airlock overlay …`.
#[derive(Debug, clap::Subcommand)]
pub enum OverlayCommand {
    /// List what this project's overlays kept: files added, modified and deleted inside the
    /// sandbox, which your own files do not have
    Diff(DiffArgs),
    /// Copy what the overlays kept onto your files and drop it from the overlays; without --yes
    /// only print what would be done
    Apply(ApplyArgs),
}

/// Which overlays and entries a command looks at.
#[derive(Debug, clap::Args)]
pub struct Selection {
    /// Only the overlays of this tool (claude, uv, …)
    #[arg(long, value_name = "NAME")]
    pub tool: Option<String>,
    /// Only entries at or below PATH: a host path or the path inside the sandbox (usually the
    /// same), relative to the current directory unless absolute
    #[arg(long, value_name = "PATH")]
    pub path: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    #[command(flatten)]
    pub selection: Selection,
    /// Print JSON: an array with one object per overlay
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub selection: Selection,
    /// Apply the changes; without it, print what would be done and change nothing
    #[arg(long, short = 'y')]
    pub yes: bool,
}

pub fn run(paths: &XdgPaths, command: &OverlayCommand) -> anyhow::Result<i32> {
    match command {
        OverlayCommand::Diff(args) => diff(paths, args),
        OverlayCommand::Apply(args) => apply(paths, args),
    }
}

const NO_OVERLAYS: &str = "no overlays: this project's sandbox has no overlay-mode mount (a tool \
    with `mount_mode = \"overlay\"`, a tool's data and cache dirs in the default `split` mode, or a \
    `[[sandbox.mounts]]` entry with `mode = \"overlay\"`), so nothing is kept there";

/// The project's overlays as `airlock run --print-spec` plans them, narrowed to `selection`.
struct Selected {
    project: PathBuf,
    overlays: Overlays,
    /// Indices into `overlays.layers`.
    chosen: Vec<usize>,
    scope: Scope,
}

impl Selected {
    fn layers(&self) -> impl Iterator<Item = &Layer> {
        self.chosen.iter().map(|&i| &self.overlays.layers[i])
    }
}

fn select(paths: &XdgPaths, selection: &Selection) -> anyhow::Result<Selected> {
    let (project, _) = super::run::project_here(paths)?;
    let mut loaded = airlock_config::load(paths, &project)?;
    // --print-spec's plan: it creates nothing on the host.
    let args = RunArgs {
        print_spec: true,
        ..RunArgs::default()
    };
    let plan = super::run::plan(paths, &project, &project, &mut loaded, &args)?;
    let overlays = Overlays::of(&plan.spec, &plan.contrib);
    let known = || match overlays.layers.len() {
        0 => "it has none".to_owned(),
        _ => {
            let names: Vec<String> = overlays.layers.iter().map(label).collect();
            format!("it has {}", names.join(", "))
        }
    };
    let mut chosen: Vec<usize> = (0..overlays.layers.len())
        .filter(|&i| {
            let tool = overlays.layers[i].tool.as_deref();
            selection.tool.as_deref().is_none_or(|t| tool == Some(t))
        })
        .collect();
    if let Some(tool) = &selection.tool
        && chosen.is_empty()
    {
        anyhow::bail!(
            "--tool {tool}: no overlay of that tool in the sandbox of {} ({}); a tool's \
             directories are overlays with `[tools.{tool}] mount_mode = \"overlay\"` (or, for its \
             data and cache directories, the default `split`), see `airlock tools info {tool}`",
            project.display(),
            known()
        );
    }
    let scope = match &selection.path {
        None => Scope::all(),
        Some(path) => {
            let path = absolute(path)?;
            let scope = Scope::under(path.clone());
            chosen.retain(|&i| scope.touches(&overlays.layers[i]));
            if chosen.is_empty() {
                anyhow::bail!(
                    "--path {}: not in any overlay of the sandbox of {} ({}); pass a path at or \
                     below one of them",
                    shown(&path),
                    project.display(),
                    known()
                );
            }
            scope
        }
    };
    Ok(Selected {
        project,
        overlays,
        chosen,
        scope,
    })
}

/// `path` made absolute against the current directory, `.` and `..` taken lexically (the path
/// may exist only inside the sandbox).
fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    let joined = if path.is_absolute() {
        path.to_owned()
    } else {
        std::env::current_dir()
            .context("cannot read the current directory")?
            .join(path)
    };
    let mut out = PathBuf::new();
    for component in joined.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    Ok(out)
}

/// `claude /home/u/.claude`, `[[sandbox.mounts]] /home/u/data`.
fn label(layer: &Layer) -> String {
    let what = layer.tool.as_deref().unwrap_or("[[sandbox.mounts]]");
    format!("{what} {}", shown(&layer.host))
}

/// A path the sandbox may have named, safe to print on a line of its own: control characters
/// escaped, newlines and tabs too (a name with a newline must not read as a second entry).
fn shown(path: &Path) -> String {
    airlock_config::printable(&path.to_string_lossy())
        .replace('\n', "\\n")
        .replace('\t', "\\t")
}

fn shown_change(change: &Change) -> String {
    let slash = if change.entry == EntryType::Dir {
        "/"
    } else {
        ""
    };
    format!("{}{slash}", shown(&change.host))
}

fn reason(change: &Change) -> Option<String> {
    change
        .refused
        .as_ref()
        .map(|r| airlock_config::printable(&r.to_string()).replace('\n', "\\n"))
}

fn diff(paths: &XdgPaths, args: &DiffArgs) -> anyhow::Result<i32> {
    let selected = select(paths, &args.selection)?;
    if args.json {
        return diff_json(&selected);
    }
    let mut out = io::stdout().lock();
    let (mut changes, mut refused, mut with_changes, mut failed) = (0, 0, 0, false);
    for layer in selected.layers() {
        let mut header = Some(format!("{} (kept in {})", label(layer), shown(&layer.kept)));
        let walked = selected
            .overlays
            .walk(layer, &selected.scope, Action::Show, &mut |c| {
                if let Some(header) = header.take() {
                    let _ = writeln!(out, "{header}");
                }
                let line = match reason(c) {
                    Some(why) => format!(
                        "  {:<9} {}  (apply leaves it: {why})",
                        c.kind.as_str(),
                        shown_change(c)
                    ),
                    None => format!("  {:<9} {}", c.kind.as_str(), shown_change(c)),
                };
                let _ = writeln!(out, "{line}");
            });
        match walked {
            Ok(summary) => {
                changes += summary.changes;
                refused += summary.refused;
                with_changes += usize::from(summary.changes > 0);
            }
            Err(e) => {
                failed = true;
                eprintln!("airlock: {}: {e}", label(layer));
            }
        }
    }
    if selected.chosen.is_empty() {
        writeln!(out, "{NO_OVERLAYS}")?;
    } else if changes == 0 {
        writeln!(
            out,
            "no changes: the {} overlay(s) of this project's sandbox hold nothing your files do not",
            selected.chosen.len()
        )?;
    } else {
        let left = match refused {
            0 => String::new(),
            n => format!(", {n} of which apply leaves where they are"),
        };
        writeln!(
            out,
            "{changes} change(s) in {with_changes} overlay(s){left}; `airlock overlay apply` \
             shows what it would do, `airlock overlay apply --yes` does it"
        )?;
    }
    Ok(i32::from(failed))
}

/// `[{"tool", "origin", "kind", "host", "inside", "kept", "changes": [...], "error"}]`, written
/// as it is found (an overlay can hold millions of entries).
fn diff_json(selected: &Selected) -> anyhow::Result<i32> {
    let mut out = io::BufWriter::new(io::stdout().lock());
    let mut failed = false;
    write!(out, "[")?;
    for (n, layer) in selected.layers().enumerate() {
        let head = serde_json::json!({
            "tool": layer.tool,
            "origin": layer.origin,
            "kind": match layer.kind { LayerKind::Dir => "dir", LayerKind::File => "file" },
            "host": layer.host.to_string_lossy(),
            "inside": layer.inside.to_string_lossy(),
            "kept": layer.kept.to_string_lossy(),
        })
        .to_string();
        let head = head.strip_suffix('}').unwrap_or(&head);
        write!(out, "{}{head},\"changes\":[", if n > 0 { "," } else { "" })?;
        let mut first = true;
        let walked = selected
            .overlays
            .walk(layer, &selected.scope, Action::Show, &mut |c| {
                let change = serde_json::json!({
                    "change": c.kind.as_str(),
                    "type": c.entry.as_str(),
                    "path": c.host.to_string_lossy(),
                    "inside": c.inside.to_string_lossy(),
                    "applies": c.refused.is_none(),
                    "reason": c.refused.as_ref().map(ToString::to_string),
                });
                let _ = write!(out, "{}{change}", if first { "" } else { "," });
                first = false;
            });
        let error = walked.err().map(|e| {
            failed = true;
            e.to_string()
        });
        write!(out, "],\"error\":{}}}", serde_json::json!(error))?;
    }
    writeln!(out, "]")?;
    out.flush()?;
    Ok(i32::from(failed))
}

fn apply(paths: &XdgPaths, args: &ApplyArgs) -> anyhow::Result<i32> {
    let selected = select(paths, &args.selection)?;
    let idle = state::lock_idle(
        &paths.sandboxes_dir(),
        &paths.locks_dir(),
        &selected.project,
    )?;
    let running = idle.is_none();
    if running && args.yes {
        anyhow::bail!(
            "a session of {} is running: its sandbox can still write the overlays, so nothing was \
             applied; end it (exit the agent or shell) and run `airlock overlay apply --yes` again",
            selected.project.display()
        );
    }
    // Held until the end while applying: no session starts (it waits) while the host and the
    // uppers change. A dry run changes nothing and does not keep sessions waiting.
    let _idle = idle.filter(|_| args.yes);
    let action = if args.yes {
        Action::Apply
    } else {
        Action::Show
    };
    let mut out = io::stdout().lock();
    let (mut changes, mut refused, mut failed) = (0, 0, false);
    for layer in selected.layers() {
        let mut header = Some(format!("{}:", label(layer)));
        let walked = selected
            .overlays
            .walk(layer, &selected.scope, action, &mut |c| {
                if let Some(header) = header.take() {
                    let _ = writeln!(out, "{header}");
                }
                let _ = writeln!(out, "  {}", apply_line(c, args.yes));
            });
        match walked {
            Ok(summary) => {
                changes += summary.changes;
                refused += summary.refused;
            }
            Err(e) => {
                failed = true;
                eprintln!("airlock: {}: {e}", label(layer));
            }
        }
    }
    let applied = changes - refused;
    let left = match refused {
        0 => String::new(),
        n => format!(
            "; {n} left in the overlay{} (the sandbox still sees them; the lines above say why)",
            if n == 1 { "" } else { "s" }
        ),
    };
    if selected.chosen.is_empty() {
        writeln!(out, "{NO_OVERLAYS}")?;
    } else if changes == 0 {
        writeln!(
            out,
            "nothing to apply: the overlays hold nothing your files do not"
        )?;
    } else if args.yes {
        writeln!(out, "applied {applied} change(s){left}")?;
    } else {
        writeln!(
            out,
            "dry run: {applied} change(s) would be applied{left}; nothing was changed. Run \
             `airlock overlay apply --yes` with the same options to apply them"
        )?;
        if running {
            writeln!(
                out,
                "a session of this project is running: --yes is refused until it ends"
            )?;
        }
    }
    Ok(i32::from(failed || (args.yes && refused > 0)))
}

/// `would add /path`, `updated /path`, `left /path: why`.
fn apply_line(change: &Change, done: bool) -> String {
    let path = shown_change(change);
    if let Some(why) = reason(change) {
        let verb = if done { "left" } else { "would leave" };
        return format!("{verb} {path}: {why}");
    }
    let verb = match (change.kind, done) {
        (ChangeKind::Added, false) => "would add",
        (ChangeKind::Modified, false) => "would update",
        (ChangeKind::Deleted, false) => "would delete",
        (ChangeKind::Added, true) => "added",
        (ChangeKind::Modified, true) => "updated",
        (ChangeKind::Deleted, true) => "deleted",
    };
    format!("{verb} {path}")
}
