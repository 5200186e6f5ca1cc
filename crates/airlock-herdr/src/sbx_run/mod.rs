//! `airlock run --backend sbx`: the spec run in a Docker Sandboxes microVM, through the herdr
//! plugin's sbx driver ([`crate::backend::sbx::SbxCli`]).
//!
//! A launch checks sbx first (its daemon answers, the user is signed in), then creates one VM for
//! the session (`sbx create`, [`plan`]), runs the spec's command in it with its exit code passed
//! through (`sbx exec`), and removes it (`sbx rm --force`). What the VM cannot honour is refused
//! before sbx is asked for anything ([`plan::unsupported`]); seccomp, Landlock and airlock's
//! namespaces are replaced by the VM's own kernel, a stronger wall (docs/backends.md).

mod launch;
pub mod plan;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::path::PathBuf;

use airlock_sandbox::SandboxSpec;
use airlock_sandbox::backend::{Backend, BackendKind, Gates, LaunchError, Outcome};
use airlock_sandbox::doctor::{Check, Status};

use crate::backend::SandboxBackend as _;
use crate::backend::sbx::{CALL_TIMEOUT, SLOW_TIMEOUT, SbxCli};
use crate::error::{ErrorKind, PluginError};

/// How to get sbx, for the errors that say it is missing.
pub const INSTALL_HINT: &str = "install Docker Sandboxes (Ubuntu: the docker-sbx apt package; \
     macOS: brew install docker/tap/sbx), then run sbx login";

/// The sbx backend: the resolved CLI and the variables the config carries into the VM.
pub struct SbxRun {
    cli: SbxCli,
    carried: BTreeSet<String>,
}

/// The sbx backend with `program` (the sbx CLI found on a trusted PATH entry; `None`: not
/// found). `carried` names the variables `[sandbox] env_passthrough` and
/// `[sandbox.environment]` set, the only ones besides airlock's marker, the terminal and the
/// locale that mean something inside the VM. Timeouts as the plugin's (`HERDR_SBX_TIMEOUT_MS`,
/// `HERDR_SBX_SLOW_TIMEOUT_MS`).
pub fn resolve(program: Option<PathBuf>, carried: BTreeSet<String>) -> Result<SbxRun, String> {
    let bin = program.ok_or_else(|| {
        format!(
            "the sbx backend needs the sbx CLI, which is not on PATH (outside the project and \
             home); {INSTALL_HINT}, or use --backend native"
        )
    })?;
    Ok(SbxRun {
        cli: SbxCli {
            bin,
            timeout: crate::proc::env_duration("HERDR_SBX_TIMEOUT_MS", CALL_TIMEOUT),
            slow_timeout: crate::proc::env_duration("HERDR_SBX_SLOW_TIMEOUT_MS", SLOW_TIMEOUT),
        },
        carried,
    })
}

impl SbxRun {
    /// Whether sbx can create a sandbox now: it answers, its daemon runs (`sbx version`, `sbx
    /// daemon status`) and the user is signed in (`sbx ls`, which needs both and never starts
    /// a sandbox). Returns the client version.
    pub fn check(&self) -> Result<String, String> {
        let status = self.cli.status().map_err(|e| explain(&e))?;
        self.cli.list().map_err(|e| explain(&e))?;
        Ok(status
            .client_version
            .unwrap_or_else(|| "(unknown version)".into()))
    }
}

/// A failed sbx call as one line: what to do first, then what sbx said.
fn explain(e: &PluginError) -> String {
    let said = e
        .output
        .as_deref()
        .and_then(|o| o.lines().find(|l| !l.trim().is_empty()))
        .map_or(String::new(), |l| format!(" (sbx said: {})", l.trim()));
    match e.kind {
        ErrorKind::Authentication => {
            format!("sbx is not signed in: run sbx login, then try again{said}")
        }
        ErrorKind::Daemon => format!(
            "the sbx daemon does not answer: {}; start it (sbx daemon start) or see sbx \
             diagnose{said}",
            e.message.trim_end_matches('.')
        ),
        _ => format!("{}{said}", e.message.trim_end_matches('.')),
    }
}

/// `airlock doctor`'s row for the sbx backend: where sbx is, its version, the daemon and the
/// sign-in, or how to install it.
pub fn doctor_row(sbx: Result<&SbxRun, String>) -> Check {
    let sbx = match sbx {
        Ok(sbx) => sbx,
        Err(e) => {
            return Check {
                name: "backend sbx",
                status: Status::Warn,
                detail: e,
                fix: Some(format!("{INSTALL_HINT} (only for --backend sbx)")),
            };
        }
    };
    let bin = sbx.cli.bin.display();
    match sbx.check() {
        Ok(version) => Check {
            name: "backend sbx",
            status: Status::Ok,
            detail: format!(
                "sbx {version} at {bin}, daemon running, signed in; launches need --network \
                 none or host and refuse hidden files (docs/backends.md)"
            ),
            fix: None,
        },
        Err(why) => Check {
            name: "backend sbx",
            status: Status::Warn,
            detail: format!("sbx at {bin}: {why}"),
            fix: Some("sbx login / sbx daemon start, as the line says".into()),
        },
    }
}

impl Backend for SbxRun {
    fn kind(&self) -> BackendKind {
        BackendKind::Sbx
    }

    fn unsupported(&self, spec: &SandboxSpec) -> Vec<String> {
        plan::unsupported(spec)
    }

    fn render(&self, spec: &SandboxSpec) -> Result<Vec<Vec<String>>, String> {
        let env_file = launch::env_file(spec);
        let session = plan::Session {
            pid: std::process::id(),
            tty: airlock_sandbox::backend::foreground::is_terminal(),
            env_file: &env_file,
        };
        let plan = plan::plan(spec, &self.carried, &session)?;
        let bin = self.cli.bin.display().to_string();
        Ok([plan.create, plan.exec, plan.rm]
            .into_iter()
            .map(|args| std::iter::once(bin.clone()).chain(args).collect())
            .collect())
    }

    fn launch(&self, spec: &SandboxSpec, gates: &mut dyn Gates) -> Result<Outcome, LaunchError> {
        launch::run(self, spec, gates)
    }
}
