//! Running host programs for the routes: resolved to an absolute path first, exec'd directly with an
//! argv (never a shell), in their own process group, killed as a group at their deadline.

use std::ffi::{OsStr, OsString};
use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::process::{Child, Command};

/// How long output is still read after the program exited (a daemon it started may keep the pipe).
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// Why a host program could not do its job. These are infrastructure failures (502).
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("{0} is not installed on the host (not found on the bridge daemon's PATH)")]
    NotFound(String),
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: PathBuf,
        source: std::io::Error,
    },
    #[error("{program} did not finish within {}s and was killed", timeout.as_secs())]
    Timeout { program: PathBuf, timeout: Duration },
    #[error("{program} exited with status {exit}{}", stderr_suffix(stderr))]
    Failed {
        program: PathBuf,
        exit: i32,
        stderr: String,
    },
    #[error("cannot talk to {program}: {source}")]
    Io {
        program: PathBuf,
        source: std::io::Error,
    },
}

fn stderr_suffix(stderr: &str) -> String {
    let trimmed = stderr.trim();
    if trimmed.is_empty() {
        String::new()
    } else {
        format!(": {trimmed}")
    }
}

/// Finds `program` the way exec would, but only in absolute PATH entries, and returns the absolute
/// path of an executable regular file. An absolute `program` is checked as it is.
pub fn resolve(program: &str, path_var: Option<&OsStr>) -> Option<PathBuf> {
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let p = Path::new(program);
        return (p.is_absolute() && executable(p)).then(|| p.to_owned());
    }
    std::env::split_paths(path_var?)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|p| executable(p))
}

/// [`resolve`] against this process's PATH, as a [`LaunchError`] when missing.
pub fn find(program: &str) -> Result<PathBuf, LaunchError> {
    resolve(program, std::env::var_os("PATH").as_deref())
        .ok_or_else(|| LaunchError::NotFound(program.to_owned()))
}

/// What a finished program left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    pub exit: i32,
    /// Captured output, cut at the caller's cap.
    pub output: Vec<u8>,
}

/// How to run one program.
pub struct Invocation<'a> {
    pub program: &'a Path,
    pub args: &'a [OsString],
    pub env: &'a [(&'a str, &'a str)],
    /// Bytes written to stdin, then closed; None: stdin is /dev/null.
    pub stdin: Option<&'a [u8]>,
    pub timeout: Duration,
    /// How many output bytes to keep.
    pub output_cap: usize,
    /// Capture stderr into the same stream as stdout (in order); otherwise stderr is discarded.
    pub merge_stderr: bool,
}

/// The daemon's variables a host program gets, and no others: what a browser, an editor, a sound
/// player or git needs to find the user's session and settings. Never the daemon's whole
/// environment (askpass helpers, tokens, `GIT_*` of the shell that started it by hand).
const HOST_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_DATA_DIRS",
    "XDG_CONFIG_DIRS",
    "XDG_CURRENT_DESKTOP",
    "XDG_SESSION_TYPE",
    "DBUS_SESSION_BUS_ADDRESS",
    "BROWSER",
    "PULSE_SERVER",
    "TMPDIR",
];

/// The environment a host program starts with: the [`HOST_ENV`] variables this process has.
pub fn host_env() -> impl Iterator<Item = (&'static str, OsString)> {
    HOST_ENV
        .iter()
        .filter_map(|name| Some((*name, std::env::var_os(name)?)))
}

/// A host program's command: started in `/` (never the daemon's working directory, which may be a
/// project a sandbox can write, with a `.git` of its making), with a rebuilt environment.
fn command(program: &Path, args: &[OsString], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir("/")
        .env_clear()
        .envs(host_env())
        .envs(env.iter().copied())
        .process_group(0)
        .kill_on_drop(true);
    cmd
}

/// Runs a launcher (opener, editor) that should exit 0 quickly: a non-zero exit is a failure
/// carrying the launcher's stderr.
pub async fn launch(
    program: &Path,
    args: &[OsString],
    timeout: Duration,
) -> Result<(), LaunchError> {
    let mut cmd = command(program, args, &[]);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|source| LaunchError::Spawn {
        program: program.to_owned(),
        source,
    })?;
    drop(cmd);
    let stderr = child.stderr.take();
    let (status, stderr) = wait_capturing(program, &mut child, stderr, timeout, 4096).await?;
    if status == 0 {
        Ok(())
    } else {
        Err(LaunchError::Failed {
            program: program.to_owned(),
            exit: status,
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        })
    }
}

