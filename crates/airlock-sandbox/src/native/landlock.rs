//! Landlock: the second layer on writes. Even if a mount were wrong, the workload can write only beneath
//! the spec's writable paths; everything else stays readable and executable.
//!
//! Landlock does not cover connect() to unix sockets or UDP on the kernels we target: the mount and
//! network namespaces do that.

use std::io;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, BitFlags, PathBeneath, PathFd, PathFdError, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetError, RulesetStatus,
};

/// The newest Landlock ABI whose rights we have tested. Newer ABIs add rights (V9 handles unix-socket
/// connect) that would silently change what the agent may do; raise this after testing them.
const TESTED_ABI: ABI = ABI::V7;

// include/uapi/linux/landlock.h; not exported by libc.
const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;

/// What `restrict_writes` achieved on this kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LandlockOutcome {
    /// Every requested right is enforced; `abi` is the kernel's Landlock ABI version.
    Enforced { abi: u32 },
    /// The kernel's Landlock is older than the tested ABI: some rights (e.g. truncate, device ioctls)
    /// are not restricted.
    PartiallyEnforced,
    /// Landlock is not built into this kernel or not enabled at boot (`lsm=`); nothing was restricted.
    NotSupported,
}

/// Why the Landlock ruleset could not be built or applied.
#[derive(Debug, thiserror::Error)]
pub enum LandlockError {
    /// A writable path exists but could not be opened to anchor a rule.
    #[error(
        "cannot open writable path {path} for a Landlock rule: {source}; check that it is readable, or remove it from the writable paths"
    )]
    OpenPath {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The kernel refused the ruleset.
    #[error(
        "cannot apply the Landlock ruleset: {0}; run `airlock doctor` to check Landlock support"
    )]
    Ruleset(#[from] RulesetError),
}

/// The kernel's Landlock ABI version, or `None` if Landlock is not built in or not enabled.
pub fn abi() -> Option<u32> {
    // SAFETY: with the VERSION flag the kernel reads neither the (null) attribute nor its size.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(rc).ok().filter(|&version| version > 0)
}

/// Restricts the calling process (and its future children) so that it can write only beneath
/// `writable`, and read and execute anywhere.
///
/// Writable paths that do not exist are skipped. Include the sandbox's `/dev`: opening a terminal or
/// `/dev/null` for writing is a write. Runs in the workload after `pivot_root`, before seccomp and
/// `execve`; it allocates, which is fine there because the process is single-threaded.
pub fn restrict_writes(writable: &[PathBuf]) -> Result<LandlockOutcome, LandlockError> {
    let all = AccessFs::from_all(TESTED_ABI);
    let mut ruleset =
        Ruleset::default()
            .handle_access(all)?
            .create()?
            .add_rule(PathBeneath::new(
                open(Path::new("/"))?,
                AccessFs::from_read(TESTED_ABI),
            ))?;
    // IoctlDev (ABI 5) stays handled: device ioctls work only beneath writable paths, which include the
    // sandbox's private /dev, so ttys work; TIOCSTI is seccomp's job. Inherited fds keep all rights.
    for path in writable {
        ruleset = add_existing(ruleset, path, all)?;
    }
    let status = ruleset.restrict_self()?;
    Ok(match status.ruleset {
        RulesetStatus::FullyEnforced => match abi() {
            Some(abi) => LandlockOutcome::Enforced { abi },
            None => LandlockOutcome::PartiallyEnforced,
        },
        RulesetStatus::PartiallyEnforced => LandlockOutcome::PartiallyEnforced,
        RulesetStatus::NotEnforced => LandlockOutcome::NotSupported,
    })
}

/// Adds a rule granting `access` beneath `path`, if it exists. A file gets only the rights that make
/// sense for a file, so that it does not downgrade the whole ruleset to "partially enforced".
fn add_existing(
    ruleset: RulesetCreated,
    path: &Path,
    access: BitFlags<AccessFs>,
) -> Result<RulesetCreated, LandlockError> {
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(e) if is_missing(&e) => return Ok(ruleset),
        Err(source) => {
            return Err(LandlockError::OpenPath {
                path: path.to_owned(),
                source,
            });
        }
    };
    let access = if metadata.is_dir() {
        access
    } else {
        access & AccessFs::from_file(TESTED_ABI)
    };
    if access.is_empty() {
        return Ok(ruleset);
    }
    Ok(ruleset.add_rule(PathBeneath::new(open(path)?, access))?)
}

