//! `airlock sandboxes list|prune`: the per-project state roots under `$XDG_DATA_HOME/airlock/sandboxes`.

use std::path::Path;
use std::time::{Duration, SystemTime};

use airlock_config::XdgPaths;
use airlock_sandbox::state::{
    self, ListOptions, PruneAction, PruneOptions, PruneResult, SandboxInfo,
};
use anyhow::bail;
use comfy_table::{ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};

#[derive(clap::Args, Debug)]
pub struct ListArgs {
    /// Print a JSON array with the fields name, path, project, project_exists, status, size_bytes,
    /// last_used_unix and live_sessions
    #[arg(long)]
    pub json: bool,
    /// Order the rows: name, used (most recent first) or size (largest first)
    #[arg(long, value_enum, value_name = "KEY", default_value = "name")]
    pub sort: SortKey,
    /// Do not measure disk usage (quicker with big homes): no SIZE column, size_bytes null in JSON
    #[arg(long)]
    pub no_size: bool,
}

/// `sandboxes list --sort`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Name,
    Used,
    Size,
}

#[derive(clap::Args, Debug)]
pub struct PruneArgs {
    /// Select sandboxes whose project directory is gone (or that record no project)
    #[arg(long)]
    pub orphaned: bool,
    /// Select sandboxes not used for longer than DUR, e.g. 30d or 12h (with --orphaned, both must hold)
    #[arg(long, value_name = "DUR", value_parser = parse_age)]
    pub older_than: Option<Duration>,
    /// Select every sandbox (one in use is still skipped)
    #[arg(long, conflicts_with_all = ["orphaned", "older_than"])]
    pub all: bool,
    /// Spare the N most recently used sandboxes and select the rest (with another filter, both must hold)
    #[arg(long, value_name = "N", value_parser = parse_keep)]
    pub keep: Option<usize>,
    /// Select only the sandbox named NAME (repeatable; with another filter, both must hold)
    #[arg(long = "name", value_name = "NAME")]
    pub names: Vec<String>,
    /// Show what would be removed, remove nothing
    #[arg(long)]
    pub dry_run: bool,
}

fn parse_keep(value: &str) -> Result<usize, String> {
    value.parse().map_err(|_| {
        format!("{value:?} is not a count; give how many recently used sandboxes to keep, e.g. 5")
    })
}

fn parse_age(value: &str) -> Result<Duration, String> {
    humantime::parse_duration(value).map_err(|err| {
        format!("{value:?} is not a duration ({err}); give one such as 30d, 12h or 2weeks")
    })
}

/// `airlock sandboxes list [--json] [--sort KEY] [--no-size]`.
pub fn list(paths: &XdgPaths, args: &ListArgs) -> anyhow::Result<()> {
    if args.no_size && args.sort == SortKey::Size {
        bail!(
            "--sort size needs the sizes --no-size skips; drop --no-size, or use --sort name or \
             --sort used"
        );
    }
    let sandboxes_dir = paths.sandboxes_dir();
    let options = ListOptions {
        sizes: !args.no_size,
    };
    let mut infos = state::list_with(&sandboxes_dir, &paths.locks_dir(), &options)?;
    sort(&mut infos, args.sort);
    if args.json {
        let rows: Vec<serde_json::Value> = infos
            .iter()
            .map(|info| json_row(info, args.no_size))
            .collect::<Result<_, _>>()?;
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else if infos.is_empty() {
        println!("no sandboxes in {}", sandboxes_dir.display());
    } else {
        println!("{}", list_table(&infos, SystemTime::now(), !args.no_size));
    }
    Ok(())
}

/// `running` while a session holds the sandbox (`prune` skips it); `oom-killed` when its last
/// session hit `[sandbox.resources] memory`; else `idle`.
fn status(info: &SandboxInfo) -> &'static str {
    if info.live_sessions > 0 {
        "running"
    } else if info.oom_killed {
        "oom-killed"
    } else {
        "idle"
    }
}

/// Orders `infos` by `key`; ties (and `name`) go by name, which `state::list` already sorted by.
fn sort(infos: &mut [SandboxInfo], key: SortKey) {
    match key {
        SortKey::Name => {}
        // Most recent first; a sandbox never used last.
        SortKey::Used => infos.sort_by_key(|i| std::cmp::Reverse(i.last_used)),
        SortKey::Size => infos.sort_by_key(|i| std::cmp::Reverse(i.size_bytes)),
    }
}

/// One `--json` row: the library's fields plus `status`; `size_bytes` is null when not measured.
fn json_row(info: &SandboxInfo, no_size: bool) -> serde_json::Result<serde_json::Value> {
    let mut row = serde_json::to_value(info)?;
    if let Some(fields) = row.as_object_mut() {
        fields.insert("status".into(), status(info).into());
        if no_size {
            fields.insert("size_bytes".into(), serde_json::Value::Null);
        }
    }
    Ok(row)
}

