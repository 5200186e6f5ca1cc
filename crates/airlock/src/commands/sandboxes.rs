//! `airlock sandboxes list|prune`: the per-project state roots under `$XDG_DATA_HOME/airlock/sandboxes`.

use std::path::Path;
use std::time::{Duration, SystemTime};

use airlock_config::XdgPaths;
use airlock_sandbox::state::{self, PruneAction, PruneOptions, PruneResult, SandboxInfo};
use anyhow::bail;
use comfy_table::{ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};

#[derive(clap::Args, Debug)]
pub struct ListArgs {
    /// Print a JSON array with the fields name, path, project, project_exists, size_bytes,
    /// last_used_unix and live_sessions
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct PruneArgs {
    /// Select sandboxes whose project directory is gone (or that record no project)
    #[arg(long)]
    pub orphaned: bool,
    /// Select sandboxes not used for longer than DUR, e.g. 30d or 12h (with --orphaned, both must hold)
    #[arg(long, value_name = "DUR", value_parser = parse_age)]
    pub older_than: Option<Duration>,
    /// Show what would be removed, remove nothing
    #[arg(long)]
    pub dry_run: bool,
}

fn parse_age(value: &str) -> Result<Duration, String> {
    humantime::parse_duration(value).map_err(|err| {
        format!("{value:?} is not a duration ({err}); give one such as 30d, 12h or 2weeks")
    })
}

/// `airlock sandboxes list [--json]`.
pub fn list(paths: &XdgPaths, args: &ListArgs) -> anyhow::Result<()> {
    let sandboxes_dir = paths.sandboxes_dir();
    let infos = state::list(&sandboxes_dir, &paths.locks_dir())?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&infos)?);
    } else if infos.is_empty() {
        println!("no sandboxes in {}", sandboxes_dir.display());
    } else {
        println!("{}", list_table(&infos, SystemTime::now()));
    }
    Ok(())
}

fn list_table(infos: &[SandboxInfo], now: SystemTime) -> Table {
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(["NAME", "PROJECT", "SIZE", "LAST USED", "SESSIONS"]);
    for info in infos {
        table.add_row([
            info.name.clone(),
            project_cell(info.project.as_deref(), info.project_exists),
            format_size(info.size_bytes),
            format_age(info.last_used, now),
            info.live_sessions.to_string(),
        ]);
    }
    table
}

fn project_cell(project: Option<&Path>, exists: bool) -> String {
    match project {
        Some(path) if exists => path.display().to_string(),
        Some(path) => format!("{} (missing)", path.display()),
        None => "(unknown: no sandbox.json)".to_string(),
    }
}

/// `airlock sandboxes prune (--orphaned | --older-than DUR)... [--dry-run]`.
pub fn prune(paths: &XdgPaths, args: &PruneArgs) -> anyhow::Result<()> {
    let options = PruneOptions {
        orphaned: args.orphaned,
        older_than: args.older_than,
        dry_run: args.dry_run,
    };
    if !options.has_filter() {
        bail!(
            "prune needs a filter: pass --orphaned and/or --older-than DUR (e.g. --older-than 30d); \
             add --dry-run to see what would go"
        );
    }
    let results = state::prune(&paths.sandboxes_dir(), &paths.locks_dir(), &options)?;
    for result in &results {
        println!("{}", prune_line(result));
    }
    println!("{}", prune_summary(&results, options.dry_run));
    let failed = results
        .iter()
        .filter(|r| matches!(r.action, PruneAction::Failed(_)))
        .count();
    if failed > 0 {
        bail!("{failed} sandbox(es) could not be removed; see the messages above");
    }
    Ok(())
}

fn prune_line(result: &PruneResult) -> String {
    let (name, size) = (&result.name, format_size(result.size_bytes));
    match &result.action {
        PruneAction::Removed => format!("removed {name} ({size})"),
        PruneAction::WouldRemove => format!("would remove {name} ({size})"),
        PruneAction::SkippedInUse => format!("skipped {name}: in use"),
        PruneAction::Failed(error) => format!("failed to remove {name}: {error}"),
    }
}

