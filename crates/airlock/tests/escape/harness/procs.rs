//! Finding sandbox processes from the host, through `/proc`.

use std::fs;

/// Host pids (with their start times) whose command line contains `marker`.
pub fn pids_with_marker(marker: &str) -> Vec<(u32, u64)> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(marker))
                .unwrap_or(false)
        })
        .filter_map(|pid| Some((pid, start_time(pid)?)))
        .collect()
}

/// Whether the process `pid` that started at `start` still runs (a zombie counts as gone).
pub fn process_alive(pid: u32, start: u64) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let Some((_, rest)) = stat.rsplit_once(") ") else {
        return false;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first().copied().unwrap_or("X");
    let started = fields.get(19).and_then(|s| s.parse::<u64>().ok());
    !matches!(state, "Z" | "X" | "x") && started == Some(start)
}

fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(") ")?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether `pid` is in a pid namespace other than this process's: a sandbox's, not the host's.
/// airlock's own helpers carry its command line too (the closer shares its memory, so its
/// `cmdline` is airlock's) but run on the host, beside airlock. A process gone meanwhile counts
/// as another namespace's, so the caller's liveness check decides.
pub fn in_another_pid_ns(pid: u32) -> bool {
    let ours = fs::read_link("/proc/self/ns/pid");
    let theirs = fs::read_link(format!("/proc/{pid}/ns/pid"));
    match (ours, theirs) {
        (Ok(ours), Ok(theirs)) => ours != theirs,
        _ => true,
    }
}
