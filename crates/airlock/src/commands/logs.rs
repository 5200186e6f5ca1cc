//! `airlock logs network`: the egress proxy's decision log of a sandbox
//! (`<sandboxes_dir>/<name>/logs/network.jsonl`, written in `--network proxy` mode).

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use airlock_config::XdgPaths;
use airlock_egress::{LogDecision, LogRecord};
use anyhow::{Context, bail};

#[derive(Debug, clap::Subcommand)]
pub enum LogsCommand {
    /// Show the egress proxy's decisions: one line per request (network = "proxy")
    Network(NetworkLogArgs),
}

#[derive(Debug, clap::Args)]
pub struct NetworkLogArgs {
    /// The sandbox, by name (see `airlock sandboxes list`); default: the current project's
    #[arg(long, value_name = "NAME")]
    pub sandbox: Option<String>,
    /// Show the last N decisions
    #[arg(short = 'n', long = "lines", value_name = "N", default_value_t = 20)]
    pub lines: usize,
    /// Keep printing new decisions as they are logged, until Ctrl-C
    #[arg(short, long)]
    pub follow: bool,
    /// Print the JSON lines as logged (fields: time, host, port, method, decision, rule, bytes_up,
    /// bytes_down, duration_ms, reason; see docs/network.md)
    #[arg(long)]
    pub json: bool,
    /// Only requests the policy denied
    #[arg(long)]
    pub denied: bool,
}

/// How often `--follow` looks for new lines.
const FOLLOW_INTERVAL: Duration = Duration::from_millis(250);

pub fn run(paths: &XdgPaths, command: &LogsCommand) -> anyhow::Result<i32> {
    let LogsCommand::Network(args) = command;
    let (name, root) = sandbox_root(paths, args.sandbox.as_deref())?;
    let log = root.join("logs").join("network.jsonl");
    let mut position = 0;
    match File::open(&log) {
        Ok(file) => {
            let (last, end) = tail(file, args)?;
            for line in last {
                println!("{line}");
            }
            position = end;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!(
                "no network decisions logged for sandbox {name} yet ({} does not exist; it is written when the sandbox runs with --network proxy)",
                log.display()
            );
        }
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", log.display())),
    }
    if args.follow {
        follow(&log, position, args)?;
    }
    Ok(0)
}

/// The sandbox's name and state root: `--sandbox NAME`, else the current project's.
fn sandbox_root(paths: &XdgPaths, name: Option<&str>) -> anyhow::Result<(String, PathBuf)> {
    let name = match name {
        Some(name) => {
            let mut parts = Path::new(name).components();
            if !matches!(
                (parts.next(), parts.next()),
                (Some(Component::Normal(_)), None)
            ) {
                bail!(
                    "--sandbox {name:?} is not a sandbox name; use a NAME column value from `airlock sandboxes list`"
                );
            }
            name.to_owned()
        }
        None => {
            let cwd = std::env::current_dir().context("cannot read the current directory")?;
            let cwd = std::fs::canonicalize(&cwd).unwrap_or(cwd);
            let home = std::fs::canonicalize(&paths.home).unwrap_or_else(|_| paths.home.clone());
            let project = airlock_sandbox::host::project_root(&cwd, &home);
            airlock_sandbox::state::sandbox_name(&project)
        }
    };
    let root = paths.sandboxes_dir().join(&name);
    if !root.is_dir() {
        bail!(
            "there is no sandbox {name:?} (no {}); run `airlock sandboxes list` to see the sandboxes, or pass --sandbox NAME",
            root.display()
        );
    }
    Ok((name, root))
}

/// The last `args.lines` matching lines, rendered, and the offset after the last complete line.
fn tail(file: File, args: &NetworkLogArgs) -> anyhow::Result<(VecDeque<String>, u64)> {
    let mut reader = BufReader::new(file);
    let mut last = VecDeque::with_capacity(args.lines.min(4096));
    let mut position = 0;
    let mut line = String::new();
    loop {
        line.clear();
        let n = reader.read_line(&mut line).context("cannot read the log")?;
        if n == 0 || !line.ends_with('\n') {
            break; // a line still being written is read by --follow later
        }
        position += n as u64;
        if let Some(shown) = render(&line, args) {
            if last.len() == args.lines {
                last.pop_front();
            }
            if args.lines > 0 {
                last.push_back(shown);
            }
        }
    }
    Ok((last, position))
}

