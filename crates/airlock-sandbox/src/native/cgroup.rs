//! `[sandbox.resources]` limits: a cgroup v2 group of the sandbox's own, made under the cgroup
//! airlock runs in, with `memory.max` (and no swap), `cpu.max` and `pids.max`. The sandbox's
//! init is moved into it before it runs anything, so every process of the sandbox is counted.
//!
//! The supervisor stays outside (an OOM kill never takes the gates down). That needs the cgroup
//! airlock runs in to be delegated to the user with the controllers enabled for its children,
//! and free of processes other than airlock itself (cgroup v2's rule: no processes in a group
//! whose children have controllers). airlock then moves itself into a leaf `supervisor` group
//! first. When any of that is not so, the launch is refused with the reason: limits that were
//! asked for are never silently dropped.

use std::fs;
use std::path::{Path, PathBuf};

use crate::spec::Limits;

/// The group of one sandbox; removed (once empty) by [`Cgroup::finish`].
#[derive(Debug)]
pub struct Cgroup {
    dir: PathBuf,
}

/// What the kernel did within the limits, read when the sandbox ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Events {
    /// Processes the OOM killer killed inside the group.
    pub oom_kills: u64,
    /// Forks refused at `pids.max`.
    pub pids_refused: u64,
}

/// Where this process's cgroup v2 group is: `<cgroup2 mount><path from /proc/self/cgroup>`.
pub fn own_group(mountinfo: &str, proc_cgroup: &str) -> Option<PathBuf> {
    let path = proc_cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))?
        .trim();
    let mount = mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        (right.split_whitespace().next()? == "cgroup2").then(|| left.split_whitespace().nth(4))?
    })?;
    Some(Path::new(mount).join(path.trim_start_matches('/')))
}

/// The controllers `limits` needs.
fn needed(limits: &Limits) -> Vec<(&'static str, &'static str)> {
    let mut out = Vec::new();
    if limits.memory.is_some() {
        out.push(("memory", "memory"));
    }
    if limits.cpus_milli.is_some() {
        out.push(("cpu", "cpus"));
    }
    if limits.pids.is_some() {
        out.push(("pids", "pids"));
    }
    out
}

fn read(path: &Path) -> Result<String, String> {
    fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    fs::write(path, value).map_err(|e| format!("cannot write {value:?} to {}: {e}", path.display()))
}

/// Why `parent` cannot hold groups with the `needed` controllers (read, nothing written): a
/// controller it does not offer, or processes in it other than this one.
fn unfit(parent: &Path, needed: &[(&str, &str)]) -> Result<(), String> {
    let offered = read(&parent.join("cgroup.controllers"))?;
    for (controller, key) in needed {
        if !offered.split_whitespace().any(|c| c == *controller) {
            return Err(format!(
                "`{key}` needs the cgroup v2 {controller} controller, which {} does not offer",
                parent.display()
            ));
        }
    }
    let me = std::process::id().to_string();
    let members = read(&parent.join("cgroup.procs"))?;
    if members.split_whitespace().any(|p| p != me) {
        return Err(format!(
            "{} holds other processes than airlock, so its children cannot get controllers",
            parent.display()
        ));
    }
    Ok(())
}

/// Set (to `1`) in airlock re-run inside the systemd scope [`reexec_in_scope`] made, so that it
/// never asks for another.
pub const SCOPE_ENV: &str = "AIRLOCK_SCOPE";

/// Why the group this process runs in cannot take `limits`, without changing anything; `None`
/// when it can (or nothing is limited). The launch checks again for real.
pub fn preflight(limits: &Limits) -> Option<String> {
    let needed = needed(limits);
    if needed.is_empty() {
        return None;
    }
    own_group_here()
        .and_then(|parent| unfit(&parent, &needed))
        .err()
}

/// Whether this user has a systemd user manager to ask for a scope: its private socket
/// `$XDG_RUNTIME_DIR/systemd/private` exists.
pub fn user_manager(runtime_dir: Option<&Path>) -> bool {
    runtime_dir.is_some_and(|dir| fs::symlink_metadata(dir.join("systemd/private")).is_ok())
}