fn prune_summary(results: &[PruneResult], dry_run: bool) -> String {
    let mut count = 0;
    let mut bytes = 0u64;
    let mut in_use = 0;
    let mut failed = 0;
    for result in results {
        match result.action {
            PruneAction::Removed | PruneAction::WouldRemove => {
                count += 1;
                bytes = bytes.saturating_add(result.size_bytes);
            }
            PruneAction::SkippedInUse => in_use += 1,
            PruneAction::Failed(_) => failed += 1,
        }
    }
    if results.is_empty() {
        return "no sandboxes matched".to_string();
    }
    let plural = |n: usize| if n == 1 { "sandbox" } else { "sandboxes" };
    let mut summary = if dry_run {
        format!(
            "would remove {count} {}, freeing {}",
            plural(count),
            format_size(bytes)
        )
    } else {
        format!(
            "removed {count} {}, freed {}",
            plural(count),
            format_size(bytes)
        )
    };
    if in_use > 0 {
        summary.push_str(&format!("; skipped {in_use} in use"));
    }
    if failed > 0 {
        summary.push_str(&format!("; {failed} failed"));
    }
    summary
}

/// Binary units with one decimal: `512 B`, `12.3 MiB`.
fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    // 1023.96 KiB would print as "1024.0 KiB"; move up a unit instead.
    if value >= 1023.95 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// `just now`, `5 minutes ago`, `3 days ago`, `2 months ago`; `never` without a time. A time in the
