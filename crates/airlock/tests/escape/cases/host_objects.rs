//! Host objects a sandbox is handed, and only as much of them as it needs: the device nodes in
//! `/dev` (usable, their metadata not changeable), TLS trust in `/etc/ssl` (no private keys), and
//! the caller's credentials (no supplementary groups when airlock runs as root).

use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _, chown};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};

use super::files::s;
use crate::check;
use crate::harness::{Mode, Net, Outcome, World, give, skip};

/// The host nodes bound into the sandbox's /dev.
const DEVICE_NODES: [&str; 6] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// The nodes are the host's own inodes; root inside owns them, so without a read-only bind a chmod
/// inside would change them for the whole host.
pub fn dev_chmod_denied(mode: &Mode) -> Outcome {
    let mut w = World::new(mode)?;
    let ctime_before = fs::metadata("/dev/null")?.ctime_nsec();
    for node in DEVICE_NODES {
        for action in ["chmod-same", "chown-same"] {
            let p = w.probe(Net::None, &[action, node])?;
            // The container engine makes /dev nodes of its own (rootful: a fresh node the
            // container owns; rootless: the host's, which its user does not own): there, what
            // counts is that the host's node is unchanged, checked below.
            if mode.backend != "container" {
                p.denied(&["EROFS"])?;
            }
        }
    }
    // Checked on the host: even a no-op chmod that got through would have touched the ctime.
    let ctime_after = fs::metadata("/dev/null")?.ctime_nsec();
    check!(
        ctime_before == ctime_after,
        "ESCAPE: the host's /dev/null changed (ctime {ctime_before} -> {ctime_after}) while the sandbox tried to chmod it"
    );
    // Controls: the devices work through the read-only binds.
    w.probe(Net::None, &["write", "/dev/null"])?.succeeded()?;
    w.probe(Net::None, &["write", "/dev/full"])?
        .denied(&["ENOSPC"])?;
    for node in ["/dev/zero", "/dev/random", "/dev/urandom"] {
        w.probe(Net::None, &["read-bytes", node, "16"])?
            .succeeded()?;
    }
    w.probe_on_pty(&["open-write", "/dev/tty"])?.succeeded()?;
    // Control: chmod itself works inside on what the sandbox owns; EROFS is the binds' doing.
    let project_file = w.project.join("planted.txt");
    w.probe(Net::None, &["chmod-same", s(&project_file)])?
        .succeeded()?;
    host_node_control(&mut w)
}

/// On the host, the owner of a device node may chmod it: a scratch node (root makes one in the
/// fixture, the same char device as /dev/null) answers the same attempt without EROFS.
fn host_node_control(w: &mut World) -> Outcome {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err(skip(
            "every check inside passed; the host control needs root to make a scratch device node",
        ));
    }
    let node = w.base().join("scratch-null");
    let c_node = CString::new(node.as_os_str().as_bytes()).expect("temp paths have no NUL");
    // SAFETY: a valid path; major 1, minor 3 is /dev/null.
    if unsafe { libc::mknod(c_node.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) } != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    give(w.mode, &node)?;
    let host = w.host_probe(&["chmod-same", s(&node)])?;
    host.succeeded()
}

/// The private keys beside the TLS trust on the host (`/etc/ssl/private`, `/etc/pki/tls/private`).
fn private_key_dirs() -> Vec<PathBuf> {
    ["/etc/ssl/private", "/etc/pki/tls/private"]
        .iter()
        .map(PathBuf::from)
        .filter(|d| d.is_dir())
        .collect()
}

pub fn etc_ssl_private_absent(mode: &Mode) -> Outcome {
    let dirs = private_key_dirs();
    if dirs.is_empty() {
        return Err(skip(
            "this host has neither /etc/ssl/private nor /etc/pki/tls/private",
        ));
    }
    let mut w = World::new(mode)?;
    for dir in &dirs {
        w.probe(Net::None, &["stat", s(dir)])?.denied(&["ENOENT"])?;
        for key in fs::read_dir(dir)?.filter_map(Result::ok).map(|e| e.path()) {
            w.probe(Net::None, &["read", s(&key)])?
                .denied(&["ENOENT"])?;
            // Host control: root reads the key, another user gets EACCES; neither gets ENOENT.
            let host = w.host_probe(&["read", s(&key)])?;
            check!(
                host.errno() != Some("ENOENT"),
                "host control: {} is ENOENT on the host too:\n      {}",
                key.display(),
                host.run.describe()
            );
        }
    }
    trust_store_control(&mut w)
}

