//! Host processes: a `sleep` the suite starts on the host (as the same user, so without the pid
//! namespace the sandbox could see and signal it) must be invisible and unreachable.

use std::fs;
use std::os::fd::AsRawFd as _;

use super::files::s;
use crate::check;
use crate::harness::{Mode, Net, Outcome, Secrets, World, inherit_fd};

pub fn host_process_invisible(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let mut sleeper = w.host_sleeper()?;
    let pid = sleeper.pid();
    for path in [format!("/proc/{pid}"), format!("/proc/{pid}/environ")] {
        w.probe(Net::Host, &["stat", &path])?.denied(&["ENOENT"])?;
    }
    w.probe(Net::Host, &["stat", "/proc/self/status"])?
        .succeeded()?;
    check!(sleeper.is_running(), "the host process {pid} died");
    Ok(())
}

pub fn host_process_unsignalable(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let mut sleeper = w.host_sleeper()?;
    let pid = sleeper.pid().to_string();
    // Control on the host: the same user can signal it, so ESRCH inside is the pid namespace.
    w.host_probe(&["kill", "0", &pid])?.succeeded()?;
    w.probe(Net::Host, &["kill", "0", &pid])?
        .denied(&["ESRCH"])?;
    w.probe(Net::Host, &["kill", "15", &pid])?
        .denied(&["ESRCH"])?;
    w.probe(Net::Host, &["kill", "0", "self"])?.succeeded()?;
    check!(
        sleeper.is_running(),
        "ESCAPE: the host process {pid} was killed from inside"
    );
    Ok(())
}

/// Init keeps the capabilities the workload dropped (it hides files with mounts for the whole
/// session), and under bwrap the stage is uid 0 of the namespace that owns the mounts: a workload
/// that could ptrace it, or write its memory, would have them all. Every other process in the
/// sandbox must refuse both. Control: the same probe takes over a child of its own.
pub fn init_not_taken_over(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let p = w.probe(Net::None, &["take-over-others"])?;
    match &p.result {
        Ok(detail) => Err(crate::harness::fail(format!(
            "ESCAPE: {detail}:\n      {}",
            p.run.describe()
        ))),
        Err(_) => {
            // Control: a shell in the sandbox is the probe's parent here, and a process it owns
            // and that is its own child can be traced (yama scope 1 allows descendants).
            let script = "sleep 5 & ./probe probe take-over-others; kill $! 2>/dev/null; true";
            let run = w.airlock(&["run", "--network", "none", "--", "sh", "-c", script])?;
            check!(
                run.stdout.contains("PROBE ok"),
                "control failed (a harness failure, not a pass): the probe could not take over \
                 a sibling it may trace, so a refusal proves nothing:\n      {}",
                run.describe()
            );
            Ok(())
        }
    }
}

