//! One sbx launch: check sbx, write the env file, create the VM, run the command in the
//! foreground, remove the VM whatever happened after it was created.

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use airlock_sandbox::SandboxSpec;
use airlock_sandbox::backend::{Gates, LaunchError, Outcome, foreground};

use super::{SbxRun, explain, plan};

/// The session's env file: `<state_root>/sbx/<pid>/env`. The state root is host-only (never
/// mounted), so values stay out of `ps` and out of the sandbox's reach.
pub(super) fn env_file(spec: &SandboxSpec) -> PathBuf {
    spec.state_root
        .join("sbx")
        .join(std::process::id().to_string())
        .join("env")
}

pub(super) fn run(
    b: &SbxRun,
    spec: &SandboxSpec,
    gates: &mut dyn Gates,
) -> Result<Outcome, LaunchError> {
    let file = env_file(spec);
    let session = plan::Session {
        pid: std::process::id(),
        tty: foreground::is_terminal(),
        env_file: &file,
    };
    // The gates may have changed the spec since it was checked: check it again.
    let plan = plan::plan(spec, &b.carried, &session).map_err(LaunchError::Plan)?;
    b.check()
        .map_err(|why| LaunchError::Setup(format!("{why}; nothing was created")))?;
    let dir = file.parent().expect("the env file is in a directory");
    write_env(&file, &plan.env)
        .map_err(|e| LaunchError::Setup(format!("cannot write {}: {e}", file.display())))?;
    let created = b
        .cli
        .run_checked(&plan.create, "creating the sandbox", true);
    // sbx has read it; the values live in the VM now, not on the host's disk.
    let _ = std::fs::remove_dir_all(dir);
    created.map_err(|e| LaunchError::Setup(explain(&e)))?;
    let outcome = exec(b, &plan, gates);
    if let Err(e) = b.cli.run_checked(&plan.rm, "removing the sandbox", false) {
        eprintln!(
            "airlock: warning: the microVM {} is still there ({}); sbx rm --force {} removes it",
            plan.name,
            explain(&e),
            plan.name
        );
    }
    outcome
}

/// `KEY=VALUE` lines in a fresh 0600 file, in a 0700 directory (no link followed).
fn write_env(file: &Path, env: &[(String, String)]) -> std::io::Result<()> {
    let dir = file.parent().expect("the env file is in a directory");
    let _ = std::fs::remove_dir_all(dir);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(file)?;
    for (k, v) in env {
        writeln!(out, "{k}={v}")?;
    }
    Ok(())
}

/// `sbx exec` attached to this process's stdio, in `/`, waited for in the foreground.
fn exec(b: &SbxRun, plan: &plan::Plan, gates: &mut dyn Gates) -> Result<Outcome, LaunchError> {
    let mut command = std::process::Command::new(&b.cli.bin);
    command.args(&plan.exec).current_dir("/");
    let what = b.cli.bin.display().to_string();
    let status = foreground::run(&mut command, &what, &mut |_| {
        gates.started().map_err(LaunchError::Setup)
    })?;
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => Ok(Outcome::Exited(code)),
        (None, Some(signal)) => Ok(Outcome::Signaled(signal)),
        (None, None) => Err(LaunchError::Lost),
    }
}
