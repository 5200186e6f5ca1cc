//! Starting bwrap: the rendered argv, the launch socket and the stage's plan at fixed descriptors,
//! a session of its own, an empty environment; then the stage's pidfd, which stands for init.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use super::render::{DataFd, PLAN_FD, Rendered, SOCK_FD};
use crate::native::LaunchError;
use crate::native::init::Init;

/// The most `--file` / `--ro-bind-data` descriptors one launch hands bwrap.
const MAX_DATA_FDS: usize = 62;

/// Runs bwrap and waits until the stage inside has said who it is.
pub(crate) fn start(
    program: &Path,
    rendered: &Rendered,
    plan: &[u8],
    parent_end: &OwnedFd,
    child_end: OwnedFd,
) -> Result<Init, LaunchError> {
    if rendered.data.len() > MAX_DATA_FDS {
        return Err(LaunchError::Plan(format!(
            "the bwrap backend takes at most {MAX_DATA_FDS} masked or copied files, and this \
             sandbox has {}; use --backend native",
            rendered.data.len()
        )));
    }
    let plan_fd = memfd("airlock-stage-plan", plan)?;
    let mut data = Vec::with_capacity(rendered.data.len());
    for what in &rendered.data {
        data.push(match what {
            DataFd::Empty => memfd("airlock-empty", b"")?,
            DataFd::File(path) => std::fs::File::open(path).map(OwnedFd::from).map_err(|e| {
                LaunchError::Setup(format!("cannot open {} to copy it: {e}", path.display()))
            })?,
        });
    }
    // Each source descriptor and the number bwrap expects it at.
    let mut moves: Vec<(RawFd, RawFd)> = vec![
        (child_end.as_raw_fd(), SOCK_FD),
        (plan_fd.as_raw_fd(), PLAN_FD),
    ];
    for (i, fd) in data.iter().enumerate() {
        moves.push((fd.as_raw_fd(), PLAN_FD + 1 + i as RawFd));
    }
    let above = PLAN_FD + 1 + data.len() as RawFd;
    let mut cmd = Command::new(program);
    cmd.args(&rendered.args).env_clear();
    // SAFETY: only async-signal-safe calls (setsid, fcntl, dup2) on descriptors this process
    // owns, between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // Out of the terminal's session: a Ctrl-C reaches the supervisor alone, which passes
            // it on to the stage once (as native's init does setsid).
            libc::setsid();
            // Root's supplementary groups (native drops them around its clone): a sandbox of
            // root would keep them inside, and with them access to group-owned host files.
            if libc::geteuid() == 0 && libc::setgroups(0, std::ptr::null()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Copies above every target first, so no move overwrites a source still to move.
            let mut high = [0 as RawFd; MAX_DATA_FDS + 2];
            for (i, (from, _)) in moves.iter().enumerate().take(high.len()) {
                let fd = libc::fcntl(*from, libc::F_DUPFD_CLOEXEC, above);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                high[i] = fd;
            }
            for (i, (_, to)) in moves.iter().enumerate().take(high.len()) {
                if libc::dup2(high[i], *to) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| {
        LaunchError::Setup(format!(
            "cannot run {}: {e}; install bubblewrap or use --backend native",
            program.display()
        ))
    })?;
    drop(child_end);
    drop(plan_fd);
    drop(data);
    match await_stage(parent_end) {
        Ok(pidfd) => match pid_of(&pidfd) {
            Some(pid) => Ok(Init {
                pid,
                pidfd,
                bwrap: Some(child),
                waited: false,
            }),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                Err(LaunchError::Setup(
                    "cannot find the stage's pid from its pidfd".into(),
                ))
            }
        },
        Err(message) => {
            let status = child.wait();
            let status = status.map_or_else(|e| e.to_string(), |s| s.to_string());
            Err(LaunchError::Setup(match message {
                Some(message) => message,
                None => format!(
                    "{} ended ({status}) before the sandbox started; its message is above",
                    program.display()
                ),
            }))
        }
    }
}

/// A memfd named `name` holding `contents`, read from its start.
pub(crate) fn memfd(name: &str, contents: &[u8]) -> Result<OwnedFd, LaunchError> {
    use std::io::{Seek, Write};
    let name = std::ffi::CString::new(name).expect("no NUL");
    let fd = nix::sys::memfd::memfd_create(&name, nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC)
        .map_err(|e| LaunchError::Start(e.into()))?;
    let mut file = std::fs::File::from(fd);
    file.write_all(contents)
        .and_then(|()| file.rewind())
        .map_err(LaunchError::Start)?;
    Ok(file.into())
}

/// The stage's first message: `P` with its pidfd, or `E` with why it could not start (`Some`),
/// or nothing because bwrap ended (`None`).
fn await_stage(sock: &OwnedFd) -> Result<OwnedFd, Option<String>> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    let mut buf = vec![0u8; 4096];
    loop {
        let mut cmsg = nix::cmsg_space!([RawFd; 1]);
        let mut iov = [std::io::IoSliceMut::new(&mut buf)];
        let msg = match recvmsg::<()>(
            sock.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(msg) => msg,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return Err(None),
        };
        let mut passed = None;
        if let Ok(cmsgs) = msg.cmsgs() {
            for c in cmsgs {
                if let ControlMessageOwned::ScmRights(fds) = c {
                    // SAFETY: SCM_RIGHTS just installed it in our table; we own it now.
                    passed = fds.first().map(|&fd| unsafe { OwnedFd::from_raw_fd(fd) });
                }
            }
        }
        let n = msg.bytes;
        return match (buf.first(), passed) {
            _ if n == 0 => Err(None),
            (Some(b'P'), Some(fd)) => Ok(fd),
            (Some(b'E'), _) => Err(Some(airlock_config::printable(&String::from_utf8_lossy(
                &buf[1..n],
            )))),
            _ => Err(Some("the stage sent an unexpected first message".into())),
        };
    }
}

/// The host pid a pidfd stands for (`Pid:` in its fdinfo).
fn pid_of(pidfd: &OwnedFd) -> Option<libc::pid_t> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", pidfd.as_raw_fd())).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("Pid:"))
        .and_then(|p| p.trim().parse().ok())
        .filter(|&p: &libc::pid_t| p > 0)
}
