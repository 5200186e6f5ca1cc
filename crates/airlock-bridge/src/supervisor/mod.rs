//! The per-user supervisor that runs `airlock bridge daemon`: a systemd user unit on Linux, a
//! LaunchAgent on macOS. Each unit is rendered from one template; registering it runs the
//! supervisor's own CLI (`systemctl --user`, `launchctl`), resolved on PATH.

use std::path::{Path, PathBuf};

pub mod launchd;
pub mod systemd;

/// Which supervisor install uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SupervisorKind {
    Systemd,
    Launchd,
    /// No supervisor: install writes the state only; the user runs `airlock bridge daemon`.
    None,
}

impl SupervisorKind {
    /// This platform's supervisor.
    pub fn native() -> SupervisorKind {
        if cfg!(target_os = "macos") {
            SupervisorKind::Launchd
        } else {
            SupervisorKind::Systemd
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SupervisorKind::Systemd => "systemd",
            SupervisorKind::Launchd => "launchd",
            SupervisorKind::None => "none",
        }
    }
}

/// What the unit runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonCommand {
    /// The absolute path of the airlock binary.
    pub exe: PathBuf,
    /// The bridge state dir and the global config file, passed explicitly so the supervisor's
    /// environment (which lacks the shell's XDG variables) cannot send the daemon elsewhere.
    pub state_dir: PathBuf,
    pub config_file: PathBuf,
    /// The PATH the daemon looks launchers up on (the installing shell's).
    pub path: String,
}

impl DaemonCommand {
    /// The argv of the daemon.
    pub fn argv(&self) -> Vec<String> {
        vec![
            self.exe.to_string_lossy().into_owned(),
            "bridge".into(),
            "daemon".into(),
            "--state-dir".into(),
            self.state_dir.to_string_lossy().into_owned(),
            "--config".into(),
            self.config_file.to_string_lossy().into_owned(),
        ]
    }
}

/// Where a supervisor's unit file lives for a user with home `home`.
pub fn unit_path(kind: SupervisorKind, home: &Path, config_home: &Path) -> Option<PathBuf> {
    match kind {
        SupervisorKind::Systemd => Some(config_home.join("systemd/user").join(systemd::UNIT_NAME)),
        SupervisorKind::Launchd => Some(
            home.join("Library/LaunchAgents")
                .join(format!("{}.plist", launchd::LABEL)),
        ),
        SupervisorKind::None => None,
    }
}