/// Runs this very command again inside a transient systemd user scope of its own with delegated
/// controllers (`systemd-run --user --scope -p Delegate=yes`), where airlock is the group's only
/// process. `systemd_run` is the host's, resolved outside every sandbox-writable directory; `unit`
/// names the scope. Returns only when the exec failed.
pub fn reexec_in_scope(systemd_run: &Path, unit: &str) -> std::io::Error {
    use std::os::unix::process::CommandExt as _;
    let exe = match fs::read_link("/proc/self/exe") {
        Ok(exe) => exe,
        Err(e) => return e,
    };
    std::process::Command::new(systemd_run)
        .args(["--user", "--scope", "--quiet", "--collect"])
        .args(["-p", "Delegate=yes", "--unit"])
        .arg(unit)
        .arg("--")
        .arg(exe)
        .args(std::env::args_os().skip(1))
        .env(SCOPE_ENV, "1")
        .exec()
}

impl Cgroup {
    /// Makes the sandbox's group under `parent` (this process's own group), moving this process
    /// into `parent/supervisor` first. `name` names the group (`<sandbox>.<pid>`). `None` when
    /// nothing is limited. The error says why the limits cannot be applied here.
    pub fn create(parent: &Path, limits: &Limits, name: &str) -> Result<Option<Cgroup>, String> {
        let needed = needed(limits);
        if needed.is_empty() {
            return Ok(None);
        }
        let refuse = |why: String| match std::env::var_os(SCOPE_ENV) {
            Some(_) => format!(
                "{why}, even in the systemd user scope airlock ran itself in; [sandbox.resources] \
                 cannot be applied, so the sandbox was not started (remove the limits, or let \
                 your user manager delegate the controllers: `Delegate=memory pids cpu` in a \
                 drop-in for user@.service)"
            ),
            None => format!(
                "{why}; [sandbox.resources] cannot be applied here, so the sandbox was not \
                 started (remove the limits, run airlock where a systemd user manager can give \
                 it a scope, or in a cgroup v2 group delegated to you, e.g. under `systemd-run \
                 --user --scope -p Delegate=yes`)"
            ),
        };
        unfit(parent, &needed).map_err(refuse)?;
        let me = std::process::id().to_string();
        let supervisor = parent.join("supervisor");
        if !supervisor.is_dir() {
            fs::create_dir(&supervisor)
                .map_err(|e| refuse(format!("cannot create {}: {e}", supervisor.display())))?;
        }
        write(&supervisor.join("cgroup.procs"), &me).map_err(refuse)?;
        let enable: Vec<String> = needed.iter().map(|(c, _)| format!("+{c}")).collect();
        write(&parent.join("cgroup.subtree_control"), &enable.join(" ")).map_err(refuse)?;
        let dir = parent.join(name);
        let _ = fs::remove_dir(&dir);
        fs::create_dir(&dir)
            .map_err(|e| refuse(format!("cannot create {}: {e}", dir.display())))?;
        let group = Cgroup { dir };
        group.set(limits).map_err(refuse)?;
        Ok(Some(group))
    }

    fn set(&self, limits: &Limits) -> Result<(), String> {
        if let Some(bytes) = limits.memory {
            write(&self.dir.join("memory.max"), &bytes.to_string())?;
            // Swap would let a hog run on past the limit, slowly.
            if self.dir.join("memory.swap.max").exists() {
                write(&self.dir.join("memory.swap.max"), "0")?;
            }
        }
        if let Some(milli) = limits.cpus_milli {
            write(&self.dir.join("cpu.max"), &cpu_max(milli))?;
        }
        if let Some(pids) = limits.pids {
            write(&self.dir.join("pids.max"), &pids.to_string())?;
        }
        Ok(())
    }

    /// Moves `pid` (the sandbox's init, before it runs anything) into the group.
    pub fn add(&self, pid: libc::pid_t) -> Result<(), String> {
        write(&self.dir.join("cgroup.procs"), &pid.to_string())
    }

    /// What happened inside, then the group removed (the sandbox's processes are gone).
    pub fn finish(self) -> Events {
        let events = self.events();
        let _ = fs::remove_dir(&self.dir);
        events
    }

    fn events(&self) -> Events {
        let count = |file: &str, key: &str| -> u64 {
            fs::read_to_string(self.dir.join(file))
                .ok()
                .and_then(|text| {
                    text.lines().find_map(|l| {
                        let (k, v) = l.split_once(' ')?;
                        (k == key).then(|| v.trim().parse().ok())?
                    })
                })
                .unwrap_or(0)
        };
        Events {
            oom_kills: count("memory.events", "oom_kill"),
            pids_refused: count("pids.events", "max"),
        }
    }
}

