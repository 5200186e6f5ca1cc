//! The supervisor's contract: exit statuses and signals come back, signals reach the workload,
//! the sandbox dies with airlock, and bad projects are refused before anything is created.

use std::fs;
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::Child;

use crate::check;
use crate::harness::{
    CONDITION_DEADLINE, Mode, Outcome, RUN_DEADLINE, World, fail, in_another_pid_ns,
    pids_with_marker, process_alive, status_text, wait_deadline, wait_until,
};

pub fn exit_status_42(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let run = w.airlock(&["run", "--", "sh", "-c", "exit 42"])?;
    check!(
        run.code() == Some(42),
        "expected exit 42:\n      {}",
        run.describe()
    );
    Ok(())
}

pub fn signal_death_reraised(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let run = w.airlock(&["run", "--", "sh", "-c", "kill -TERM $$"])?;
    check!(
        run.status.signal() == Some(libc::SIGTERM),
        "expected airlock to die of SIGTERM like its workload:\n      {}",
        run.describe()
    );
    Ok(())
}

/// `pid` and its descendants, each as `pid state cmdline`, for a failure message.
fn process_tree(pid: u32) -> String {
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(pid) = todo.pop() {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat.rsplit_once(") ").map_or("?", |(_, rest)| &rest[..1]);
        let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let shown = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        out.push(format!("{pid} {state} {}", shown.trim()));
        for task in fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let children = fs::read_to_string(task.path().join("children")).unwrap_or_default();
            todo.extend(
                children
                    .split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
    }
    out.join("; ")
}

/// Starts `airlock run -- sh -c <script>` and waits until the workload has created `started`
/// in the project. Returns the running airlock.
fn start_workload(
    w: &mut World,
    script: &str,
    started: &Path,
) -> Result<Child, crate::harness::Failure> {
    let cwd = w.project.clone();
    let (mut cmd, out, err) = w.airlock_command(&cwd, &["run", "--", "sh", "-c", script])?;
    let mut child = cmd.spawn()?;
    let mut exited = None;
    let ready = wait_until(CONDITION_DEADLINE, || {
        if let Ok(Some(status)) = child.try_wait() {
            exited = Some(status);
            return true;
        }
        started.exists()
    });
    if !ready || exited.is_some() {
        let _ = child.kill();
        let _ = child.wait();
        return Err(fail(format!(
            "the workload never signalled it was running ({}):\n      airlock run -- sh -c {script:?}\n      stdout: {}\n      stderr: {}",
            exited.map_or_else(|| format!("not within {CONDITION_DEADLINE:?}"), status_text),
            fs::read_to_string(out).unwrap_or_default().trim(),
            fs::read_to_string(err).unwrap_or_default().trim()
        )));
    }
    Ok(child)
}

pub fn sigterm_forwarded(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let started = w.project.join("started-term");
    let script = "trap 'exit 7' TERM; : > started-term; while :; do sleep 0.1; done";
    let mut airlock = start_workload(&mut w, script, &started)?;
    // SAFETY: kill has no memory effects; the pid is our own unreaped child.
    unsafe { libc::kill(airlock.id() as libc::pid_t, libc::SIGTERM) };
    let status = wait_deadline(&mut airlock, RUN_DEADLINE)?;
    let Some(status) = status else {
        let _ = airlock.kill();
        let _ = airlock.wait();
        return Err(fail(format!(
            "airlock did not exit within {RUN_DEADLINE:?} of SIGTERM"
        )));
    };
    check!(
        status.code() == Some(7),
        "SIGTERM to airlock must reach the workload (its trap exits 7); got {}",
        status_text(status)
    );
    Ok(())
}

pub fn sigkill_kills_sandbox(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let marker = format!("airlock-escape-kill9-{}", w.token);
    let started = w.project.join("started-kill9");
    // The workload records its pid as seen inside (atomically, so the host never reads half).
    let script = format!(
        ": {marker}; echo $$ > started.tmp && mv started.tmp started-kill9; while :; do sleep 0.1; done"
    );
    let mut airlock = start_workload(&mut w, &script, &started)?;
    let airlock_pid = airlock.id();
    let inner_pid: u32 = fs::read_to_string(&started)?.trim().parse().unwrap_or(0);
    // The sandbox has its own pid namespace: find the workload on the host by the marker in its
    // argv, and make sure it is the one whose pid inside is the one it wrote (NSpid), i.e. a
    // process in a nested pid namespace, not a transient fork or airlock itself.
    let inside: Vec<(u32, u64)> = pids_with_marker(&marker)
        .into_iter()
        .filter(|(pid, _)| *pid != airlock_pid)
        .collect();
    let workload = inside.iter().find(|(pid, _)| {
        ns_pids(*pid).is_some_and(|ns| ns.len() >= 2 && ns.last() == Some(&inner_pid))
    });
    if workload.is_none() {
        let _ = airlock.kill();
        let _ = airlock.wait();
        return Err(fail(format!(
            "did not find the workload (pid {inner_pid} inside a nested pid namespace) among the host processes carrying {marker} (other than airlock {airlock_pid}): {inside:?}"
        )));
    }
    airlock.kill()?;
    if wait_deadline(&mut airlock, RUN_DEADLINE)?.is_none() {
        return Err(fail("airlock survived SIGKILL"));
    }
    let gone = wait_until(CONDITION_DEADLINE, || {
        inside
            .iter()
            .all(|(pid, start)| !process_alive(*pid, *start))
    });
    if !gone {
        let survivors: Vec<String> = inside
            .iter()
            .filter(|(pid, start)| process_alive(*pid, *start))
            .map(|(pid, _)| {
                let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let shown = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                // SAFETY: kill has no memory effects; cleans up what the sandbox left behind.
                unsafe { libc::kill(*pid as libc::pid_t, libc::SIGKILL) };
                format!("{pid}: {}", shown.trim())
            })
            .collect();
        return Err(fail(format!(
            "sandbox processes outlived airlock's SIGKILL by {CONDITION_DEADLINE:?}: {survivors:?}"
        )));
    }
    Ok(())
}

/// What the workload leaves running (a background job, a `setsid` daemon, a shell that ignores
/// SIGTERM and SIGHUP) is gone the moment `airlock run` returns, with no wait, whatever the
/// backend: the session's end (the egress proxy stopped, the `.git` check) trusts that nothing of
/// the sandbox still runs. Control: the same processes are seen from the host while the sandbox
/// runs.
pub fn leftovers_gone_at_exit(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let marker = format!("airlock-escape-leftover-{}", w.token);
    let started = w.project.join("started-leftover");
    let script = format!(
        "sh -c 'sleep 1000; :' {marker}-job & setsid sh -c 'sleep 1000; :' {marker}-daemon & \
         sh -c 'trap \"\" TERM HUP; sleep 1000; :' {marker}-stubborn & \
         : > started-leftover; while [ ! -e stop-leftover ]; do sleep 0.05; done; exit 3"
    );
    // Each background shell carries its name as its `$0`, its last argument (the NUL after it
    // tells it from the script, which names it too).
    let all_seen = || {
        ["job", "daemon", "stubborn"]
            .iter()
            .all(|name| !pids_with_marker(&format!("{marker}-{name}\0")).is_empty())
    };
    let mut airlock = start_workload(&mut w, &script, &started)?;
    let seen = wait_until(CONDITION_DEADLINE, all_seen);
    if !seen {
        let status = airlock.try_wait().ok().flatten().map(status_text);
        let tree = process_tree(airlock.id());
        let _ = airlock.kill();
        let _ = airlock.wait();
        return Err(fail(format!(
            "control: the background processes carrying {marker} were never all seen from the \
             host (airlock {}; its processes: {tree}): {:?}",
            status.unwrap_or_else(|| "running".into()),
            pids_with_marker(&marker)
        )));
    }
    fs::write(w.project.join("stop-leftover"), b"")?;
    let Some(status) = wait_deadline(&mut airlock, RUN_DEADLINE)? else {
        let _ = airlock.kill();
        let _ = airlock.wait();
        return Err(fail(format!(
            "airlock did not exit within {RUN_DEADLINE:?} of its workload"
        )));
    };
    // At once: no polling, this is the moment the session's end already ran. The sandbox's
    // processes: airlock's own closer carries the marker too (it shares airlock's memory, so its
    // command line), and lets go of the sandbox's mounts just after airlock's exit, on the host.
    let survivors: Vec<_> = pids_with_marker(&marker)
        .into_iter()
        .filter(|(pid, _)| in_another_pid_ns(*pid))
        .collect();
    for (pid, _) in &survivors {
        // SAFETY: kill has no memory effects; cleans up what the sandbox left behind.
        unsafe { libc::kill(*pid as libc::pid_t, libc::SIGKILL) };
    }
    check!(
        status.code() == Some(3),
        "expected the workload's exit 3; got {}",
        status_text(status)
    );
    let alive: Vec<_> = survivors
        .iter()
        .filter(|(pid, start)| process_alive(*pid, *start))
        .collect();
    check!(
        alive.is_empty(),
        "ESCAPE: sandbox processes still ran when airlock returned: {alive:?}"
    );
    Ok(())
}

/// The processes on the host that hold the namespace `ns` (`mnt:[<inode>]`), as a namespace of
/// theirs or as an open descriptor, each as `pid comm`.
fn holders(ns: &str) -> Vec<String> {
    let mut out = Vec::new();
    for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let dir = entry.path();
        let as_ns = fs::read_link(dir.join("ns/mnt")).is_ok_and(|l| l.as_os_str() == ns);
        let as_fd = fs::read_dir(dir.join("fd"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|fd| fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == ns));
        if as_ns || as_fd {
            let comm = fs::read_to_string(dir.join("comm")).unwrap_or_default();
            out.push(format!("{pid} {}", comm.trim()));
        }
    }
    out
}

