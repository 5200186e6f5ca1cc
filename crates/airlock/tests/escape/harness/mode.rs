//! Who runs airlock: the current user, or an unprivileged user the suite drops to from root.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::rootless::Rootless;

/// An account the suite switches to.
#[derive(Clone, Debug)]
pub struct User {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

impl User {
    /// Looks a user up in the passwd database.
    pub fn lookup(name: &str) -> Option<User> {
        let cname = std::ffi::CString::new(name).ok()?;
        // SAFETY: called before any other thread exists; the record is copied out at once.
        unsafe {
            let pw = libc::getpwnam(cname.as_ptr());
            if pw.is_null() {
                return None;
            }
            Some(User {
                name: name.to_owned(),
                uid: (*pw).pw_uid,
                gid: (*pw).pw_gid,
            })
        }
    }
}

/// Who runs airlock, with the binaries copied where that user can execute them.
pub struct Mode {
    /// A short label printed before each case: the user's name.
    pub label: String,
    /// `Some` when the suite drops from root to this user for every command it runs.
    pub user: Option<User>,
    /// The uid airlock and the probe run with.
    pub uid: u32,
    /// The world-readable directory holding the copies below.
    _bin_dir: tempfile::TempDir,
    pub airlock: PathBuf,
    pub probe: PathBuf,
    /// The backend every launch of this mode uses (`AIRLOCK_BACKEND`).
    pub backend: &'static str,
    /// The container backend as a user other than root: that user's own rootless podman.
    rootless: Option<Rootless>,
}

impl Mode {
    /// A mode running airlock as `user`, or as the current user when `None`.
    pub fn new(user: Option<User>, backend: &'static str) -> io::Result<Mode> {
        let bin_dir = tempfile::Builder::new()
            .prefix("airlock-escape-bin-")
            .tempdir()?;
        fs::set_permissions(bin_dir.path(), fs::Permissions::from_mode(0o755))?;
        let airlock = bin_dir.path().join("airlock");
        let probe = bin_dir.path().join("probe");
        fs::copy(airlock_under_test(), &airlock)?;
        fs::copy(std::env::current_exe()?, &probe)?;
        for exe in [&airlock, &probe] {
            fs::set_permissions(exe, fs::Permissions::from_mode(0o755))?;
        }
        // SAFETY: getuid and getgid cannot fail.
        let (uid, gid) = user.as_ref().map_or_else(
            || unsafe { (libc::getuid(), libc::getgid()) },
            |u| (u.uid, u.gid),
        );
        let label = match &user {
            Some(u) => u.name.clone(),
            None => current_user_name(uid),
        };
        let rootless = if backend == "container" && uid != 0 {
            Some(Rootless::new(&User {
                name: label.clone(),
                uid,
                gid,
            })?)
        } else {
            None
        };
        if backend == "container" && rootless.is_none() {
            fs::write(
                bin_dir.path().join("containers.conf"),
                "[containers]\ndefault_ulimits = [\"nofile=20000:20000\", \"nproc=32768:32768\"]\n\
                 [engine]\nruntime = \"runc\"\n",
            )?;
        }
        Ok(Mode {
            label,
            user,
            uid,
            _bin_dir: bin_dir,
            airlock,
            probe,
            backend,
            rootless,
        })
    }

    /// Why this mode's user cannot run rootless podman here (container modes of a user other
    /// than root only).
    pub fn rootless_missing(&self) -> Option<String> {
        self.rootless.as_ref().and_then(Rootless::missing)
    }

    /// Why this mode's rootless podman does not run although it has what it needs (`podman
    /// info` as the user fails or is not rootless): the mode then fails, it does not skip.
    pub fn rootless_broken(&self) -> Option<String> {
        let rootless = self.rootless.as_ref()?;
        let mut cmd = self.command(Path::new("/usr/bin/podman"), rootless.home());
        cmd.args(["info", "--format", "{{.Host.Security.Rootless}}"])
            .current_dir("/");
        let what = format!("rootless podman as {} does not run", self.label);
        match cmd.output() {
            Ok(out) if out.status.success() && out.stdout.trim_ascii() == b"true" => None,
            Ok(out) => Some(format!(
                "{what}: podman info: {}{}",
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            )),
            Err(e) => Some(format!("{what}: cannot start podman info: {e}")),
        }
    }

    /// A command that runs `program` as this mode's user with a clean environment.
    pub fn command(&self, program: &Path, home: &Path) -> Command {
        let mut cmd = Command::new(program);
        cmd.env_clear()
            .env("HOME", home)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("SHELL", "/bin/sh")
            .env("LANG", "C.UTF-8")
            .env("USER", &self.label)
            .env("LOGNAME", &self.label)
            .env("AIRLOCK_BACKEND", self.backend)
            .stdin(Stdio::null());
        match &self.rootless {
            // The user's own podman: runtime dir, storage and config (`rootless.rs`).
            Some(rootless) => {
                cmd.envs(rootless.env());
            }
            // podman on these machines: runc and ulimits root can set (tests/common/podman.rs).
            None if self.backend == "container" => {
                cmd.env(
                    "CONTAINERS_CONF",
                    self._bin_dir.path().join("containers.conf"),
                );
            }
            None => {}
        }
        // Whatever the suite itself inherited (cargo's jobserver pipe, a terminal's fds) must
        // not reach airlock: every fd above stderr is closed at exec unless a case hands one
        // down on purpose (`inherit_fd`, which runs later).
        // SAFETY: close_range is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
                if libc::syscall(
                    libc::SYS_close_range,
                    3,
                    libc::c_uint::MAX,
                    CLOSE_RANGE_CLOEXEC,
                ) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        if let Some(user) = &self.user {
            let (uid, gid) = (user.uid, user.gid);
            // SAFETY: only async-signal-safe system calls run between fork and exec.
            unsafe {
                cmd.pre_exec(move || drop_privileges(uid, gid));
            }
        }
        cmd
    }
}

/// The binary under test: `AIRLOCK_ESCAPE_BIN` when set (to check the suite itself against a
/// deliberately broken sandbox, or another build), else the one Cargo built.
pub fn airlock_under_test() -> PathBuf {
    std::env::var_os("AIRLOCK_ESCAPE_BIN")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_airlock")))
}

/// Leaves root for good: no supplementary groups, then the gid, then the uid, then checks.
fn drop_privileges(uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: plain system calls on values, no allocation.
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0
            || libc::setgid(gid) != 0
            || libc::setuid(uid) != 0
        {
            return Err(io::Error::last_os_error());
        }
        if libc::setuid(0) == 0 || libc::geteuid() != uid {
            return Err(io::Error::from_raw_os_error(libc::EPERM));
        }
    }
    Ok(())
}

fn current_user_name(uid: u32) -> String {
    fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|p| {
            p.lines().find_map(|l| {
                let f: Vec<&str> = l.split(':').collect();
                (f.len() > 2 && f[2] == uid.to_string()).then(|| f[0].to_owned())
            })
        })
        .unwrap_or_else(|| format!("uid{uid}"))
}

/// Makes the child inherit `fd` as fd `target` (not close-on-exec), as a careless parent
/// process (a terminal, an IDE) might hand one down to airlock.
pub fn inherit_fd(cmd: &mut Command, fd: std::os::fd::RawFd, target: std::os::fd::RawFd) {
    // SAFETY: dup2 and fcntl are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            let rc = if fd == target {
                libc::fcntl(target, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, target)
            };
            if rc < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
