//! `airlock bridge install` and `airlock bridge uninstall` (`status` is in [`crate::status`]).
//!
//! install and uninstall refuse to run as root before touching anything: both supervisors are
//! per-user, root has neither, and a sudo run would leave root-owned state in the user's home.

use std::io;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::daemon::{self, write_atomic};
use crate::launcher;
use crate::paths::BridgePaths;
use crate::supervisor::{DaemonCommand, SupervisorKind, launchd, systemd, unit_path};
use crate::token::{Token, TokenError};

/// Why install, uninstall or status failed. Each names the value and what to do.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error(
        "refusing to run `airlock bridge {verb}` as root: the bridge is per-user (a systemd user unit or \
         a LaunchAgent) and root has no user session, so this would only leave root-owned files behind. \
         {}", rerun_hint(.sudo_user.as_deref())
    )]
    Root {
        verb: &'static str,
        sudo_user: Option<String>,
    },
    #[error("{0}")]
    Token(#[from] TokenError),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("{0}")]
    Daemon(#[from] daemon::DaemonError),
    #[error("`{command}` failed: {detail}. {hint}")]
    Supervisor {
        command: String,
        detail: String,
        hint: String,
    },
    #[error(
        "bridge state dir {dir} was not removed ({reason}) and the token {token} is still there; \
         a later install would reuse it. Remove {dir} yourself (close the sandboxes that mount it first)"
    )]
    TokenSurvived {
        dir: PathBuf,
        token: PathBuf,
        reason: String,
    },
}

fn rerun_hint(sudo_user: Option<&str>) -> String {
    match sudo_user {
        Some(user) if !user.is_empty() && user != "root" => {
            format!("Re-run it as {user}, without sudo.")
        }
        _ => "Re-run it as the user whose sandboxes should use it, without sudo.".into(),
    }
}

