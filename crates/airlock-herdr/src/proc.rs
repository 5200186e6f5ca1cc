//! Processes: identity (pid + start token + command line) and captured CLI calls with a timeout.

use std::ffi::OsStr;
use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// This process's start token (see [`start_token`]).
pub fn own_token() -> String {
    start_token(std::process::id()).unwrap_or_else(|| "-".to_owned())
}

/// `linux:<field 22 of /proc/<pid>/stat>` (the start time in clock ticks since boot), parsed after
/// the last `)` because the command name may contain spaces and parentheses. `None` when the
/// process is gone or /proc is unreadable.
pub fn start_token(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    // After ")" come field 3 (state) onwards; field 22 is the 20th of those.
    let start = rest.split_whitespace().nth(19)?;
    Some(format!("linux:{start}"))
}

/// Whether `pid` names a live process (kill 0 succeeds or fails with EPERM only).
pub fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks for existence and permission.
    let rc = unsafe { libc::kill(pid, 0) };
    let exists = rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    // A zombie has exited: it only waits for its parent to reap it (a closed popup pane whose
    // parent is slow to reap must count as gone, not hold a confirmation for its whole window).
    exists && !is_zombie(pid)
}

/// Whether `/proc/<pid>/stat` says the process has exited and awaits reaping (state `Z`).
fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rfind(')')
            .and_then(|end| stat[end + 1..].split_whitespace().next())
            .is_some_and(|state| state == "Z")
    })
}

/// The argv of `pid` from /proc, or `None` when it cannot be read.
pub fn command_line(pid: u32) -> Option<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    if raw.is_empty() {
        return None;
    }
    Some(
        raw.split(|b| *b == 0)
            .filter(|w| !w.is_empty())
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect(),
    )
}

/// A recorded process: is it alive, the same incarnation, and running `airlock herdr <role>`
/// (for `pane`, when given: with `--pane-id <pane>`)? A live process whose command line cannot be
/// read counts as the owner: erring towards "busy" never deletes under a live session.
pub fn process_owns(pid: u32, token: &str, role: &str, pane: Option<&str>) -> bool {
    if !pid_alive(pid) {
        return false;
    }
    if token != "-"
        && let Some(current) = start_token(pid)
        && current != token
    {
        return false;
    }
    let Some(words) = command_line(pid) else {
        return true;
    };
    let Some(herdr) = words.iter().position(|w| w == "herdr") else {
        return false;
    };
    if words.get(herdr + 1).map(String::as_str) != Some(role) {
        return false;
    }
    match pane {
        None => true,
        Some(pane) => words
            .windows(2)
            .any(|pair| pair[0] == "--pane-id" && pair[1] == pane),
    }
}

/// The outcome of a captured CLI call.
#[derive(Debug, Clone, Default)]
pub struct Captured {
    /// The exit code; `None` when killed by a signal (including our timeout).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
}

impl Captured {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// stdout followed by stderr, as attached to errors.
    pub fn output(&self) -> String {
        let mut out = self.stdout.clone();
        if !out.is_empty() && !out.ends_with('\n') && !self.stderr.is_empty() {
            out.push('\n');
        }
        out.push_str(&self.stderr);
        out
    }
}

/// Runs `program args` with no stdin, capturing stdout and stderr, killing its whole process group
/// with SIGKILL after `timeout`. `Err` only when it could not be started.
pub fn run_captured(
    program: &Path,
    args: &[impl AsRef<OsStr>],
    env: &[(String, String)],
    cwd: Option<&Path>,
    timeout: Duration,
) -> std::io::Result<Captured> {
    use std::os::unix::process::CommandExt as _;
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    for (k, v) in env {
        command.env(k, v);
    }
    if let Some(cwd) = cwd {
        command.current_dir(cwd);
    }
    let mut child = command.spawn()?;
    let pid = child.id();
    let mut stdout = child.stdout.take().expect("stdout was piped");
    let mut stderr = child.stderr.take().expect("stderr was piped");
    let out_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf);
        buf
    });
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let status = child.wait();
        let _ = tx.send(());
        status
    });
    let timed_out = rx.recv_timeout(timeout).is_err();
    if timed_out {
        // SAFETY: signalling the process group we created for this child.
        unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
    }
    let status = waiter.join().expect("waiter thread does not panic")?;
    // A grandchild that inherited the pipes may outlive the kill; the group kill covers it.
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    Ok(Captured {
        code: if timed_out { None } else { status.code() },
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        timed_out,
    })
}

/// Milliseconds from an environment variable, else `default`.
pub fn env_duration(name: &str, default: Duration) -> Duration {
    // An empty or zero override means the default, never a zero timeout.
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|ms| *ms > 0)
        .map_or(default, Duration::from_millis)
}

/// `n` random bytes as lowercase hex.
pub fn random_hex(n: usize) -> String {
    let mut buf = vec![0u8; n];
    getrandom::fill(&mut buf).expect("the OS random source is available");
    hex(&buf)
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// Now as RFC 3339 with milliseconds (UTC).
pub fn now_iso() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

#[cfg(test)]
mod zombie_tests {
    #[test]
    fn a_zombie_is_not_alive() {
        let child = std::process::Command::new("true").spawn().expect("true");
        let pid = child.id();
        // Not reaped: it stays a zombie until `wait`.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while super::pid_alive(pid) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(
            !super::pid_alive(pid),
            "an exited, unreaped child counts as gone"
        );
        let mut child = child;
        let _ = child.wait();
        assert!(super::pid_alive(std::process::id()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_start_token_is_stable_and_linux_shaped() {
        let a = own_token();
        assert!(a.starts_with("linux:"), "{a}");
        assert_eq!(a, own_token());
    }

    #[test]
    fn timeout_kills_the_process_group() {
        let started = std::time::Instant::now();
        let out = run_captured(
            Path::new("/bin/sh"),
            &["-c", "sleep 30 & sleep 30"],
            &[],
            None,
            Duration::from_millis(200),
        )
        .expect("sh starts");
        assert!(out.timed_out);
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn captures_both_streams_and_the_code() {
        let out = run_captured(
            Path::new("/bin/sh"),
            &["-c", "echo out; echo err >&2; exit 3"],
            &[],
            None,
            Duration::from_secs(10),
        )
        .expect("sh starts");
        assert_eq!(out.code, Some(3));
        assert_eq!(out.output(), "out\nerr\n");
    }
}