/// Prints lines appended after `position`, forever (the user stops it with Ctrl-C). A log that
/// shrinks was replaced: it is read again from the start.
fn follow(log: &Path, mut position: u64, args: &NetworkLogArgs) -> anyhow::Result<()> {
    let mut pending = String::new();
    loop {
        if let Ok(mut file) = File::open(log) {
            let len = file.metadata().map(|m| m.len()).unwrap_or(0);
            if len < position {
                position = 0;
                pending.clear();
            }
            if len > position {
                file.seek(SeekFrom::Start(position))?;
                let mut reader = BufReader::new(file);
                loop {
                    let n = reader.read_line(&mut pending)?;
                    if n == 0 {
                        break;
                    }
                    position += n as u64;
                    if pending.ends_with('\n') {
                        if let Some(shown) = render(&pending, args) {
                            println!("{shown}");
                        }
                        pending.clear();
                    }
                }
            }
        }
        std::thread::sleep(FOLLOW_INTERVAL);
    }
}

/// One log line as it is shown, or `None` when it is filtered out or not a record.
fn render(line: &str, args: &NetworkLogArgs) -> Option<String> {
    let line = line.trim_end();
    let record: LogRecord = match serde_json::from_str(line) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("airlock: skipping a log line that is not a decision record ({e})");
            return None;
        }
    };
    if args.denied && record.decision != LogDecision::Denied {
        return None;
    }
    Some(if args.json {
        line.to_owned()
    } else {
        human(&record)
    })
}

/// `TIME  DECISION  METHOD HOST:PORT  details`.
fn human(r: &LogRecord) -> String {
    let target = match r.host.as_str() {
        "" => "-".to_owned(),
        host if host.contains(':') => format!("[{host}]:{}", r.port),
        host => format!("{host}:{}", r.port),
    };
    let method = if r.method.is_empty() { "-" } else { &r.method };
    let mut out = format!("{}  {:<7}  {method} {target}", r.time, r.decision.as_str());
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

    fn args(json: bool, denied: bool, lines: usize) -> NetworkLogArgs {
        NetworkLogArgs {
            sandbox: None,
            lines,
            follow: false,
            json,
            denied,
        }
    }

    const ALLOWED: &str = r#"{"time":"2026-11-29T18:22:35.002Z","host":"api.github.com","port":443,"method":"CONNECT","decision":"allowed","rule":"github.com","bytes_up":1234,"bytes_down":49152,"duration_ms":312}"#;
    const DENIED: &str = r#"{"time":"2026-11-29T18:22:34.123Z","host":"example.org","port":443,"method":"CONNECT","decision":"denied","bytes_up":0,"bytes_down":0,"duration_ms":0,"reason":"no rule allows it"}"#;

    #[test]
    fn human_lines() {
        assert_eq!(
            render(ALLOWED, &args(false, false, 1)).unwrap(),
            "2026-11-29T18:22:35.002Z  allowed  CONNECT api.github.com:443  rule=github.com  up=1.2 KiB down=48.0 KiB  312 ms"
        );
        assert_eq!(
            render(DENIED, &args(false, false, 1)).unwrap(),
            "2026-11-29T18:22:34.123Z  denied   CONNECT example.org:443  0 ms  no rule allows it"
        );
    }

    #[test]
    fn filters_and_json() {
        assert_eq!(render(ALLOWED, &args(true, true, 1)), None);
        assert_eq!(render(DENIED, &args(true, true, 1)).unwrap(), DENIED);
        assert_eq!(render("not json", &args(true, false, 1)), None);
    }

    #[test]
    fn tail_keeps_the_last_n_and_stops_before_a_partial_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("network.jsonl");
        let text = format!("{DENIED}\n{ALLOWED}\n{DENIED}\n{{\"time\":");
        std::fs::write(&path, &text).unwrap();
        let (last, end) = tail(File::open(&path).unwrap(), &args(true, false, 2)).unwrap();
        assert_eq!(last, [ALLOWED, DENIED]);
        assert_eq!(end as usize, text.rfind('{').unwrap());
        let (last, _) = tail(File::open(&path).unwrap(), &args(true, false, 0)).unwrap();
        assert!(last.is_empty());
    }
}
