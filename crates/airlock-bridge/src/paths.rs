//! Where the bridge keeps its state on the host, and where a sandbox finds it.

use std::path::{Path, PathBuf};

use airlock_config::XdgPaths;

/// Where the bridge state dir is mounted (read-only) inside every sandbox.
pub const SANDBOX_STATE_DIR: &str = "/run/airlock/bridge";
/// The read-only directory of shim names inside every sandbox, first on `PATH`.
pub const SANDBOX_SHIM_DIR: &str = "/run/airlock/bin";
/// Overrides [`SANDBOX_STATE_DIR`] for a shim (tests, and running a shim on the host by hand).
pub const STATE_DIR_ENV: &str = "AIRLOCK_BRIDGE_DIR";
/// The host a shim reaches the TCP listener on (default `127.0.0.1`; container backends on Docker
/// Desktop set `host.docker.internal`).
pub const TCP_HOST_ENV: &str = "AIRLOCK_BRIDGE_HOST";
/// The TCP port the daemon tries first.
pub const PREFERRED_PORT: u16 = 17654;

/// The files of the bridge state dir (`~/.local/state/airlock/bridge`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BridgePaths {
    /// The state dir itself (0700).
    pub dir: PathBuf,
}

impl BridgePaths {
    /// The state dir under airlock's XDG state dir.
    pub fn from_xdg(paths: &XdgPaths) -> BridgePaths {
        BridgePaths {
            dir: paths.state_dir().join("bridge"),
        }
    }

    /// A state dir at an explicit path (inside a sandbox: [`SANDBOX_STATE_DIR`]).
    pub fn at(dir: impl Into<PathBuf>) -> BridgePaths {
        BridgePaths { dir: dir.into() }
    }

    /// The bearer token: 64 hex chars and a newline, 0600.
    pub fn token(&self) -> PathBuf {
        self.dir.join("token")
    }

    /// The TCP port the daemon listens on (0644), written at every start.
    pub fn port(&self) -> PathBuf {
        self.dir.join("port")
    }

    /// The daemon's pid (0644).
    pub fn pid(&self) -> PathBuf {
        self.dir.join("pid")
    }

    /// Sound files on their way to the player, never mounted into a sandbox; emptied when the
    /// daemon starts (a killed daemon's reaper could not remove its last ones).
    pub fn sounds(&self) -> PathBuf {
        self.dir.join("sounds")
    }

    /// The append-only audit log (0600), never mounted into a sandbox.
    pub fn log(&self) -> PathBuf {
        self.dir.join("log")
    }

    /// The socket dir (0700), mounted read-only into sandboxes (connect() needs no write access, and
    /// a writable one would let a sandbox put its own socket in the daemon's place).
    pub fn run_dir(&self) -> PathBuf {
        self.dir.join("run")
    }

    /// The session records of running sandboxes (0700; never mounted into a sandbox).
    pub fn sessions_dir(&self) -> PathBuf {
        self.dir.join("sessions")
    }

    /// The unix socket (0600).
    pub fn socket(&self) -> PathBuf {
        self.run_dir().join("bridge.sock")
    }
}

/// Whether `path` fits in a `sockaddr_un` (107 bytes and a NUL on Linux, 103 on macOS).
pub fn fits_sun_path(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: an all-zero sockaddr_un is a valid value.
    let addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    path.as_os_str().as_bytes().len() < addr.sun_path.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_dir_layout() {
        let p = BridgePaths::at("/s/airlock/bridge");
        assert_eq!(p.token(), Path::new("/s/airlock/bridge/token"));
        assert_eq!(p.socket(), Path::new("/s/airlock/bridge/run/bridge.sock"));
    }

    #[test]
    fn long_socket_paths_do_not_fit() {
        assert!(fits_sun_path(Path::new(
            "/run/airlock/bridge/run/bridge.sock"
        )));
        let long = format!("/{}/bridge.sock", "x".repeat(120));
        assert!(!fits_sun_path(Path::new(&long)));
    }
}