/// `cpu.max` for a share of CPUs in thousandths: the quota per 100 ms period.
pub fn cpu_max(milli: u32) -> String {
    format!("{} 100000", u64::from(milli) * 100)
}

/// This process's group, from `/proc/self/mountinfo` and `/proc/self/cgroup`.
pub fn own_group_here() -> Result<PathBuf, String> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let cgroup = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    own_group(&mountinfo, &cgroup).ok_or_else(|| {
        "no cgroup v2 hierarchy is mounted here, or this process is not in one; \
         [sandbox.resources] cannot be applied, so the sandbox was not started (remove the \
         limits, or run on a system with cgroup v2)"
            .to_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            tmpfs_bytes: 0,
            memory: Some(256 << 20),
            cpus_milli: Some(1500),
            pids: Some(128),
        }
    }

    /// A fake cgroupfs: the files the kernel would offer in a delegated group holding only us.
    fn fake(controllers: &str, procs: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("cgroup.controllers"), controllers).unwrap();
        fs::write(dir.path().join("cgroup.procs"), procs).unwrap();
        fs::write(dir.path().join("cgroup.subtree_control"), "").unwrap();
        dir
    }

    #[test]
    fn the_own_group_comes_from_the_cgroup2_mount_and_the_path() {
        let mountinfo = "25 30 0:22 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
                         26 30 0:23 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        let cgroup = "4:memory:/x\n0::/user.slice/app.scope\n";
        assert_eq!(
            own_group(mountinfo, cgroup),
            Some(PathBuf::from("/sys/fs/cgroup/unified/user.slice/app.scope"))
        );
        assert_eq!(own_group("", cgroup), None, "no cgroup2 mount");
        assert_eq!(
            own_group(mountinfo, "4:memory:/x\n"),
            None,
            "no v2 membership"
        );
    }

    #[test]
    fn a_delegated_group_gets_the_limits_and_the_supervisor_a_leaf() {
        let me = std::process::id().to_string();
        let dir = fake("cpu memory pids", &me);
        let group = Cgroup::create(dir.path(), &limits(), "app.1")
            .unwrap()
            .unwrap();
        let read = |p: &str| fs::read_to_string(dir.path().join(p)).unwrap();
        assert_eq!(read("supervisor/cgroup.procs"), me);
        assert_eq!(read("cgroup.subtree_control"), "+memory +cpu +pids");
        assert_eq!(read("app.1/memory.max"), (256u64 << 20).to_string());
        assert_eq!(read("app.1/cpu.max"), "150000 100000");
        assert_eq!(read("app.1/pids.max"), "128");
        group.add(4242).unwrap();
        assert_eq!(read("app.1/cgroup.procs"), "4242");
        fs::write(
            dir.path().join("app.1/memory.events"),
            "low 0\noom 2\noom_kill 3\n",
        )
        .unwrap();
        fs::write(dir.path().join("app.1/pids.events"), "max 7\n").unwrap();
        // The fake's files keep the directory from being removed; the kernel's would not.
        let events = group.finish();
        assert_eq!(
            events,
            Events {
                oom_kills: 3,
                pids_refused: 7
            }
        );
    }

    #[test]
    fn limits_that_cannot_be_applied_refuse_the_launch_with_the_reason() {
        let me = std::process::id().to_string();
        let no_memory = fake("cpu pids", &me);
        let err = Cgroup::create(no_memory.path(), &limits(), "app.1").unwrap_err();
        assert!(
            err.contains("`memory` needs the cgroup v2 memory controller"),
            "{err}"
        );
        assert!(err.contains("the sandbox was not started"), "{err}");
        assert!(!no_memory.path().join("app.1").exists(), "nothing created");
        let shared = fake("cpu memory pids", &format!("{me}\n1\n"));
        let err = Cgroup::create(shared.path(), &limits(), "app.1").unwrap_err();
        assert!(err.contains("holds other processes than airlock"), "{err}");
        // Nothing limited: nothing needed, nothing touched.
        let none = Limits::default();
        assert!(
            Cgroup::create(Path::new("/nonexistent"), &none, "x")
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn cpu_shares_become_a_quota_per_period() {
        assert_eq!(cpu_max(1000), "100000 100000");
        assert_eq!(cpu_max(250), "25000 100000");
    }
}
