//! Host-side git, always as a direct argv with a timeout (a hung fetch is a `network` failure).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{ErrorKind, PluginError, Result};
use crate::proc::{self, Captured};

/// The host-side git limit, the same as captured sbx calls.
pub fn timeout() -> Duration {
    proc::env_duration("HERDR_SBX_TIMEOUT_MS", crate::backend::sbx::CALL_TIMEOUT)
}

/// Runs `git -C dir args`.
pub fn run(dir: &Path, args: &[&str]) -> Result<Captured> {
    let mut full = vec!["-C".to_owned(), dir.display().to_string()];
    full.extend(args.iter().map(|s| (*s).to_owned()));
    let out = proc::run_captured(Path::new("git"), &full, &[], None, timeout())
        .map_err(|e| PluginError::startup(format!("Could not run git: {e}. Install git.")))?;
    if out.timed_out {
        return Err(PluginError::new(
            ErrorKind::Network,
            format!(
                "git {} did not finish in time and was killed.",
                args.join(" ")
            ),
        )
        .with_output(out.output()));
    }
    Ok(out)
}

/// `run`, with a non-zero exit as an error classified for git.
pub fn run_checked(dir: &Path, args: &[&str], step: &str) -> Result<Captured> {
    let out = run(dir, args)?;
    if !out.success() {
        let output = out.output();
        let lower = output.to_ascii_lowercase();
        let kind = if [
            "not a git repository",
            "no such remote",
            "does not appear to be a git repository",
        ]
        .iter()
        .any(|p| lower.contains(p))
        {
            ErrorKind::NotFound
        } else if [
            "connection refused",
            "could not resolve",
            "network is unreachable",
            "timed out",
            "could not read from remote",
        ]
        .iter()
        .any(|p| lower.contains(p))
        {
            ErrorKind::Network
        } else {
            ErrorKind::Unknown
        };
        return Err(PluginError::new(
            kind,
            format!(
                "git {} failed while {step}.",
                args.first().copied().unwrap_or("")
            ),
        )
        .with_output(output));
    }
    Ok(out)
}

/// The top level of the repository containing `dir`, if any.
pub fn toplevel(dir: &Path) -> Option<PathBuf> {
    let out = run(dir, &["rev-parse", "--show-toplevel"]).ok()?;
    out.success()
        .then(|| PathBuf::from(out.stdout.trim()))
        .filter(|p| p.is_absolute())
}
