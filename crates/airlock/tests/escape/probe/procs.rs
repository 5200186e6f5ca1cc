//! Processes: signals, ids, `/proc/self/status`, and what other processes' `/proc` entries give away.

use std::fs;
use std::os::unix::fs::OpenOptionsExt as _;

use super::{Attempt, Denial, denial, errno_name, last_denial};

pub(super) fn kill(signal: &str, pid: &str) -> Attempt {
    let signal: i32 = signal.parse().unwrap_or(-1);
    let pid: i32 = if pid == "self" {
        std::process::id() as i32
    } else {
        pid.parse().unwrap_or(0)
    };
    if signal < 0 || pid <= 0 {
        return Err(Denial {
            name: "EINVAL".into(),
            what: "bad kill arguments".into(),
        });
    }
    // SAFETY: kill has no memory effects.
    if unsafe { libc::kill(pid, signal) } == 0 {
        Ok(format!("kill({pid}, {signal}) succeeded"))
    } else {
        Err(last_denial(format!("kill({pid}, {signal})")))
    }
}

pub(super) fn ids() -> String {
    // SAFETY: these calls cannot fail and touch no memory.
    let (uid, euid, gid, egid) = unsafe {
        (
            libc::getuid(),
            libc::geteuid(),
            libc::getgid(),
            libc::getegid(),
        )
    };
    format!("uid={uid} euid={euid} gid={gid} egid={egid}")
}

/// Prints `Field=value` for each named line of `/proc/self/status` (`Field=?` when absent).
pub(super) fn status_fields(fields: &[&str]) -> Attempt {
    let status = fs::read_to_string("/proc/self/status")
        .map_err(|e| denial("read /proc/self/status", &e))?;
    let shown: Vec<String> = fields
        .iter()
        .map(|field| {
            let prefix = format!("{field}:");
            let value = status
                .lines()
                .find_map(|l| l.strip_prefix(&prefix))
                .map_or("?", str::trim);
            format!("{field}={value}")
        })
        .collect();
    Ok(shown.join(" "))
}

/// The supplementary groups as `/proc/self/status` shows them: `groups=` then a comma list (ids not
/// mapped into this user namespace show as 65534).
pub(super) fn groups() -> Attempt {
    let status = fs::read_to_string("/proc/self/status")
        .map_err(|e| denial("read /proc/self/status", &e))?;
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .ok_or_else(|| Denial {
            name: "ENODATA".into(),
            what: "no Groups line in /proc/self/status".into(),
        })?;
    let ids: Vec<&str> = line.split_whitespace().collect();
    Ok(format!("groups={}", ids.join(",")))
}

/// Tries `/proc/<pid>/root<path>` for every visible process: a process whose root is still the
/// host's (an init that never pivoted, say) would hand out the host tree.
pub(super) fn read_via_proc_roots(path: &str) -> Attempt {
    let mut refusals = std::collections::BTreeSet::new();
    for pid in numeric_proc_entries() {
        let through = format!("/proc/{pid}/root{path}");
        match fs::read(&through) {
            Ok(bytes) => {
                let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned();
                return Ok(format!("read {through}: {} bytes {shown:?}", bytes.len()));
            }
            Err(e) => {
                refusals.insert(errno_name(e.raw_os_error().unwrap_or(0)));
            }
        }
    }
    Err(Denial {
        name: refusals.into_iter().collect::<Vec<_>>().join(","),
        what: format!("/proc/*/root{path}"),
    })
}

/// Looks for a `NAME=` entry in this process's environment and in every readable
/// `/proc/<pid>/environ` (sandbox init included). Success means it was found.
pub(super) fn find_env(name: &str) -> Attempt {
    if std::env::var_os(name).is_some() {
        return Ok(format!("{name} is in the probe's own environment"));
    }
    let entry = format!("{name}=");
    let (mut read, mut unreadable) = (0, 0);
    for pid in numeric_proc_entries() {
        match fs::read(format!("/proc/{pid}/environ")) {
            Ok(env) => {
                read += 1;
                if env
                    .split(|b| *b == 0)
                    .any(|e| e.starts_with(entry.as_bytes()))
                {
                    return Ok(format!("{name} is in /proc/{pid}/environ"));
                }
            }
            Err(_) => unreadable += 1,
        }
    }
    Err(Denial {
        name: "ENOENT".into(),
        what: format!("{name} not found ({read} environ files read, {unreadable} unreadable)"),
    })
}

