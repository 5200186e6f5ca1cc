//! Running a command on a fresh pseudo-terminal, the way a developer's terminal runs airlock.

use std::fs;
use std::io;
use std::os::unix::process::CommandExt as _;
use std::process::Command;

use super::run::Run;
use super::{CONDITION_DEADLINE, Failure, RUN_DEADLINE, fail, wait_deadline};

/// The window size the suite gives its pseudo-terminals, to recognise it inside.
pub const PTY_ROWS: u16 = 37;
pub const PTY_COLS: u16 = 101;

/// Runs `cmd` with a fresh pseudo-terminal as its controlling terminal and stdin/stdout/stderr,
/// the way a developer's terminal is: owned by `owner`, mode 0620. The output (both streams) ends
/// up in `Run::stdout`, the slave's mode afterwards in `Run::terminal_mode`.
pub fn run_on_pty(mut cmd: Command, described: String, owner: u32) -> Result<Run, Failure> {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let (master, slave, path) = open_pty()?;
    std::os::unix::fs::fchown(&slave, Some(owner), None)?;
    slave.set_permissions(fs::Permissions::from_mode(0o620))?;
    cmd.stdin(slave.try_clone()?)
        .stdout(slave.try_clone()?)
        .stderr(slave);
    // SAFETY: setsid and ioctl are async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn();
    drop(cmd); // closes the suite's copies of the slave, so the reader sees EOF at the end
    let mut child = child.map_err(|e| fail(format!("could not start {described}: {e}")))?;
    let (tx, rx) = std::sync::mpsc::channel();
    let slave_path = path.clone();
    std::thread::spawn(move || {
        let mut master = fs::File::from(master);
        let mut output = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match io::Read::read(&mut master, &mut buf) {
                Ok(0) => break,
                Ok(n) => output.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break, // EIO: every slave fd is closed
            }
        }
        // The slave's node lives as long as the master: read its mode before closing it.
        let mode = fs::metadata(&slave_path).ok().map(|m| m.mode() & 0o7777);
        let _ = tx.send((output, mode));
    });
    let Some(status) = wait_deadline(&mut child, RUN_DEADLINE)? else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(fail(format!(
            "{described}\n      did not finish within {RUN_DEADLINE:?}"
        )));
    };
    let (output, terminal_mode) = rx.recv_timeout(CONDITION_DEADLINE).unwrap_or_default();
    Ok(Run {
        described,
        status,
        stdout: String::from_utf8_lossy(&output).replace("\r\n", "\n"),
        stderr: String::new(),
        terminal_mode,
    })
}

/// A pseudo-terminal pair with the suite's window size: (master, slave, the slave's path).
fn open_pty() -> io::Result<(std::os::fd::OwnedFd, fs::File, String)> {
    use std::os::fd::FromRawFd as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    // SAFETY: plain libc calls on a fresh fd that is owned right away; `name` outlives its use.
    unsafe {
        let fd = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let master = std::os::fd::OwnedFd::from_raw_fd(fd);
        if libc::grantpt(fd) != 0 || libc::unlockpt(fd) != 0 {
            return Err(io::Error::last_os_error());
        }
        let ws = libc::winsize {
            ws_row: PTY_ROWS,
            ws_col: PTY_COLS,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        if libc::ioctl(fd, libc::TIOCSWINSZ, &ws) != 0 {
            return Err(io::Error::last_os_error());
        }
        let mut name = [0 as libc::c_char; 128];
        let rc = libc::ptsname_r(fd, name.as_mut_ptr(), name.len());
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        let path = std::ffi::CStr::from_ptr(name.as_ptr())
            .to_string_lossy()
            .into_owned();
        let slave = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY)
            .open(&path)?;
        Ok((master, slave, path))
    }
}
