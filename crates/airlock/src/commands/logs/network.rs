//! `airlock logs network`: the egress proxy's decision log of a sandbox
//! (`<sandboxes_dir>/<name>/logs/network.jsonl` and its rotated files), filtered, in time order,
//! followed, or summed per host.

use std::time::{Instant, SystemTime};

use airlock_config::XdgPaths;
use airlock_egress::log::{
    FOLLOW_WINDOW, HostStats, LogReader, Logged, Query, Reorder, Stats, parse_time,
};
use airlock_egress::{LogDecision, LogRecord};
use anyhow::Context;
use comfy_table::{ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};

use super::{FOLLOW_INTERVAL, report_unreadable, sandbox_root};

#[derive(Debug, clap::Args)]
pub struct NetworkLogArgs {
    /// The sandbox, by name (see `airlock sandboxes list`); default: the current project's
    #[arg(long, value_name = "NAME")]
    pub sandbox: Option<String>,
    /// Show the N latest decisions by time [default: 20]
    #[arg(
        short = 'n',
        long = "lines",
        value_name = "N",
        conflicts_with = "stats"
    )]
    pub lines: Option<usize>,
    /// Keep printing new decisions as they are logged, in time order, until Ctrl-C
    #[arg(short, long, conflicts_with = "stats")]
    pub follow: bool,
    /// Print the JSON lines as logged (fields: time, host, port, method, decision, status, rule,
    /// bytes_up, bytes_down, duration_ms, reason, via; see docs/network.md); with --stats, a JSON
    /// array of the rows
    #[arg(long)]
    pub json: bool,
    /// Only denials (the same as --decision denied)
    #[arg(long)]
    pub denied: bool,
    /// Only this decision: allowed, denied or error (repeatable)
    #[arg(long, value_enum, value_name = "DECISION")]
    pub decision: Vec<DecisionArg>,
    /// Only requests at or after TIME: RFC 3339 UTC (2026-11-29T18:22:00Z, 2026-11-29) or a
    /// duration back from now (10m, 2h, 3d)
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Only requests before TIME (the same forms as --since)
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// Only hosts matching GLOB, case-insensitive (`*.github.com`, `api.*`; repeatable)
    #[arg(long, value_name = "GLOB")]
    pub host: Vec<String>,
    /// Only this method, any case (repeatable)
    #[arg(long, value_name = "METHOD")]
    pub method: Vec<String>,
    /// Per host: requests, allowed, denied, errors, bytes up and down, first and last seen
    #[arg(long)]
    pub stats: bool,
}

/// `--decision`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecisionArg {
    Allowed,
    Denied,
    Error,
}

impl From<DecisionArg> for LogDecision {
    fn from(d: DecisionArg) -> LogDecision {
        match d {
            DecisionArg::Allowed => LogDecision::Allowed,
            DecisionArg::Denied => LogDecision::Denied,
            DecisionArg::Error => LogDecision::Error,
        }
    }
}

const DEFAULT_LINES: usize = 20;

pub fn run(paths: &XdgPaths, args: &NetworkLogArgs) -> anyhow::Result<i32> {
    let query = query(args, SystemTime::now())?;
    let (name, root) = sandbox_root(paths, args.sandbox.as_deref())?;
    let log = root.join("logs").join("network.jsonl");
    let mut reader = LogReader::new(&log);
    if !reader.exists() {
        eprintln!(
            "no network decisions logged for sandbox {name} yet ({} does not exist; it is written when the sandbox runs with --network proxy)",
            log.display()
        );
    }
    let cannot_read = || format!("cannot read {}", log.display());
    if args.stats {
        let mut stats = Stats::default();
        reader
            .scan(&query, |logged| stats.add(&logged))
            .with_context(cannot_read)?;
        report_unreadable(reader.take_unreadable(), &log);
        print_stats(stats.rows(), args.json)?;
        return Ok(0);
    }
    let latest = reader
        .latest(&query, args.lines.unwrap_or(DEFAULT_LINES))
        .with_context(cannot_read)?;
    for logged in &latest {
        println!("{}", shown(logged, args.json));
    }
    report_unreadable(reader.take_unreadable(), &log);
    if args.follow {
        follow(&mut reader, &query, args.json)?;
    }
    Ok(0)
}

/// The filters of `args`, times taken back from `now`.
fn query(args: &NetworkLogArgs, now: SystemTime) -> anyhow::Result<Query> {
    let mut decisions: Vec<LogDecision> = args.decision.iter().map(|&d| d.into()).collect();
    if args.denied {
        decisions.push(LogDecision::Denied);
    }
    let mut query = Query::default()
        .hosts(&args.host)?
        .methods(&args.method)
        .decisions(&decisions);
    if let Some(since) = &args.since {
        query.since = Some(parse_time("--since", since, now)?);
    }
    if let Some(until) = &args.until {
        query.until = Some(parse_time("--until", until, now)?);
    }
    Ok(query)
}