fn io_error(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> InstallError + use<> {
    let path = path.to_owned();
    move |source| InstallError::Io { what, path, source }
}

/// Refuses an effective uid of 0, naming `$SUDO_USER` as the account to use.
pub fn ensure_user_context(
    verb: &'static str,
    euid: u32,
    sudo_user: Option<String>,
) -> Result<(), InstallError> {
    if euid == 0 {
        return Err(InstallError::Root { verb, sudo_user });
    }
    Ok(())
}

/// Everything install, status and uninstall need to know about the user.
#[derive(Debug, Clone)]
pub struct InstallContext {
    pub bridge: BridgePaths,
    pub supervisor: SupervisorKind,
    pub home: PathBuf,
    pub config_home: PathBuf,
    pub config_file: PathBuf,
    /// The airlock binary the unit runs.
    pub exe: PathBuf,
    /// The PATH recorded in the unit (the daemon finds launchers on it).
    pub path_env: String,
    pub uid: u32,
}

impl InstallContext {
    pub(crate) fn unit(&self) -> Option<PathBuf> {
        unit_path(self.supervisor, &self.home, &self.config_home)
    }

    fn daemon_command(&self) -> DaemonCommand {
        DaemonCommand {
            exe: self.exe.clone(),
            state_dir: self.bridge.dir.clone(),
            config_file: self.config_file.clone(),
            path: self.path_env.clone(),
        }
    }

    fn log_file(&self) -> PathBuf {
        self.home.join("Library/Logs/airlock-bridge.log")
    }
}

/// What install did, one line each.
#[derive(Debug, Default)]
pub struct Report {
    pub lines: Vec<String>,
    pub warnings: Vec<String>,
}

/// Creates the state dir and token (kept when valid), the sandbox gitconfig, the unit, and starts it.
pub fn install(ctx: &InstallContext) -> Result<Report, InstallError> {
    let mut report = Report::default();
    let dir = &ctx.bridge.dir;
    make_private_dir(dir)?;
    make_private_dir(&ctx.bridge.run_dir())?;
    match Token::read(&ctx.bridge.token()) {
        Ok(_) => report
            .lines
            .push(format!("token: kept {}", ctx.bridge.token().display())),
        Err(TokenError::Missing { .. }) => {
            Token::generate()
                .map_err(io_error("cannot generate a token for", dir))?
                .write(&ctx.bridge.token())?;
            report
                .lines
                .push(format!("token: created {}", ctx.bridge.token().display()));
        }
        Err(e) => return Err(e.into()),
    }
    if let Some(warning) = host_credential_helper_warning() {
        report.warnings.push(warning);
    }
    let Some(unit) = ctx.unit() else {
        report.lines.push(
            "supervisor: none; start the daemon yourself with `airlock bridge daemon`".into(),
        );
        return Ok(report);
    };
    let text = match ctx.supervisor {
        SupervisorKind::Launchd => launchd::render(&ctx.daemon_command(), &ctx.log_file()),
        _ => systemd::render(&ctx.daemon_command()),
    };
    if let Some(parent) = unit.parent() {
        std::fs::create_dir_all(parent).map_err(io_error("cannot create", parent))?;
    }
    write_atomic(&unit, text.as_bytes(), 0o644).map_err(io_error("cannot write", &unit))?;
    report.lines.push(format!("unit: wrote {}", unit.display()));
    match ctx.supervisor {
        SupervisorKind::Systemd => {
            let hint = install_hint("systemctl");
            supervise("systemctl", systemd::DAEMON_RELOAD, &hint)?;
            supervise("systemctl", systemd::ENABLE_NOW, &hint)?;
            report.lines.push(format!(
                "started: systemctl --user enable --now {}",
                systemd::UNIT_NAME
            ));
        }
        SupervisorKind::Launchd => {
            // A unit loaded by an earlier install is unloaded first, so bootstrap picks up the new file.
            let _ = run_tool("launchctl", &["bootout", &launchd::service(ctx.uid)]);
            let plist = unit.to_string_lossy().into_owned();
            supervise(
                "launchctl",
                &["bootstrap", &launchd::domain(ctx.uid), &plist],
                &install_hint("launchctl"),
            )?;
            report.lines.push(format!(
                "started: launchctl bootstrap {}",
                launchd::domain(ctx.uid)
            ));
        }
        SupervisorKind::None => {}
    }
    Ok(report)
}

fn make_private_dir(dir: &Path) -> Result<(), InstallError> {
    std::fs::create_dir_all(dir).map_err(io_error("cannot create", dir))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(io_error("cannot set mode 0700 on", dir))
}

/// Runs a supervisor CLI step; a failure says how to recover (`hint`).
fn supervise(tool: &str, args: &[&str], hint: &str) -> Result<(), InstallError> {
    let command = format!("{tool} {}", args.join(" "));
    let detail = match run_tool(tool, args) {
        Ok(out) if out.success => return Ok(()),
        Ok(out) => out.summary(),
        Err(detail) => detail,
    };
    Err(InstallError::Supervisor {
        command,
        detail,
        hint: hint.to_owned(),
    })
}

fn install_hint(tool: &str) -> String {
    format!(
        "The state and unit are written; fix {tool} and re-run `airlock bridge install`, or run \
         `airlock bridge install --supervisor none` and start `airlock bridge daemon` yourself"
    )
}

fn uninstall_hint(tool: &str, unit: &Path) -> String {
    format!(
        "Nothing was removed and the daemon may still run; fix {tool} and re-run \
         `airlock bridge uninstall`, or stop the daemon yourself and remove {} and the state dir",
        unit.display()
    )
}

/// The result of one supervisor CLI call.
#[derive(Debug, Clone)]
pub struct ToolOutput {
    pub success: bool,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl ToolOutput {
    fn summary(&self) -> String {
        let text = if self.stderr.trim().is_empty() {
            self.stdout.trim()
        } else {
            self.stderr.trim()
        };
        let code = self
            .code
            .map_or("a signal".to_owned(), |c| format!("status {c}"));
        if text.is_empty() {
            format!("exited with {code}")
        } else {
            format!("exited with {code}: {text}")
        }
    }
}

pub(crate) fn run_tool(tool: &str, args: &[&str]) -> Result<ToolOutput, String> {
    let program = launcher::resolve(tool, std::env::var_os("PATH").as_deref())
        .ok_or_else(|| format!("{tool} is not on PATH"))?;
    let out = Command::new(&program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    Ok(ToolOutput {
        success: out.status.success(),
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// A warning when the host's git has no credential helper (then /credential finds nothing).
fn host_credential_helper_warning() -> Option<String> {
    let out = run_tool("git", &["config", "--get-all", "credential.helper"]).ok()?;
    out.stdout.trim().is_empty().then(|| {
        "the host's git has no credential.helper configured, so sandboxes' `git` will get no \
         credentials from the bridge; configure one (e.g. osxkeychain, libsecret, manager)"
            .to_owned()
    })
}

/// What uninstall did.
#[derive(Debug, Default)]
pub struct UninstallReport {
    pub lines: Vec<String>,
    pub warnings: Vec<String>,
    /// The state dir could not be removed, but the token is gone (warn, exit 0).
    pub state_left: bool,
}

/// Stops and removes the unit, then removes the state dir (token first).
pub fn uninstall(ctx: &InstallContext) -> Result<UninstallReport, InstallError> {
    let mut report = UninstallReport::default();
    if let Some(unit) = ctx.unit()
        && unit.exists()
    {
        match ctx.supervisor {
            SupervisorKind::Systemd => {
                let hint = uninstall_hint("systemctl", &unit);
                supervise("systemctl", systemd::DISABLE_NOW, &hint)?;
                std::fs::remove_file(&unit).map_err(io_error("cannot remove", &unit))?;
                supervise("systemctl", systemd::DAEMON_RELOAD, &hint)?;
            }
            SupervisorKind::Launchd => {
                // bootout fails when the agent is not loaded, which is the state we want anyway.
                let _ = run_tool("launchctl", &["bootout", &launchd::service(ctx.uid)]);
                std::fs::remove_file(&unit).map_err(io_error("cannot remove", &unit))?;
            }
            SupervisorKind::None => {}
        }
        report
            .lines
            .push(format!("unit: removed {}", unit.display()));
    }
    if let Some(pid) = read_pid(&ctx.bridge)
        && process_alive(pid)
        && ctx.unit().is_none_or(|u| !u.exists())
    {
        report.warnings.push(format!(
            "a bridge daemon (pid {pid}) not started by a supervisor is still running; stop it yourself"
        ));
    }
    let dir = &ctx.bridge.dir;
    if !dir.exists() {
        report.lines.push("state: nothing to remove".into());
        return Ok(report);
    }
    // The token goes first: whatever else survives, a later install must not find the old one.
    let token_result = match std::fs::remove_file(ctx.bridge.token()) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    };
    let removed = token_result.and_then(|()| std::fs::remove_dir_all(dir));
    match removed {
        Ok(()) => report
            .lines
            .push(format!("state: removed {}", dir.display())),
        Err(e) => {
            let token = ctx.bridge.token();
            match std::fs::symlink_metadata(&token) {
                Err(gone) if gone.kind() == io::ErrorKind::NotFound => {
                    report.warnings.push(format!(
                        "bridge state dir {} not removed: {e}; close any sandboxes that mount it and \
                         re-run, or remove it once they are gone",
                        dir.display()
                    ));
                    report.state_left = true;
                }
                _ => {
                    return Err(InstallError::TokenSurvived {
                        dir: dir.clone(),
                        token,
                        reason: e.to_string(),
                    });
                }
            }
        }
    }
    Ok(report)
}

pub(crate) fn read_pid(paths: &BridgePaths) -> Option<u32> {
    std::fs::read_to_string(paths.pid())
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    unsafe { libc::kill(pid, 0) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_refused_naming_the_sudo_user() {
        let err = ensure_user_context("install", 0, Some("alice".into())).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("as root") && msg.contains("Re-run it as alice, without sudo"),
            "{msg}"
        );
        let msg = ensure_user_context("uninstall", 0, None)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("without sudo"), "{msg}");
        assert!(ensure_user_context("install", 1000, Some("alice".into())).is_ok());
    }
}
