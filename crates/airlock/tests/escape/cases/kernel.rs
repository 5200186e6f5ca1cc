//! Kernel attack surface: terminal injection and line disciplines, keyrings, bpf, io_uring,
//! namespaces, mounts, the x32 ABI, dropped privileges and setuid binaries.
//!
//! Where the same attempt is also made unsandboxed on the host, the host result must differ
//! from the refusal seen inside, so the refusal is the sandbox's doing and not the kernel's.

use std::fs;
use std::os::unix::fs::{PermissionsExt as _, chown};

use crate::check;
use crate::harness::{Mode, Net, Outcome, World, skip};

/// Inside, `action` must be refused with `errno`; on the host it must not be.
fn refused_only_inside(w: &mut World, action: &[&str], errno: &str) -> Outcome {
    w.probe(Net::Host, action)?.denied(&[errno])?;
    let host = w.host_probe(action)?;
    check!(
        host.errno() != Some(errno),
        "host control: `{}` is refused with {errno} on the host too, so the test cannot tell the sandbox refused it:\n      {}",
        action.join(" "),
        host.run.describe()
    );
    Ok(())
}

/// Control: ordinary process creation works inside.
fn control_fork(w: &mut World) -> Outcome {
    w.probe(Net::Host, &["fork"])?.succeeded()?;
    w.probe(Net::Host, &["spawn", "/bin/true"])?.succeeded()
}

pub fn tiocsti_denied(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    refused_only_inside(&mut w, &["tiocsti"], "EPERM")?;
    // High bits set: the kernel still reads TIOCSTI, a filter comparing 64 bits would not.
    refused_only_inside(&mut w, &["tiocsti-high"], "EPERM")?;
    w.probe(Net::Host, &["tiocgwinsz"])?.succeeded()
}

pub fn tioclinux_denied(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    refused_only_inside(&mut w, &["tioclinux"], "EPERM")?;
    w.probe(Net::Host, &["tiocgwinsz"])?.succeeded()
}

/// TIOCSETD switches a tty's line discipline (kernel code a dev tool never needs); the attempt sets
/// N_TTY, which a fresh pty already has, so it is a no-op wherever it is allowed.
pub fn tiocsetd_denied(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    refused_only_inside(&mut w, &["tiocsetd"], "EPERM")?;
    refused_only_inside(&mut w, &["tiocsetd-high"], "EPERM")?;
    // Control: reading the discipline still works.
    let p = w.probe(Net::Host, &["tiocgetd"])?;
    p.succeeded()?;
    check!(
        p.stdout_has("ldisc=0"),
        "control: a fresh pty must report N_TTY (0) inside:\n      {}",
        p.run.describe()
    );
    Ok(())
}

/// io_uring runs its operations beside seccomp (IORING_OP_SOCKET, openat, ...), so every other
/// rule could be walked around through a ring: all three calls are refused.
pub fn io_uring_denied(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    for action in ["io-uring-enter", "io-uring-register"] {
        refused_only_inside(&mut w, &[action], "EPERM")?;
    }
    w.probe(Net::Host, &["io-uring-setup"])?
        .denied(&["EPERM"])?;
    let host = w.host_probe(&["io-uring-setup"])?;
    let disabled = fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .map(|v| v.trim() != "0")
        .unwrap_or(false);
    // With kernel.io_uring_disabled set the host says EPERM too; enter and register above still
    // show the refusal is the filter's.
    check!(
        host.errno() != Some("EPERM") || disabled,
        "host control: io_uring_setup is refused with EPERM on the host although kernel.io_uring_disabled is 0:\n      {}",
        host.run.describe()
    );
    control_fork(&mut w)
}

pub fn keyring_denied(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    for action in ["keyctl", "add-key", "request-key"] {
        refused_only_inside(&mut w, &[action], "EPERM")?;
    }
    control_fork(&mut w)
}

pub fn bpf_setns_denied(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    for action in ["bpf", "setns"] {
        refused_only_inside(&mut w, &[action], "EPERM")?;
    }
    control_fork(&mut w)
}

pub fn unshare_user_denied(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    for action in ["unshare-user", "clone-newuser"] {
        refused_only_inside(&mut w, &[action], "EPERM")?;
    }
    control_fork(&mut w)
}

/// clone3 hides its flags from seccomp, so it must fail with ENOSYS (libc then falls back to
/// clone, which the filter can inspect); spawning a program must still work.
pub fn clone3_enosys(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    refused_only_inside(&mut w, &["clone3"], "ENOSYS")?;
    control_fork(&mut w)
}

pub fn x32_refused(mode: &Mode) -> Outcome {
    if !cfg!(target_arch = "x86_64") {
        return Err(skip("the x32 ABI exists only on x86_64"));
    }
    let mut w = World::new(mode)?;
    w.probe(Net::Host, &["x32-unshare"])?.denied(&[])?;
    control_fork(&mut w)
}

pub fn mount_denied(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let dir = w.project.join("mnt");
    fs::create_dir(&dir)?;
    w.give_to_user()?;
    let dir = dir.to_str().expect("temp paths are UTF-8").to_owned();
    w.probe(Net::Host, &["mount-tmpfs", &dir])?
        .denied(&["EPERM"])?;
    w.probe(Net::Host, &["fsopen"])?.denied(&["EPERM"])?;
    // The project is a mount inside but a plain directory on the host, so this attempt cannot
    // unmount anything of the host's even against a broken sandbox. (No host control: without
    // capabilities the kernel says EPERM too; regaining them needs a new user namespace, which
    // `unshare-user-denied` covers.)
    let project = w.project.to_str().expect("temp paths are UTF-8").to_owned();
    w.probe(Net::Host, &["umount", &project])?
        .denied(&["EPERM"])?;
    // Control: the directory itself is usable.
    w.probe(Net::Host, &["write", &format!("{dir}/file")])?
        .succeeded()
}

