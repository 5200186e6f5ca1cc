//! The least a sandbox of a given spec can cost on this machine, for `scripts/bench-startup`: the
//! spec's namespaces and its mount tree, built with bare system calls and nothing else, then the
//! workload exec'd. No config, no plan, no host checks (no `openat2`, no planted-link refusals),
//! no Landlock, no seccomp, no loopback, no egress proxy, no keeper, no state, no quarantine: what
//! every implementation of the spec pays before it does any work of its own.
//!
//! It trusts its input completely (it follows links, it does not check a source's type), so it is
//! a measuring stick only: never a sandbox.
//!
//! Usage: mount_floor SPEC.json (the output of `airlock run --print-spec`)

use std::fs;
use std::os::unix::fs::symlink;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::Command;

use airlock_sandbox::spec::{MountOp, SandboxSpec};
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, unshare};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, fork, pivot_root};

fn main() {
    let file = std::env::args_os()
        .nth(1)
        .expect("usage: mount_floor SPEC.json");
    let spec: SandboxSpec =
        serde_json::from_slice(&fs::read(file).expect("read the spec")).expect("decode the spec");
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    // The namespaces airlock gives this spec.
    let flags = CloneFlags::from_bits_truncate(airlock_sandbox::native::namespaces(&spec));
    // A root of its own, beside the spec's sources (which may be anywhere, /tmp included). The
    // pivot moves this process's root too, so it cannot remove the directory afterwards: each
    // run removes those of runs that have ended (a reused pid would find its name taken).
    let tmp = std::env::temp_dir();
    sweep_ended_roots(&tmp);
    let root = tmp.join(format!("mount-floor-{}", std::process::id()));
    // One with this pid is an ended run's, whose pid this process reuses.
    let _ = fs::remove_dir(&root);
    fs::create_dir(&root).expect("the root's mount point");
    unshare(flags).expect("unshare");
    fs::write("/proc/self/setgroups", "deny").expect("setgroups");
    fs::write("/proc/self/uid_map", format!("{uid} {uid} 1\n")).expect("uid_map");
    fs::write("/proc/self/gid_map", format!("{gid} {gid} 1\n")).expect("gid_map");
    // SAFETY: single-threaded; the child only builds its tree and execs.
    match unsafe { fork() }.expect("fork") {
        ForkResult::Child => build_and_exec(&spec, &root),
        ForkResult::Parent { child } => {
            let status = waitpid(child, None);
            let _ = fs::remove_dir(&root);
            match status {
                Ok(WaitStatus::Exited(_, code)) => std::process::exit(code),
                _ => std::process::exit(128),
            }
        }
    }
}

/// Removes the (empty) root directories of floor runs whose process is gone.
fn sweep_ended_roots(tmp: &Path) {
    let Ok(entries) = fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("mount-floor-"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_dir(entry.path());
        }
    }
}

fn build_and_exec(spec: &SandboxSpec, root: &Path) -> ! {
    let none: Option<&str> = None;
    mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none).expect("private /");
    mount(Some("tmpfs"), root, Some("tmpfs"), MsFlags::empty(), none).expect("root tmpfs");
    let at = |target: &Path| root.join(target.strip_prefix("/").unwrap_or(target));
    let ro = MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY;
    let bind = |source: &Path, target: &Path, writable: bool| {
        let dst = at(target);
        if source.is_dir() {
            fs::create_dir_all(&dst).expect("mount point");
        } else if fs::symlink_metadata(&dst).is_err() {
            fs::create_dir_all(dst.parent().expect("parent")).expect("mount point's parent");
            fs::File::create(&dst).expect("file mount point");
        }
        let flags = MsFlags::MS_BIND | MsFlags::MS_REC;
        mount(Some(source), &dst, none, flags, none)
            .unwrap_or_else(|e| panic!("bind {} on {}: {e}", source.display(), dst.display()));
        if !writable {
            mount(none, &dst, none, ro, none).expect("read-only");
        }
    };
    let fresh = |fstype: &str, target: &Path| {
        let dst = at(target);
        fs::create_dir_all(&dst).expect("mount point");
        mount(Some(fstype), &dst, Some(fstype), MsFlags::empty(), none).expect(fstype);
    };
    for op in &spec.mounts {
        match op {
            MountOp::Bind {
                source,
                target,
                writable,
                ..
            } => bind(source, target, *writable),
            MountOp::CopyFile { source, target } => bind(source, target, false),
            MountOp::MaskFile { target } => bind(Path::new("/dev/null"), target, false),
            MountOp::Symlink { link_to, target } => {
                let dst = at(target);
                fs::create_dir_all(dst.parent().expect("parent")).expect("link's parent");
                symlink(link_to, dst).expect("symlink");
            }
            MountOp::Tmpfs { target, .. } => fresh("tmpfs", target),
            MountOp::Proc { target } => fresh("proc", target),
            MountOp::Dev { target } => {
                fresh("tmpfs", target);
                for node in ["null", "zero", "full", "random", "urandom", "tty"] {
                    bind(&Path::new("/dev").join(node), &target.join(node), false);
                }
                fresh("devpts", &target.join("pts"));
                fresh("tmpfs", &target.join("shm"));
            }
            other => panic!("mount_floor does not build {other:?}"),
        }
    }
    std::env::set_current_dir(root).expect("chdir to the new root");
    pivot_root(".", ".").expect("pivot_root");
    umount2(".", MntFlags::MNT_DETACH).expect("detach the old root");
    std::env::set_current_dir(&spec.cwd).expect("cwd");
    let error = Command::new(&spec.argv[0])
        .args(&spec.argv[1..])
        .env_clear()
        .envs(&spec.env)
        .exec();
    panic!("exec: {error}");
}