/// The sandbox's mount namespace is let go once airlock has exited (native hands it to a closer
/// that the kernel lets go at airlock's exit): no host process keeps a sandbox's mounts alive.
pub fn mount_namespace_released_after_exit(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let started = w.project.join("started-ns");
    let script = "readlink /proc/self/ns/mnt > ns-mnt; : > started-ns; \
                  while [ ! -e stop-ns ]; do sleep 0.05; done";
    let mut airlock = start_workload(&mut w, script, &started)?;
    let ns = fs::read_to_string(w.project.join("ns-mnt"))?
        .trim()
        .to_string();
    let seen = !ns.is_empty() && !holders(&ns).is_empty();
    fs::write(w.project.join("stop-ns"), b"")?;
    let status = wait_deadline(&mut airlock, RUN_DEADLINE)?;
    if status.is_none() {
        let _ = airlock.kill();
        let _ = airlock.wait();
    }
    check!(
        seen,
        "control: the sandbox's mount namespace {ns:?} was not seen from the host while it ran"
    );
    check!(
        status.is_some_and(|s| s.success()),
        "airlock did not end with its workload: {:?}",
        status.map(status_text)
    );
    let released = wait_until(CONDITION_DEADLINE, || holders(&ns).is_empty());
    check!(
        released,
        "the sandbox's mount namespace {ns} was still held {CONDITION_DEADLINE:?} after airlock \
         exited, by: {:?}",
        holders(&ns)
    );
    Ok(())
}