/// future (clock changes) reads as `just now`.
fn format_age(time: Option<SystemTime>, now: SystemTime) -> String {
    let Some(time) = time else {
        return "never".to_string();
    };
    let secs = now.duration_since(time).map_or(0, |d| d.as_secs());
    let (n, unit) = match secs {
        0..60 => return "just now".to_string(),
        60..3_600 => (secs / 60, "minute"),
        3_600..86_400 => (secs / 3_600, "hour"),
        86_400..5_184_000 => (secs / 86_400, "day"), // up to 60 days
        5_184_000..63_072_000 => (secs / 2_592_000, "month"), // up to 2 years
        _ => (secs / 31_536_000, "year"),
    };
    let s = if n == 1 { "" } else { "s" };
    format!("{n} {unit}{s} ago")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::path::PathBuf;

    #[test]
    fn sizes() {
        assert_eq!(format_size(0), "0 B");
        assert_eq!(format_size(1023), "1023 B");
        assert_eq!(format_size(1024), "1.0 KiB");
        assert_eq!(format_size(1536), "1.5 KiB");
        assert_eq!(format_size(12_900_000), "12.3 MiB");
        assert_eq!(format_size(1024 * 1024 - 1), "1.0 MiB");
        assert_eq!(format_size(5 * 1024 * 1024 * 1024), "5.0 GiB");
        assert_eq!(format_size(u64::MAX), "16.0 EiB");
    }

    #[test]
    fn ages() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        let ago = |secs: u64| format_age(Some(now - Duration::from_secs(secs)), now);
        assert_eq!(format_age(None, now), "never");
        assert_eq!(ago(0), "just now");
        assert_eq!(ago(59), "just now");
        assert_eq!(ago(60), "1 minute ago");
        assert_eq!(ago(125), "2 minutes ago");
        assert_eq!(ago(3_600), "1 hour ago");
        assert_eq!(ago(86_399), "23 hours ago");
        assert_eq!(ago(86_400), "1 day ago");
        assert_eq!(ago(3 * 86_400 + 5), "3 days ago");
        assert_eq!(ago(59 * 86_400), "59 days ago");
        assert_eq!(ago(90 * 86_400), "3 months ago");
        assert_eq!(ago(800 * 86_400), "2 years ago");
        assert_eq!(
            format_age(Some(now + Duration::from_secs(30)), now),
            "just now"
        );
    }

    #[derive(Debug, clap::Parser)]
    struct PruneCli {
        #[command(flatten)]
        args: PruneArgs,
    }

    #[test]
    fn older_than_parses_humantime_and_explains_bad_values() {
        let cli = PruneCli::try_parse_from(["prune", "--older-than", "30d", "--orphaned"]).unwrap();
        assert_eq!(cli.args.older_than, Some(Duration::from_secs(30 * 86_400)));
        assert!(cli.args.orphaned && !cli.args.dry_run);
        let cli = PruneCli::try_parse_from(["prune", "--older-than", "12h"]).unwrap();
        assert_eq!(cli.args.older_than, Some(Duration::from_secs(12 * 3_600)));
        let err = PruneCli::try_parse_from(["prune", "--older-than", "3x"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"3x\"") && err.contains("30d"), "{err}");
    }

    #[test]
    fn table_rows() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        let infos = [
            SandboxInfo {
                name: "app-0123abcd".into(),
                path: PathBuf::from("/d/app-0123abcd"),
                project: Some(PathBuf::from("/src/app")),
                project_exists: true,
                size_bytes: 12_900_000,
                last_used: Some(now - Duration::from_secs(3 * 86_400)),
                live_sessions: 2,
            },
            SandboxInfo {
                name: "gone-89abcdef".into(),
                path: PathBuf::from("/d/gone-89abcdef"),
                project: Some(PathBuf::from("/src/gone")),
                project_exists: false,
                size_bytes: 512,
                last_used: None,
                live_sessions: 0,
            },
            SandboxInfo {
                name: "stray".into(),
                path: PathBuf::from("/d/stray"),
                project: None,
                project_exists: false,
                size_bytes: 0,
                last_used: None,
                live_sessions: 0,
            },
        ];
        let table = list_table(&infos, now);
        let header: Vec<String> = table
            .header()
            .unwrap()
            .cell_iter()
            .map(|c| c.content())
            .collect();
        assert_eq!(header, ["NAME", "PROJECT", "SIZE", "LAST USED", "SESSIONS"]);
        let rows: Vec<Vec<String>> = table
            .row_iter()
            .map(|r| r.cell_iter().map(|c| c.content()).collect())
            .collect();
        assert_eq!(
            rows,
            [
                ["app-0123abcd", "/src/app", "12.3 MiB", "3 days ago", "2"],
                [
                    "gone-89abcdef",
                    "/src/gone (missing)",
                    "512 B",
                    "never",
                    "0"
                ],
                ["stray", "(unknown: no sandbox.json)", "0 B", "never", "0"],
            ]
        );
    }

    fn result(name: &str, size_bytes: u64, action: PruneAction) -> PruneResult {
        PruneResult {
            name: name.into(),
            path: PathBuf::from("/d").join(name),
            size_bytes,
            action,
        }
    }

    #[test]
    fn prune_lines_and_summary() {
        let results = [
            result("a-1", 2048, PruneAction::Removed),
            result("b-2", 1024 * 1024, PruneAction::Removed),
            result("c-3", 10, PruneAction::SkippedInUse),
            result(
                "d-4",
                10,
                PruneAction::Failed("cannot remove /d/d-4: busy".into()),
            ),
        ];
        let lines: Vec<String> = results.iter().map(prune_line).collect();
        assert_eq!(
            lines,
            [
                "removed a-1 (2.0 KiB)",
                "removed b-2 (1.0 MiB)",
                "skipped c-3: in use",
                "failed to remove d-4: cannot remove /d/d-4: busy",
            ]
        );
        assert_eq!(
            prune_summary(&results, false),
            "removed 2 sandboxes, freed 1.0 MiB; skipped 1 in use; 1 failed"
        );
        let dry = [result("a-1", 2048, PruneAction::WouldRemove)];
        assert_eq!(prune_line(&dry[0]), "would remove a-1 (2.0 KiB)");
        assert_eq!(
            prune_summary(&dry, true),
            "would remove 1 sandbox, freeing 2.0 KiB"
        );
        assert_eq!(prune_summary(&[], true), "no sandboxes matched");
    }
}
