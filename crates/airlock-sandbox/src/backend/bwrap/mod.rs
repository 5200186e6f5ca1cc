//! The bwrap backend: bubblewrap builds the namespaces and the root from the spec
//! ([`render`]); airlock's stage inside does what native's init does after that
//! (`crate::native::stage`). The supervisor is native's, so the gates, the forwards, the limits
//! and the reports are the same.

pub mod render;
pub(crate) mod spawn;

use std::path::PathBuf;

use super::{Backend, BackendKind, Gates, LaunchError, Outcome};
use crate::spec::SandboxSpec;

/// bubblewrap at a resolved path, and the airlock binary the stage runs from.
pub struct Bwrap {
    program: PathBuf,
    stage: PathBuf,
}

impl Bwrap {
    pub fn new(program: PathBuf) -> Result<Bwrap, String> {
        let stage = std::env::current_exe()
            .map_err(|e| format!("cannot find the airlock binary for the bwrap stage: {e}"))?;
        Ok(Bwrap { program, stage })
    }

    /// `bwrap --version`'s answer, e.g. `bubblewrap 0.8.0` (for `airlock doctor`).
    pub fn version(program: &std::path::Path) -> Option<String> {
        let out = std::process::Command::new(program)
            .arg("--version")
            .env_clear()
            .current_dir("/")
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }
}

impl Backend for Bwrap {
    fn kind(&self) -> BackendKind {
        BackendKind::Bwrap
    }

    fn unsupported(&self, spec: &SandboxSpec) -> Vec<String> {
        render::unsupported(spec)
    }

    fn render(&self, spec: &SandboxSpec) -> Result<Vec<Vec<String>>, String> {
        let rendered = render::render(spec, &self.stage)?;
        let mut argv = vec![self.program.display().to_string()];
        argv.extend(
            rendered
                .args
                .iter()
                .map(|a| a.to_string_lossy().into_owned()),
        );
        Ok(vec![argv])
    }

    fn launch(&self, spec: &SandboxSpec, gates: &mut dyn Gates) -> Result<Outcome, LaunchError> {
        let rendered = render::render(spec, &self.stage).map_err(LaunchError::Plan)?;
        crate::native::launch::run_with(
            spec,
            gates,
            crate::native::launch::Start::Bwrap {
                program: &self.program,
                rendered,
            },
            None,
        )
    }
}