pub fn command_not_found(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let missing = "airlock-escape-no-such-command";
    let run = w.airlock(&["run", "--", missing])?;
    check!(
        run.code() == Some(127),
        "expected exit 127:\n      {}",
        run.describe()
    );
    check!(
        run.stderr.contains(missing),
        "the error must name the missing command:\n      {}",
        run.describe()
    );
    Ok(())
}

/// Nothing may be left under the state root after a refused launch.
fn no_sandbox_created(w: &World) -> Outcome {
    let sandboxes = w.home.join(".local/share/airlock/sandboxes");
    let created: Vec<String> = fs::read_dir(&sandboxes)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    check!(
        created.is_empty(),
        "a refused launch left state behind in {}: {created:?}",
        sandboxes.display()
    );
    Ok(())
}

fn refused(run: &crate::harness::Run) -> Outcome {
    check!(
        run.code() == Some(125) && !run.stderr.trim().is_empty(),
        "expected a refusal (exit 125 with a message):\n      {}",
        run.describe()
    );
    Ok(())
}

pub fn refuse_root_project(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    refused(&w.airlock(&["run", "--project", "/", "--", "sh", "-c", "exit 0"])?)?;
    no_sandbox_created(&w)
}

pub fn refuse_home_project(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let home = w.home.to_str().expect("temp paths are UTF-8").to_owned();
    refused(&w.airlock(&["run", "--project", &home, "--", "sh", "-c", "exit 0"])?)?;
    let cwd = w.home.clone();
    refused(&w.airlock_in(&cwd, &["run", "--", "sh", "-c", "exit 0"])?)?;
    no_sandbox_created(&w)
}

/// The pids of `pid` in each nested pid namespace, outermost first (`NSpid` in its status).
fn ns_pids(pid: u32) -> Option<Vec<u32>> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
    Some(
        line.split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect(),
    )
}
