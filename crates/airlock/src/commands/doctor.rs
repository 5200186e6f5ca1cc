//! `airlock doctor`: what this machine supports, as a table or `--json`; exit status 1 on any failure.

use airlock_sandbox::doctor::{Check, Status, run_checks};
use comfy_table::{ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};

#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// Print a JSON array of checks with the fields name, status (ok, warn or fail), detail and fix
    #[arg(long)]
    pub json: bool,
}

/// Runs the host checks after `config_checks` (config validity and the network policy), prints them
/// and returns the exit code: 1 if any row failed, else 0.
pub fn doctor(args: &DoctorArgs, config_checks: Vec<Check>) -> anyhow::Result<i32> {
    let mut checks = config_checks;
    checks.extend(run_checks());
    if args.json {
        println!("{}", serde_json::to_string_pretty(&checks)?);
    } else {
        println!("{}", checks_table(&checks));
    }
    Ok(exit_code(&checks))
}

fn exit_code(checks: &[Check]) -> i32 {
    i32::from(checks.iter().any(|c| c.status == Status::Fail))
}

fn status_label(status: Status) -> &'static str {
    match status {
        Status::Ok => "ok",
        Status::Warn => "warn",
        Status::Fail => "fail",
    }
}

fn checks_table(checks: &[Check]) -> Table {
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(["CHECK", "STATUS", "DETAIL", "FIX"]);
    for check in checks {
        table.add_row([
            check.name.to_string(),
            status_label(check.status).to_string(),
            check.detail.clone(),
            check.fix.clone().unwrap_or_default(),
        ]);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &'static str, status: Status) -> Check {
        Check {
            name,
            status,
            detail: format!("{name} detail"),
            fix: (status != Status::Ok).then(|| format!("fix {name}")),
        }
    }

    #[test]
    fn exit_code_is_one_only_with_a_failure() {
        assert_eq!(
            exit_code(&[row("a", Status::Ok), row("b", Status::Warn)]),
            0
        );
        assert_eq!(
            exit_code(&[row("a", Status::Ok), row("b", Status::Fail)]),
            1
        );
    }

    #[test]
    fn table_has_one_row_per_check() {
        let table = checks_table(&[row("config", Status::Ok), row("landlock", Status::Warn)]);
        let rows: Vec<Vec<String>> = table
            .row_iter()
            .map(|r| r.cell_iter().map(|c| c.content()).collect())
            .collect();
        assert_eq!(
            rows,
            [
                ["config", "ok", "config detail", ""],
                ["landlock", "warn", "landlock detail", "fix landlock"],
            ]
        );
        let header: Vec<String> = table
            .header()
            .unwrap()
            .cell_iter()
            .map(|c| c.content())
            .collect();
        assert_eq!(header, ["CHECK", "STATUS", "DETAIL", "FIX"]);
    }
}