/// The workload holds only stdin, stdout and stderr: no fd of airlock's own (socketpairs,
/// pidfds, a handle on the old root) and none that whoever started airlock handed down (a
/// terminal or an IDE leaking fds is common). An inherited fd reaches past every mount: a file
/// fd reads (or writes) the host file, a socket fd talks to a host service.
pub fn inherited_fds_closed(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let only_stdio = |p: &crate::harness::Probe| -> Outcome {
        let extra: Vec<&str> = p
            .run
            .stdout
            .split_whitespace()
            .filter(|f| {
                f.split_once('=')
                    .is_some_and(|(fd, _)| fd.parse::<u32>().is_ok_and(|n| n > 2))
            })
            .collect();
        check!(
            extra.is_empty(),
            "the workload holds fds beyond 0-2: {extra:?}\n      {}",
            p.run.describe()
        );
        Ok(())
    };
    // airlock's own fds (the suite closes everything it inherited itself).
    let p = w.probe(Net::Host, &["fds"])?;
    p.succeeded()?;
    only_stdio(&p)?;

    // A host directory as fd 3 and the host's SSH key as fd 4, handed down to airlock.
    let home = fs::File::open(&w.home)?;
    let key = fs::File::open(w.home.join(".ssh/id_ed25519"))?;
    let (home_fd, key_fd) = (home.as_raw_fd(), key.as_raw_fd());
    let hand_down = |c: &mut std::process::Command| {
        inherit_fd(c, home_fd, 3);
        inherit_fd(c, key_fd, 4);
    };
    let secret = Secrets::ssh(&w);
    // Controls on the host: through either fd the key is readable.
    for action in [
        &["read-at", "3", ".ssh/id_ed25519"][..],
        &["read-fd", "4"][..],
    ] {
        let host = w.host_probe_customized(action, hand_down)?;
        host.succeeded()?;
        check!(
            host.stdout_has(&secret),
            "host control: the inherited fd did not reach the key:\n      {}",
            host.run.describe()
        );
    }
    for action in [
        &["read-at", "3", ".ssh/id_ed25519"][..],
        &["read-fd", "4"][..],
    ] {
        let inside = w.probe_with(action, hand_down)?;
        inside.leaks_nothing(&secret)?;
        inside.denied(&[])?;
    }
    let p = w.probe_with(&["fds"], hand_down)?;
    p.succeeded()?;
    only_stdio(&p)
}

/// `/proc/<pid>/root` of every process inside leads to the sandbox's root, never the host's
/// (an init that never pivoted would hand out the host tree), and airlock's binary behind
/// `/proc/1/exe` cannot be opened for writing.
pub fn proc_links_stay_inside(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let secret = Secrets::ssh(&w);
    let key = w.home.join(".ssh/id_ed25519");
    let p = w.probe(Net::Host, &["read-via-proc-roots", s(&key)])?;
    p.leaks_nothing(&secret)?;
    p.denied(&[])?;
    w.probe(Net::Host, &["open-write", "/proc/1/exe"])?
        .denied(&[])?;
    // Control: the same path trick reaches the project (through the probe's own root).
    let planted = w.project.join("planted.txt");
    let p = w.probe(Net::Host, &["read-via-proc-roots", s(&planted)])?;
    p.succeeded()?;
    check!(
        p.stdout_has(&Secrets::planted(&w)),
        "control: {}",
        p.run.describe()
    );
    Ok(())
}

/// The descriptors of the sandbox's other processes (airlock's init holds the launch socket,
/// whose messages the supervisor trusts: the workload's end, the keeper's index it writes to the
/// state; and while it waits for `G`, a handle on the host's `/proc`) cannot be read or opened
/// through `/proc/<pid>/fd` by the workload, which the kernel refuses as it would a debugger:
/// native init keeps its capabilities and the workload has none; under bwrap the workload is in
/// a user namespace of its own; the container's init is not dumpable.
pub fn init_descriptors_unreachable(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    w.probe(Net::Host, &["reach-fds", "others"])?
        .denied(&["EACCES", "EPERM", "EACCES,EPERM"])?;
    // Control: the same path reaches the probe's own descriptors.
    w.probe(Net::Host, &["reach-fds", "self"])?.succeeded()
}

/// The developer's environment (tokens live there) reaches neither the workload nor any
/// `/proc/<pid>/environ` it can read, airlock's own init included.
pub fn host_env_not_visible(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let name = "AIRLOCK_ESCAPE_HOST_SECRET";
    let value = format!("HOST-ENV-SECRET-{}", w.token);
    let host = w.host_probe_customized(&["find-env", name], |c| {
        c.env(name, &value);
    })?;
    host.succeeded()?;
    let inside = w.probe_with(&["find-env", name], |c| {
        c.env(name, &value);
    })?;
    inside.leaks_nothing(&value)?;
    inside.denied(&[])?;
    // Control: the search finds what is there.
    w.probe(Net::Host, &["find-env", "HOME"])?.succeeded()
}