fn is_missing(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

fn open(path: &Path) -> Result<PathFd, LandlockError> {
    PathFd::new(path).map_err(|e| {
        let PathFdError::OpenCall { source, .. } = e else {
            return LandlockError::OpenPath {
                path: path.to_owned(),
                source: io::Error::other(e.to_string()),
            };
        };
        LandlockError::OpenPath {
            path: path.to_owned(),
            source,
        }
    })
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::super::forked::assert_ok;
    use super::*;

    #[test]
    fn writes_are_confined_to_writable_paths() {
        let Some(kernel_abi) = abi() else {
            println!("skipped: Landlock is not supported or not enabled on this kernel");
            return;
        };
        let writable = tempfile::tempdir().expect("tempdir");
        let elsewhere = tempfile::tempdir().expect("tempdir");
        let lone_file = elsewhere.path().join("lone-writable-file");
        std::fs::write(&lone_file, b"").expect("create lone file");
        let readable = elsewhere.path().join("readable");
        std::fs::write(&readable, b"hello").expect("create readable file");
        let paths = vec![
            writable.path().to_owned(),
            PathBuf::from("/dev"),
            lone_file.clone(),
            PathBuf::from("/nonexistent-airlock-landlock-test"),
        ];

        assert_ok(|| {
            let outcome = restrict_writes(&paths).map_err(|e| e.to_string())?;
            let expected = if kernel_abi >= 7 {
                LandlockOutcome::Enforced { abi: kernel_abi }
            } else {
                LandlockOutcome::PartiallyEnforced
            };
            if outcome != expected {
                return Err(format!("outcome {outcome:?}, expected {expected:?}"));
            }
            std::fs::write(writable.path().join("inside"), b"ok")
                .map_err(|e| format!("write inside the writable dir: {e}"))?;
            std::fs::OpenOptions::new()
                .append(true)
                .open(&lone_file)
                .and_then(|mut f| f.write_all(b"ok"))
                .map_err(|e| format!("write to the writable file: {e}"))?;
            match std::fs::write(elsewhere.path().join("outside"), b"no") {
                Err(e) if e.raw_os_error() == Some(libc::EACCES) => {}
                other => return Err(format!("write outside: {other:?}, expected EACCES")),
            }
            let text = std::fs::read_to_string(&readable)
                .map_err(|e| format!("read outside the writable paths: {e}"))?;
            if text != "hello" {
                return Err(format!("read back {text:?}"));
            }
            terminal_ioctl_works()
        });
    }

    #[test]
    fn devices_need_a_writable_dev() {
        if abi().is_none() {
            println!("skipped: Landlock is not supported or not enabled on this kernel");
            return;
        }
        assert_ok(|| {
            restrict_writes(&[]).map_err(|e| e.to_string())?;
            match std::fs::OpenOptions::new().write(true).open("/dev/null") {
                Err(e) if e.raw_os_error() == Some(libc::EACCES) => Ok(()),
                other => Err(format!(
                    "open /dev/null for writing: {other:?}, expected EACCES"
                )),
            }
        });
    }

    /// A pty opened after the restriction can be written and answers TIOCGWINSZ (IoctlDev).
    fn terminal_ioctl_works() -> Result<(), String> {
        let pty = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/ptmx")
            .map_err(|e| format!("open /dev/ptmx: {e}"))?;
        let mut size = libc::winsize {
            ws_row: 0,
            ws_col: 0,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCGWINSZ writes a winsize into a valid pointer.
        let rc = unsafe {
            libc::ioctl(
                std::os::fd::AsRawFd::as_raw_fd(&pty),
                libc::TIOCGWINSZ,
                &mut size,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(format!(
                "TIOCGWINSZ on a new pty: {}",
                io::Error::last_os_error()
            ))
        }
    }
}