fn list_table(infos: &[SandboxInfo], now: SystemTime, sizes: bool) -> Table {
    let mut table = Table::new();
    let mut header = vec!["NAME", "PROJECT", "STATUS", "SIZE", "LAST USED", "SESSIONS"];
    if !sizes {
        header.retain(|h| *h != "SIZE");
    }
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header);
    for info in infos {
        let mut row = vec![
            info.name.clone(),
            project_cell(info.project.as_deref(), info.project_exists),
            status(info).to_string(),
        ];
        if sizes {
            row.push(format_size(info.size_bytes));
        }
        row.push(format_age(info.last_used, now));
        row.push(info.live_sessions.to_string());
        table.add_row(row);
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

/// `airlock sandboxes prune (--orphaned | --older-than DUR | --keep N | --all)... [--dry-run]`.
pub fn prune(paths: &XdgPaths, args: &PruneArgs) -> anyhow::Result<()> {
    let options = PruneOptions {
        orphaned: args.orphaned,
        older_than: args.older_than,
        all: args.all,
        keep: args.keep,
        names: args.names.clone(),
        dry_run: args.dry_run,
    };
    if !options.has_filter() {
        bail!(
            "prune needs a filter: pass --orphaned, --older-than DUR (e.g. 30d), --keep N, --name NAME \
             or --all; \
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
pub(crate) fn format_size(bytes: u64) -> String {
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
pub(crate) fn format_age(time: Option<SystemTime>, now: SystemTime) -> String {
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
    fn keep_and_all_parse_and_explain_bad_values() {
        let cli = PruneCli::try_parse_from(["prune", "--keep", "3", "--older-than", "1d"]).unwrap();
        assert_eq!(cli.args.keep, Some(3));
        let cli = PruneCli::try_parse_from(["prune", "--all", "--dry-run"]).unwrap();
        assert!(cli.args.all && cli.args.dry_run);
        let err = PruneCli::try_parse_from(["prune", "--keep=-1"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"-1\" is not a count"), "{err}");
        let err = PruneCli::try_parse_from(["prune", "--all", "--orphaned"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--orphaned"), "{err}");
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
                oom_killed: false,
            },
            SandboxInfo {
                name: "gone-89abcdef".into(),
                path: PathBuf::from("/d/gone-89abcdef"),
                project: Some(PathBuf::from("/src/gone")),
                project_exists: false,
                size_bytes: 512,
                last_used: None,
                live_sessions: 0,
                oom_killed: true,
            },
            SandboxInfo {
                name: "stray".into(),
                path: PathBuf::from("/d/stray"),
                project: None,
                project_exists: false,
                size_bytes: 0,
                last_used: None,
                live_sessions: 0,
                oom_killed: false,
            },
        ];
        let table = list_table(&infos, now, true);
        let header: Vec<String> = table
            .header()
            .unwrap()
            .cell_iter()
            .map(|c| c.content())
            .collect();
        assert_eq!(
            header,
            ["NAME", "PROJECT", "STATUS", "SIZE", "LAST USED", "SESSIONS"]
        );
        let rows: Vec<Vec<String>> = table
            .row_iter()
            .map(|r| r.cell_iter().map(|c| c.content()).collect())
            .collect();
        assert_eq!(
            rows,
            [
                [
                    "app-0123abcd",
                    "/src/app",
                    "running",
                    "12.3 MiB",
                    "3 days ago",
                    "2"
                ],
                [
                    "gone-89abcdef",
                    "/src/gone (missing)",
                    "oom-killed",
                    "512 B",
                    "never",
                    "0"
                ],
                [
                    "stray",
                    "(unknown: no sandbox.json)",
                    "idle",
                    "0 B",
                    "never",
                    "0"
                ],
            ]
        );
        let table = list_table(&infos[..1], now, false);
        let header: Vec<String> = table
            .header()
            .unwrap()
            .cell_iter()
            .map(|c| c.content())
            .collect();
        assert_eq!(
            header,
            ["NAME", "PROJECT", "STATUS", "LAST USED", "SESSIONS"]
        );
        let row: Vec<String> = table
            .row_iter()
            .next()
            .unwrap()
            .cell_iter()
            .map(|c| c.content())
            .collect();
        assert_eq!(
            row,
            ["app-0123abcd", "/src/app", "running", "3 days ago", "2"]
        );

        let mut sorted = infos.to_vec();
        sort(&mut sorted, SortKey::Size);
        let names: Vec<&str> = sorted.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["app-0123abcd", "gone-89abcdef", "stray"]);
        sorted[2].last_used = Some(now);
        sort(&mut sorted, SortKey::Used);
        let names: Vec<&str> = sorted.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["stray", "app-0123abcd", "gone-89abcdef"]);

        let row = json_row(&infos[0], false).unwrap();
        assert_eq!(
            (row["status"].as_str(), row["size_bytes"].as_u64()),
            (Some("running"), Some(12_900_000))
        );
        let row = json_row(&infos[1], true).unwrap();
        assert_eq!(row["status"], "oom-killed");
        assert!(row["size_bytes"].is_null());
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
