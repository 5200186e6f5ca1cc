//! Rootless podman for a container mode whose user is not root: a private runtime dir, storage
//! and config in a temp dir owned by that user, nothing shared with root's podman.
//!
//! podman on these machines needs runc, a nofile ulimit the user can set, cgroupfs (no systemd
//! user manager) and a file events log (no journal); see `tests/common/podman.rs` for root's.
//! At the end of the mode podman's rootless pause process is killed and the dir removed.

use std::fs;
use std::io;
use std::os::unix::fs::{PermissionsExt as _, chown};
use std::path::{Path, PathBuf};

use super::mode::User;

/// Why rootless podman cannot run as `user` here, if it cannot (printed as the mode's skip).
fn why_not(user: &User) -> Option<String> {
    for program in ["/usr/bin/newuidmap", "/usr/bin/newgidmap"] {
        if !Path::new(program).is_file() {
            return Some(format!(
                "rootless podman as {} needs {program}, which is missing (as root: apt-get \
                 install uidmap; scripts/test does)",
                user.name
            ));
        }
    }
    for file in ["/etc/subuid", "/etc/subgid"] {
        let text = fs::read_to_string(file).unwrap_or_default();
        if !has_range(&text, &user.name, user.uid) {
            return Some(format!(
                "rootless podman as {0} needs a subordinate id range for {0} in {file}, and \
                 there is none (as root: usermod --add-subuids 100000-165535 --add-subgids \
                 100000-165535 {0}; scripts/test adds it)",
                user.name
            ));
        }
    }
    None
}

/// Whether a subuid/subgid file gives `name` (or `uid`) a range of at least one id.
fn has_range(text: &str, name: &str, uid: u32) -> bool {
    text.lines().any(|line| {
        let f: Vec<&str> = line.trim().split(':').collect();
        f.len() == 3
            && (f[0] == name || f[0] == uid.to_string())
            && f[1].parse::<u64>().is_ok()
            && f[2].parse::<u64>().is_ok_and(|n| n > 0)
    })
}

/// The user's own podman setup, removed when dropped.
pub struct Rootless {
    user: User,
    dir: tempfile::TempDir,
}

impl Rootless {
    /// Makes `<tmp>/airlock-escape-podman-*/` (0700, the user's) with `run/` (XDG_RUNTIME_DIR,
    /// 0700), `storage/`, `storage.conf` (vfs there) and `containers.conf`.
    pub fn new(user: &User) -> io::Result<Rootless> {
        let dir = tempfile::Builder::new()
            .prefix("airlock-escape-podman-")
            .tempdir()?;
        let base = dir.path();
        for sub in ["run", "storage", "storage-run", "cni"] {
            fs::create_dir(base.join(sub))?;
        }
        fs::write(
            base.join("storage.conf"),
            format!(
                "[storage]\ndriver = \"vfs\"\ngraphroot = \"{}\"\nrunroot = \"{}\"\n",
                base.join("storage").display(),
                base.join("storage-run").display()
            ),
        )?;
        fs::write(
            base.join("containers.conf"),
            format!(
                "[containers]\ndefault_ulimits = [\"nofile=20000:20000\"]\n\
                 [engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\n\
                 events_logger = \"file\"\n[network]\nnetwork_config_dir = \"{}\"\n",
                base.join("cni").display()
            ),
        )?;
        for sub in ["", "run", "storage", "storage-run", "cni"] {
            let path = base.join(sub);
            chown(&path, Some(user.uid), Some(user.gid))?;
            fs::set_permissions(&path, fs::Permissions::from_mode(0o700))?;
        }
        for file in ["storage.conf", "containers.conf"] {
            chown(base.join(file), Some(user.uid), Some(user.gid))?;
        }
        Ok(Rootless {
            user: user.clone(),
            dir,
        })
    }

    /// Why rootless podman cannot run as this user here, if it cannot.
    pub fn missing(&self) -> Option<String> {
        why_not(&self.user)
    }

    /// A home for podman's own commands here (the suite's cases run with their world's).
    pub fn home(&self) -> &Path {
        self.dir.path()
    }

    /// The variables podman (through airlock) runs with.
    pub fn env(&self) -> [(&'static str, PathBuf); 3] {
        let base = self.dir.path();
        [
            ("XDG_RUNTIME_DIR", base.join("run")),
            ("CONTAINERS_CONF", base.join("containers.conf")),
            ("CONTAINERS_STORAGE_CONF", base.join("storage.conf")),
        ]
    }
}

impl Drop for Rootless {
    fn drop(&mut self) {
        // The pause process holds the user's namespace open; it names itself in the runtime dir.
        let pid_file = self.dir.path().join("run/libpod/tmp/pause.pid");
        if let Some(pid) = fs::read_to_string(pid_file)
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok())
            .filter(|&p| p > 1)
        {
            // SAFETY: a plain system call; the pid is the pause process this mode's podman made.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        // The TempDir removes the rest (root may remove the subordinate ids' files).
    }
}
