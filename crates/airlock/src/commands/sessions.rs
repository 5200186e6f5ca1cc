//! `airlock sessions [--json]`: the running sessions (from their records in `<state>/run`), each
//! with the forwards its supervisor reports over its control socket.

use std::time::Duration;

use airlock_config::XdgPaths;
use airlock_sandbox::ports::sessions::{self, SessionRecord};
use airlock_sandbox::ports::{ForwardInfo, Request, ask};
use comfy_table::{ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};
use serde::Serialize;

#[derive(Debug, clap::Args)]
pub struct SessionsArgs {
    /// Print JSON: [{"sandbox", "project", "pid", "network", "socket", "ports": [{"host",
    /// "sandbox", "direction", "kind", "expires_in_secs"}] or null when the session does not
    /// answer}]
    #[arg(long)]
    pub json: bool,
}

/// How long one supervisor may take to answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug, Serialize)]
struct Row {
    #[serde(flatten)]
    record: SessionRecordView,
    ports: Option<Vec<ForwardInfo>>,
}

#[derive(Debug, Serialize)]
struct SessionRecordView {
    sandbox: String,
    project: std::path::PathBuf,
    pid: u32,
    network: airlock_config::NetworkMode,
    socket: std::path::PathBuf,
}

fn row(record: SessionRecord) -> Row {
    let ports = ask(&record.socket, &Request::Ports, ANSWER_TIMEOUT)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok());
    Row {
        ports,
        record: SessionRecordView {
            sandbox: record.sandbox,
            project: record.project,
            pid: record.pid,
            network: record.network,
            socket: record.socket,
        },
    }
}

pub fn run(paths: &XdgPaths, args: &SessionsArgs) -> anyhow::Result<i32> {
    let rows: Vec<Row> = sessions::list(&paths.run_dir())
        .into_iter()
        .map(row)
        .collect();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(0);
    }
    if rows.is_empty() {
        println!("no running sessions");
        return Ok(0);
    }
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(["SANDBOX", "PROJECT", "PID", "NETWORK", "PORTS"]);
    for r in &rows {
        table.add_row([
            r.record.sandbox.clone(),
            r.record.project.display().to_string(),
            r.record.pid.to_string(),
            r.record.network.as_str().to_owned(),
            ports_cell(r.ports.as_deref()),
        ]);
    }
    println!("{table}");
    Ok(0)
}

/// `8080→3000 (publish), 5432←5432 (config)`: `→` into the sandbox, `←` out of it.
fn ports_cell(ports: Option<&[ForwardInfo]>) -> String {
    let Some(ports) = ports else {
        return "(no answer)".into();
    };
    if ports.is_empty() {
        return "-".into();
    }
    port_lines(ports).join("\n")
}

/// One line per forward: `8080→3000 (publish)`, `5432←5432 (config)`, `1455→1455 (callback, 9m
/// left)`.
pub fn port_lines(ports: &[ForwardInfo]) -> Vec<String> {
    ports
        .iter()
        .map(|p| {
            let arrow = match p.direction {
                airlock_config::ports::PortDirection::In => '→',
                airlock_config::ports::PortDirection::Out => '←',
            };
            let left = p
                .expires_in_secs
                .map(|s| format!(", {}m left", s.div_ceil(60)))
                .unwrap_or_default();
            format!("{}{arrow}{} ({}{left})", p.host, p.sandbox, p.kind.as_str())
        })
        .collect()
}