/// Host devices (disks, kernel memory, the kernel log) are absent from the minimal /dev.
pub fn host_devices_absent(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let mut devices: Vec<String> = ["/dev/mem", "/dev/kmem", "/dev/port", "/dev/kmsg"]
        .iter()
        .map(|d| (*d).to_owned())
        .collect();
    if let Ok(blocks) = fs::read_dir("/sys/block") {
        devices.extend(
            blocks
                .filter_map(Result::ok)
                .map(|b| format!("/dev/{}", b.file_name().to_string_lossy()))
                .filter(|d| !d.starts_with("/dev/loop") && !d.starts_with("/dev/ram"))
                .take(4),
        );
    }
    devices.retain(|d| std::path::Path::new(d).exists());
    for device in &devices {
        w.probe(Net::Host, &["stat", device])?.denied(&["ENOENT"])?;
    }
    // Controls: the minimal /dev is there and usable.
    w.probe(Net::Host, &["write", "/dev/null"])?.succeeded()?;
    w.probe(Net::Host, &["stat", "/dev/urandom"])?.succeeded()
}

pub fn privileges_dropped(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let fields = [
        "NoNewPrivs",
        "CapInh",
        "CapPrm",
        "CapEff",
        "CapBnd",
        "CapAmb",
        "Seccomp",
    ];
    let mut action = vec!["status"];
    action.extend(fields);
    let p = w.probe(Net::Host, &action)?;
    p.succeeded()?;
    let zero = "0000000000000000";
    for want in [
        "NoNewPrivs=1".to_owned(),
        format!("CapInh={zero}"),
        format!("CapPrm={zero}"),
        format!("CapEff={zero}"),
        format!("CapBnd={zero}"),
        format!("CapAmb={zero}"),
        "Seccomp=2".to_owned(),
    ] {
        check!(
            p.run.stdout.split_whitespace().any(|f| f == want),
            "expected {want} inside:\n      {}",
            p.run.describe()
        );
    }
    Ok(())
}

/// A setuid-root copy of the probe, run inside by the unprivileged user, keeps that user's euid.
pub fn setuid_no_escalation(mode: &Mode) -> Outcome {
    let Some(user) = mode.user.clone() else {
        return Err(skip(
            "needs the unprivileged mode (root creates a setuid-root file that a normal user runs)",
        ));
    };
    let mut w = World::new(mode)?;
    let suid = w.project.join("suid-probe");
    fs::copy(&mode.probe, &suid)?;
    // Executable only by the test user's group, and the probe refuses anything but `euid`
    // when setuid, so this copy is no root tool for other local users while it exists.
    chown(&suid, Some(0), Some(user.gid))?;
    fs::set_permissions(&suid, fs::Permissions::from_mode(0o4750))?;
    let host = w.host_probe_with(&suid, &["euid"])?;
    host.succeeded()?;
    if !host.run.stdout.split_whitespace().any(|f| f == "euid=0") {
        return Err(skip(format!(
            "the setuid bit is not honoured on the host for {} (nosuid mount?), so there is nothing to escalate:\n      {}",
            suid.display(),
            host.run.describe()
        )));
    }
    let inside = w.airlock(&["run", "--", "./suid-probe", "probe", "euid"])?;
    let want = format!("euid={}", user.uid);
    check!(
        inside.code() == Some(0) && inside.stdout.split_whitespace().any(|f| f == want),
        "ESCAPE or failure: the setuid-root probe inside must report {want}:\n      {}",
        inside.describe()
    );
    Ok(())
}

/// `id-maps-own-ids-only` (native): the sandbox's user namespace maps the caller's own uid and gid
/// onto themselves and nothing else, with `setgroups` denied. Init writes these maps itself, from
/// inside: on a project's first launch (init cloned early, waiting for its plan) and on the next
/// (init building the recorded root ahead), so both are checked. A wider map (the host's root, a
/// range) would hand the sandbox ids that own the host's files.
pub fn id_maps_own_ids_only(mode: &Mode) -> Outcome {
    if mode.backend != "native" {
        return Err(skip(match mode.backend {
            "bwrap" => {
                "bwrap writes the bwrap backend's maps (its workload's user namespace is nested)"
            }
            _ => "the container engine writes the container backend's maps",
        }));
    }
    let mut w = World::new(mode)?;
    // SAFETY: getgid cannot fail.
    let gid = mode
        .user
        .as_ref()
        .map_or_else(|| unsafe { libc::getgid() }, |u| u.gid);
    let (uid, gid) = (mode.uid.to_string(), gid.to_string());
    let want = [&*uid, &*uid, "1", &*gid, &*gid, "1", "deny"];
    for launch in ["first", "next"] {
        let run = w.airlock(&[
            "run",
            "--",
            "cat",
            "/proc/self/uid_map",
            "/proc/self/gid_map",
            "/proc/self/setgroups",
        ])?;
        check!(
            run.status.success(),
            "the {launch} launch failed:\n      {}",
            run.describe()
        );
        let got: Vec<&str> = run.stdout.split_whitespace().collect();
        check!(
            got == want,
            "the {launch} launch's maps must be exactly {want:?}, got {got:?}:\n      {}",
            run.describe()
        );
    }
    Ok(())
}