/// Control: the trust store is there and works: `/etc/ssl/certs` lists, a root certificate in it
/// reads and `openssl verify` accepts it against the default store.
fn trust_store_control(w: &mut World) -> Outcome {
    let certs = Path::new("/etc/ssl/certs");
    if !certs.is_dir() {
        return Err(skip(
            "no private key was visible; this host has no /etc/ssl/certs for the control",
        ));
    }
    w.probe(Net::None, &["stat", s(certs)])?.succeeded()?;
    let root = fs::read_dir(certs)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "pem") && p.is_file())
        .min();
    let Some(root) = root else {
        return Ok(());
    };
    w.probe(Net::None, &["read", s(&root)])?.succeeded()?;
    if !Path::new("/usr/bin/openssl").exists() {
        return Err(skip(
            "no private key was visible and the store reads; openssl is not installed to verify with it",
        ));
    }
    let run = w.airlock(&[
        "run",
        "--network",
        "none",
        "--",
        "openssl",
        "verify",
        s(&root),
    ])?;
    check!(
        run.code() == Some(0) && run.stdout.contains(": OK"),
        "control: openssl must verify {} against the default trust store inside:\n      {}",
        root.display(),
        run.describe()
    );
    Ok(())
}

/// A group nobody on the host uses, and a uid that owns the group's file.
const EXTRA_GID: u32 = 54_321;
const OTHER_UID: u32 = 54_320;

/// Gives the command the extra supplementary group, as root's own groups would be.
fn with_extra_group(cmd: &mut std::process::Command) {
    // SAFETY: setgroups is async-signal-safe; the list outlives the call.
    unsafe {
        cmd.pre_exec(|| {
            let groups = [0 as libc::gid_t, EXTRA_GID];
            if libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Root's supplementary groups would follow it into the user namespace (shown as 65534) and still
/// open group-readable host files there.
pub fn supplementary_groups_dropped(mode: &Mode) -> Outcome {
    if mode.user.is_some() {
        return Err(skip(
            "an unprivileged user keeps its supplementary groups (its user namespace cannot drop them; \
             docs/security.md says so), and the suite's test user has none",
        ));
    }
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err(skip(
            "needs root: groups are dropped only when airlock runs as root",
        ));
    }
    let mut w = World::new(mode)?;
    let secret = format!("GROUP-ONLY-{}", w.token);
    let file = w.project.join("group-only.txt");
    fs::write(&file, &secret)?;
    chown(&file, Some(OTHER_UID), Some(EXTRA_GID))?;
    fs::set_permissions(&file, fs::Permissions::from_mode(0o040))?;
    let host = w.host_probe_customized(&["groups"], with_extra_group)?;
    host.succeeded()?;
    check!(
        host.stdout_has(&EXTRA_GID.to_string()),
        "host control: the probe must hold group {EXTRA_GID} unsandboxed:\n      {}",
        host.run.describe()
    );
    let inside = w.probe_with(&["groups"], with_extra_group)?;
    inside.succeeded()?;
    // None, or (the container engine's default for root) only the primary group, which grants
    // nothing the process does not already have.
    let groups = inside
        .run
        .stdout
        .split_whitespace()
        .find_map(|f| f.strip_prefix("groups="))
        .unwrap_or("?");
    check!(
        groups.is_empty() || groups == "0",
        "expected no supplementary groups inside:\n      {}",
        inside.run.describe()
    );
    // The file only group 54321 may read: refused inside (the host's root reads anything).
    let read = w.probe_with(&["read", s(&file)], with_extra_group)?;
    read.leaks_nothing(&secret)?;
    read.denied(&["EACCES"])?;
    super::files::control_read_planted(&mut w)
}
