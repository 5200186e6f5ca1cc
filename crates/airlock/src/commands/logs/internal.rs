//! `airlock logs internal`: the socket filters' decision logs and the egress proxy's diagnostics
//! (`<sandboxes_dir>/<name>/logs/internal/<name>.log`), merged by time.

use airlock_config::XdgPaths;
use airlock_sockets::{InternalLine, InternalLogs};
use anyhow::{Context, bail};

use super::{FOLLOW_INTERVAL, report_unreadable, sandbox_root};

#[derive(Debug, clap::Args)]
pub struct InternalLogArgs {
    /// The sandbox, by name (see `airlock sandboxes list`); default: the current project's
    #[arg(long, value_name = "NAME")]
    pub sandbox: Option<String>,
    /// Only this log: a filter's (herdr, kitty, docker, …) or egress (the proxy's diagnostics)
    #[arg(long, value_name = "NAME")]
    pub filter: Option<String>,
    /// Show the N latest lines by time
    #[arg(short = 'n', long = "lines", value_name = "N", default_value_t = 20)]
    pub lines: usize,
    /// Keep printing new lines as they are logged, until Ctrl-C
    #[arg(short, long)]
    pub follow: bool,
}

pub fn run(paths: &XdgPaths, args: &InternalLogArgs) -> anyhow::Result<i32> {
    let (name, root) = sandbox_root(paths, args.sandbox.as_deref())?;
    let dir = root.join("logs").join("internal");
    let present = InternalLogs::names(&dir);
    if let Some(filter) = &args.filter
        && !present.contains(filter)
    {
        let there = if present.is_empty() {
            "there are none yet".to_owned()
        } else {
            format!("the logs there: {}", present.join(", "))
        };
        bail!(
            "no internal log {filter:?} for sandbox {name} (no {}); {there}",
            dir.join(format!("{filter}.log")).display()
        );
    }
    if present.is_empty() {
        eprintln!(
            "no internal logs for sandbox {name} yet (nothing in {}; socket filters and the egress proxy write there while the sandbox runs)",
            dir.display()
        );
    }
    let mut logs = InternalLogs::new(&dir, args.filter.as_deref());
    let cannot_read = || format!("cannot read {}", dir.display());
    for line in logs.latest(args.lines).with_context(cannot_read)? {
        println!("{}", shown(&line));
    }
    report_unreadable(logs.take_unreadable(), &dir);
    if !args.follow {
        return Ok(0);
    }
    loop {
        std::thread::sleep(FOLLOW_INTERVAL);
        for line in logs.poll().with_context(cannot_read)? {
            println!("{}", shown(&line));
        }
        report_unreadable(logs.take_unreadable(), &dir);
    }
}

/// `TIME  LOG  TEXT`.
fn shown(line: &InternalLine) -> String {
    airlock_config::printable(&format!(
        "{}  {:<6}  {}",
        airlock_egress::rfc3339_from_unix_millis(line.unix_ms),
        line.log,
        line.text
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_show_the_time_the_log_and_the_text() {
        let line = InternalLine {
            log: "herdr".into(),
            unix_ms: 1_796_000_554_123,
            text: "pane.read deny \u{1b}[2J".into(),
        };
        assert_eq!(
            shown(&line),
            "2026-11-30T01:02:34.123Z  herdr   pane.read deny \\u{1b}[2J"
        );
    }
}