/// Prints new decisions forever (the user stops it with Ctrl-C), each held a moment so that the
/// ones that arrived first print first.
fn follow(reader: &mut LogReader, query: &Query, json: bool) -> anyhow::Result<()> {
    let mut reorder = Reorder::new(FOLLOW_WINDOW);
    loop {
        reader
            .poll(query, |logged| reorder.push(logged, Instant::now()))
            .with_context(|| format!("cannot read {}", reader.path().display()))?;
        for logged in reorder.due(Instant::now()) {
            println!("{}", shown(&logged, json));
        }
        report_unreadable(reader.take_unreadable(), reader.path());
        std::thread::sleep(FOLLOW_INTERVAL);
    }
}

fn shown(logged: &Logged, json: bool) -> String {
    if json {
        logged.line.clone()
    } else {
        airlock_config::printable(&human(&logged.record))
    }
}

/// `TIME  DECISION  METHOD HOST:PORT  [STATUS]  details`.
fn human(r: &LogRecord) -> String {
    let method = if r.method.is_empty() { "-" } else { &r.method };
    let mut out = format!(
        "{}  {:<7}  {method} {}",
        r.time,
        r.decision.as_str(),
        target(r)
    );
    if let Some(status) = r.status {
        out.push_str(&format!("  {status}"));
    }
    if let Some(rule) = &r.rule {
        out.push_str(&format!("  rule={rule}"));
    }
    if r.decision == LogDecision::Allowed {
        out.push_str(&format!(
            "  up={} down={}",
            size(r.bytes_up),
            size(r.bytes_down)
        ));
    }
    out.push_str(&format!("  {} ms", r.duration_ms));
    if let Some(reason) = &r.reason {
        out.push_str(&format!("  {reason}"));
    }
    out
}

fn target(r: &LogRecord) -> String {
    match r.host.as_str() {
        "" => "-".to_owned(),
        host if host.contains(':') => format!("[{host}]:{}", r.port),
        host => format!("{host}:{}", r.port),
    }
}

fn print_stats(rows: Vec<HostStats>, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else if !rows.is_empty() {
        println!("{}", stats_table(&rows));
    }
    Ok(())
}

fn stats_table(rows: &[HostStats]) -> Table {
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header([
            "HOST",
            "REQUESTS",
            "ALLOWED",
            "DENIED",
            "ERRORS",
            "UP",
            "DOWN",
            "FIRST SEEN",
            "LAST SEEN",
        ]);
    for row in rows {
        let host = if row.host.is_empty() { "-" } else { &row.host };
        table.add_row([
            airlock_config::printable(host),
            row.counts.requests.to_string(),
            row.counts.allowed.to_string(),
            row.counts.denied.to_string(),
            row.counts.errors.to_string(),
            size(row.bytes_up),
            size(row.bytes_down),
            row.first_seen.clone(),
            row.last_seen.clone(),
        ]);
    }
    table
}

fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALLOWED: &str = r#"{"time":"2026-11-29T18:22:35.002Z","host":"api.github.com","port":443,"method":"CONNECT","decision":"allowed","rule":"github.com","bytes_up":1234,"bytes_down":49152,"duration_ms":312}"#;
    const DENIED: &str = r#"{"time":"2026-11-29T18:22:34.123Z","host":"example.org","port":443,"method":"CONNECT","decision":"denied","status":403,"bytes_up":0,"bytes_down":0,"duration_ms":0,"reason":"no rule allows it"}"#;

    fn record(line: &str) -> LogRecord {
        serde_json::from_str(line).unwrap()
    }

    #[test]
    fn human_lines() {
        assert_eq!(
            human(&record(ALLOWED)),
            "2026-11-29T18:22:35.002Z  allowed  CONNECT api.github.com:443  rule=github.com  up=1.2 KiB down=48.0 KiB  312 ms"
        );
        assert_eq!(
            human(&record(DENIED)),
            "2026-11-29T18:22:34.123Z  denied   CONNECT example.org:443  403  0 ms  no rule allows it"
        );
    }

    #[test]
    fn stats_rows_render_as_a_table() {
        let row = HostStats {
            host: String::new(),
            counts: airlock_egress::log::Counts {
                requests: 2,
                allowed: 0,
                denied: 0,
                errors: 2,
            },
            bytes_up: 0,
            bytes_down: 2048,
            first_seen: "2026-11-29T18:22:34.123Z".into(),
            last_seen: "2026-11-29T18:22:35.123Z".into(),
        };
        let table = stats_table(&[row]);
        let cells: Vec<String> = table
            .row(0)
            .unwrap()
            .cell_iter()
            .map(|c| c.content())
            .collect();
        assert_eq!(
            cells,
            [
                "-",
                "2",
                "0",
                "0",
                "2",
                "0 B",
                "2.0 KiB",
                "2026-11-29T18:22:34.123Z",
                "2026-11-29T18:22:35.123Z"
            ]
        );
    }
}