/// Reaches for the descriptors of every other process in the sandbox (`others`: airlock's init
/// holds its launch socket to the supervisor) or of this one (`self`, the control) through
/// `/proc/<pid>/fd`: success means one of them was read (`readlink`) or opened.
pub(super) fn reach_fds(whose: &str) -> Attempt {
    let own = std::process::id();
    let pids: Vec<String> = match whose {
        "self" => vec!["self".into()],
        _ => numeric_proc_entries()
            .into_iter()
            .filter(|pid| *pid != own)
            .map(|pid| pid.to_string())
            .collect(),
    };
    let mut refusals = std::collections::BTreeSet::new();
    for pid in pids {
        let dir = format!("/proc/{pid}/fd");
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) => {
                refusals.insert(errno_name(e.raw_os_error().unwrap_or(0)));
                continue;
            }
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            match fs::read_link(&path) {
                Ok(to) => return Ok(format!("read {}: {}", path.display(), to.display())),
                Err(e) => refusals.insert(errno_name(e.raw_os_error().unwrap_or(0))),
            };
            let opened = fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&path);
            match opened {
                Ok(_) => return Ok(format!("opened {}", path.display())),
                Err(e) => refusals.insert(errno_name(e.raw_os_error().unwrap_or(0))),
            };
        }
    }
    // No other process to reach is no refusal: ESRCH, which the case does not accept.
    let name = match refusals.is_empty() {
        true => "ESRCH".to_owned(),
        false => refusals.into_iter().collect::<Vec<_>>().join(","),
    };
    Err(Denial {
        name,
        what: format!("/proc/<{whose}>/fd/*"),
    })
}

pub(super) fn numeric_proc_entries() -> Vec<u32> {
    fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Tries to take over every other process in the sandbox (init holds the capabilities the workload
/// dropped; under bwrap, bwrap's own pid 1 too): `PTRACE_SEIZE` (the permission check of
/// `PTRACE_ATTACH`, without stopping the process) and opening `/proc/<pid>/mem` for writing. Succeeds if any one works; otherwise the errnos, `pid:errno` each.
pub(super) fn take_over_others() -> Attempt {
    let me = std::process::id();
    let mut refused = Vec::new();
    let mut pids: Vec<u32> = fs::read_dir("/proc")
        .map_err(|e| denial("list /proc", &e))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&pid| pid != me)
        .collect();
    pids.sort_unstable();
    if pids.is_empty() {
        return Err(Denial {
            name: "ENOENT".into(),
            what: "no other process in the sandbox to try".into(),
        });
    }
    for pid in &pids {
        let attach = super::in_child(&format!("ptrace seize {pid}"), || {
            // SAFETY: PTRACE_SEIZE with integer arguments; the child exits right after, which
            // detaches it.
            let ret = unsafe {
                libc::ptrace(
                    libc::PTRACE_SEIZE,
                    *pid as libc::pid_t,
                    std::ptr::null_mut::<libc::c_void>(),
                    std::ptr::null_mut::<libc::c_void>(),
                )
            };
            if ret == 0 {
                0
            } else {
                std::io::Error::last_os_error().raw_os_error().unwrap_or(1)
            }
        });
        match attach {
            Ok(_) => return Ok(format!("ptrace attached to pid {pid}")),
            Err(d) => refused.push(format!("{pid}:{}", d.name)),
        }
        match fs::OpenOptions::new()
            .write(true)
            .open(format!("/proc/{pid}/mem"))
        {
            Ok(_) => return Ok(format!("opened /proc/{pid}/mem for writing")),
            Err(e) => refused.push(format!(
                "{pid}/mem:{}",
                super::errno_name(e.raw_os_error().unwrap_or(0))
            )),
        }
    }
    // One name for the harness to match: every refusal the same kind, else the mix.
    let names: std::collections::BTreeSet<&str> =
        refused.iter().filter_map(|r| r.split(':').nth(1)).collect();
    let name = if names.len() == 1 {
        names.into_iter().next().unwrap_or("EPERM").to_owned()
    } else {
        "MIXED".to_owned()
    };
    Err(Denial {
        name,
        what: refused.join(" "),
    })
}