/// Runs a program to completion and returns its exit code and output; a non-zero exit is data.
pub async fn run(inv: Invocation<'_>) -> Result<Finished, LaunchError> {
    let io_err = |source| LaunchError::Io {
        program: inv.program.to_owned(),
        source,
    };
    let mut cmd = command(inv.program, inv.args, inv.env);
    cmd.stdin(if inv.stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let reader: Option<OwnedFd> = if inv.merge_stderr {
        let (r, w) = std::io::pipe().map_err(io_err)?;
        let w2 = w.try_clone().map_err(io_err)?;
        cmd.stdout(w).stderr(w2);
        Some(r.into())
    } else {
        cmd.stdout(Stdio::piped()).stderr(Stdio::null());
        None
    };
    let mut child = cmd.spawn().map_err(|source| LaunchError::Spawn {
        program: inv.program.to_owned(),
        source,
    })?;
    // Closes this process's copies of the pipe's write end, so EOF comes when the program exits.
    drop(cmd);
    if let (Some(input), Some(mut stdin)) = (inv.stdin, child.stdin.take()) {
        let input = input.to_vec();
        tokio::spawn(async move {
            let _ = stdin.write_all(&input).await;
        });
    }
    let (exit, output) = match reader {
        Some(fd) => {
            let rx = tokio::net::unix::pipe::Receiver::from_owned_fd(fd).map_err(io_err)?;
            wait_capturing(
                inv.program,
                &mut child,
                Some(rx),
                inv.timeout,
                inv.output_cap,
            )
            .await?
        }
        None => {
            let out = child.stdout.take();
            wait_capturing(inv.program, &mut child, out, inv.timeout, inv.output_cap).await?
        }
    };
    Ok(Finished { exit, output })
}

/// Waits for `child` within `timeout` while reading `stream` (up to `cap` bytes kept).
async fn wait_capturing<R: AsyncRead + Unpin + Send + 'static>(
    program: &Path,
    child: &mut Child,
    stream: Option<R>,
    timeout: Duration,
    cap: usize,
) -> Result<(i32, Vec<u8>), LaunchError> {
    let reader = stream.map(|mut stream| {
        tokio::spawn(async move {
            let mut kept = Vec::new();
            let mut chunk = [0u8; 8192];
            loop {
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let room = cap.saturating_sub(kept.len());
                        kept.extend_from_slice(&chunk[..n.min(room)]);
                    }
                }
            }
            kept
        })
    });
    let status = match tokio::time::timeout(timeout, child.wait()).await {
        Ok(Ok(status)) => status,
        Ok(Err(source)) => {
            return Err(LaunchError::Io {
                program: program.to_owned(),
                source,
            });
        }
        Err(_) => {
            kill_group(child);
            let _ = child.wait().await;
            return Err(LaunchError::Timeout {
                program: program.to_owned(),
                timeout,
            });
        }
    };
    let output = match reader {
        Some(mut task) => match tokio::time::timeout(DRAIN_GRACE, &mut task).await {
            Ok(Ok(kept)) => kept,
            _ => {
                task.abort();
                Vec::new()
            }
        },
        None => Vec::new(),
    };
    Ok((exit_code(status), output))
}

/// Kills the program's whole process group (it was started as the group leader).
pub fn kill_group(child: &Child) {
    if let Some(pid) = child.id() {
        // SAFETY: plain kill(2) on the group this daemon created for the child.
        unsafe {
            libc::kill(-(pid as libc::pid_t), libc::SIGKILL);
        }
    }
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt as _;
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// Starts `program` detached from the request: it runs up to `deadline`, then its group is killed;
/// `cleanup` runs once it is gone either way.
pub fn spawn_detached(
    program: &Path,
    args: &[OsString],
    deadline: Duration,
    cleanup: impl FnOnce() + Send + 'static,
) -> Result<(), LaunchError> {
    let mut cmd = command(program, args, &[]);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().map_err(|source| LaunchError::Spawn {
        program: program.to_owned(),
        source,
    })?;
    tokio::spawn(async move {
        if tokio::time::timeout(deadline, child.wait()).await.is_err() {
            kill_group(&child);
            let _ = child.wait().await;
        }
        cleanup();
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_skips_relative_entries_and_non_executables() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("tool");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        let path = std::env::join_paths(["relative/dir".as_ref(), dir.path()]).unwrap();
        assert_eq!(resolve("tool", Some(&path)), None, "not executable yet");
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(resolve("tool", Some(&path)), Some(exe.clone()));
        assert_eq!(resolve(exe.to_str().unwrap(), None), Some(exe));
        assert_eq!(resolve("rel/tool", Some(&path)), None);
        assert_eq!(resolve("missing", Some(&path)), None);
    }
}
