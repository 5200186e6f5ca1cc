//! The exec wrapper as the container's init: once its layers are applied (to itself, so the
//! workload inherits exactly them), it forks the workload and stays as PID 1 of the container's
//! pid namespace: it passes on the signals the engine sends, reaps every process, and ends with
//! the workload's exit code.
//!
//! A workload killed by signal N is reported as native reports it (`Outcome::Signaled(N)`, which
//! the caller re-raises). PID 1 cannot die of a signal sent from inside its namespace, and the
//! engine reports a signal death as `128+N` anyway, the same as `exit 128+N`; so the init exits
//! `128+N` and writes one line, `signal N`, into a FIFO the supervisor made in its host-only
//! session directory and bound at [`STATUS_PATH`]. The supervisor reads it after the engine ends
//! ([`Status`]) and believes it only when the engine's code is `128+N` and N is a signal a process
//! can die of.
//!
//! Forgery: the FIFO is bound into the container, outside every writable path of the spec (the
//! root is read-only), so the workload's Landlock layer refuses to open it for writing; the init
//! opened it before its own layer, and is not dumpable, so the workload cannot borrow its
//! descriptor either. A workload with no Landlock layer (nested namespaces as a user other than
//! root, a kernel without Landlock) can write it, and any workload can read it and drain the
//! init's line. Either can only misreport the workload's own end, and only between `exit 128+N`
//! and a death by N: both outcomes it could have chosen itself. A FIFO holds at most a pipe's
//! buffer (no file on the host grows), the supervisor reads it without blocking and at most
//! [`MAX_RECORD`] bytes, and the signals that would stop airlock rather than end it (SIGSTOP,
//! SIGTSTP, ...) are never accepted.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, fork};

use crate::native::Outcome;

/// Where the supervisor's status FIFO is bound in the container: beneath no writable path of a
/// spec (`/run` is one), so Landlock keeps the workload from writing it.
pub const STATUS_PATH: &str = "/.airlock/status";

/// The most of the FIFO the supervisor reads (the init's line is a dozen bytes).
pub const MAX_RECORD: usize = 4096;

/// The signals the init passes on to the workload's process group: native's (SIGINT, SIGTERM,
/// SIGHUP, SIGQUIT) and those an engine's `kill --signal` is used for. A terminal's own (Ctrl-C,
/// a resize's SIGWINCH) reach the workload directly: it is the terminal's foreground group.
const FORWARDED: [Signal; 7] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGWINCH,
];

/// The init's end of the status FIFO, opened before the layers (Landlock refuses the open
/// after). Empty when [`STATUS_PATH`] is not a FIFO with a reader: a remote engine (nothing is
/// bound there) or the wrapper run by hand; a signal death then comes back as `128+N` alone.
pub struct Channel(Option<OwnedFd>);

impl Channel {
    /// Opens [`STATUS_PATH`] for writing, close-on-exec, never blocking.
    pub fn open() -> Channel {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(STATUS_PATH)
            .ok()
            .filter(|f| f.metadata().is_ok_and(|m| m.file_type().is_fifo()));
        Channel(file.map(OwnedFd::from))
    }

    /// Writes the one line the supervisor reads; best effort (a full or drained FIFO costs the
    /// report only, see the module's forgery note).
    fn report(&self, signal: i32) {
        if let Some(fd) = &self.0 {
            let _ = nix::unistd::write(fd, record(signal).as_bytes());
        }
    }
}

/// The line for a death by `signal`.
fn record(signal: i32) -> String {
    format!("signal {signal}\n")
}

/// Runs `argv` as the workload and acts as its init until it ends; never returns. The caller
/// has applied the layers (no_new_privs, Landlock, seccomp) to this process: the child inherits
/// them unchanged, and the init, which the workload can reach, keeps them too. `shown` names the
/// command in errors.
pub fn run(channel: Channel, argv: &[CString], shown: &OsStr) -> ! {
    // The workload must never ptrace the init or write its memory (it would hold the status
    // FIFO): not dumpable, and the workload has no CAP_SYS_PTRACE. execve makes the workload
    // dumpable again, so its own processes can still trace each other.
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    // PID 1 reaps every orphan of its namespace by the kernel's rule. When an engine's init
    // (`--init`, or `init = true` in its config) is PID 1 instead, the orphans still come here.
    // SAFETY: as above.
    if unsafe { libc::getpid() } != 1 {
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    }
    let mut set = SigSet::empty();
    for s in FORWARDED {
        set.add(s);
    }
    set.add(Signal::SIGCHLD);
    // Blocked signals are queued even for PID 1 (the kernel drops only unhandled ones), so
    // sigwaitinfo sees them; none is lost between the fork and the loop.
    if let Err(e) = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set), None) {
        die(
            125,
            &format!("airlock: cannot block signals in the container: {e}"),
        );
    }
    // An engine could start the container with SIGCHLD ignored; then no child would be waited.
    // SAFETY: resetting a disposition to its default is always sound.
    unsafe { libc::signal(libc::SIGCHLD, libc::SIG_DFL) };
    // Our group holds the terminal when we have one: the workload takes it over (below).
    // SAFETY: tcgetpgrp and getpgrp only read; tcgetpgrp fails on what is not a terminal.
    let terminal = unsafe { libc::tcgetpgrp(0) == libc::getpgrp() };
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: the wrapper is single-threaded; the child only sets its group and signals, then
    // execs.
    let workload = match unsafe { fork() } {
        Ok(ForkResult::Child) => workload(terminal, &ptrs, shown),
        Ok(ForkResult::Parent { child }) => child,
        Err(e) => die(
            125,
            &format!("airlock: cannot start {shown:?} in the container: {e}"),
        ),
    };
    // Both sides set the group, so it exists before the first signal is passed on.
    // SAFETY: setpgid of our own child; it fails harmlessly once the child has exec'd.
    unsafe { libc::setpgid(workload.as_raw(), workload.as_raw()) };
    loop {
        // SAFETY: sigwaitinfo fills the siginfo it is given; the set is blocked.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let signo = unsafe { libc::sigwaitinfo(set.as_ref(), &mut info) };
        if signo == libc::SIGCHLD {
            reap(workload, &channel);
        } else if signo > 0 && info.si_code != libc::SI_KERNEL {
            // As native's init: the workload's whole process group, as from a terminal. A signal
            // the kernel made for the init itself (a terminal's hangup of its session leader)
            // has reached the workload's group from the kernel already.
            forward(workload, signo);
        }
    }
}

/// Passes `signo` on to the workload's process group (its leader alone if the group is gone).
fn forward(workload: Pid, signo: i32) {
    // SAFETY: plain kill(2).
    if unsafe { libc::kill(-workload.as_raw(), signo) } < 0 {
        // SAFETY: as above.
        unsafe { libc::kill(workload.as_raw(), signo) };
    }
}

/// Reaps every child that has ended; when the workload has, ends the init with its status.
fn reap(workload: Pid, channel: &Channel) {
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) if pid == workload => std::process::exit(code),
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == workload => {
                channel.report(signal as i32);
                // Leaving PID 1 kills every process left in the namespace, as native's init.
                std::process::exit(128 + signal as i32)
            }
            Ok(WaitStatus::StillAlive) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// The child: a process group of its own (the terminal's foreground group when the init had
/// the terminal), the signal state a fresh program expects, then `execvp`.
fn workload(terminal: bool, argv: &[*const libc::c_char], shown: &OsStr) -> ! {
    // SAFETY: setpgid, sigprocmask, tcsetpgrp and signal on this process only; execvp gets
    // null-terminated arrays of valid C strings that outlive the call.
    unsafe {
        libc::setpgid(0, 0);
        if terminal {
            // Still blocked here (a background group's tcsetpgrp would otherwise stop on it).
            let mut ttou: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut ttou);
            libc::sigaddset(&mut ttou, libc::SIGTTOU);
            libc::sigprocmask(libc::SIG_BLOCK, &ttou, std::ptr::null_mut());
            libc::tcsetpgrp(0, libc::getpid());
        }
        // Rust ignores SIGPIPE in its runtime; a shell pipeline expects the default.
        for sig in 1..32 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        libc::execvp(argv[0], argv.as_ptr());
    }
    let e = std::io::Error::last_os_error();
    let code = if e.raw_os_error() == Some(libc::ENOENT) {
        127
    } else {
        126
    };
    die(code, &format!("airlock: cannot run {shown:?}: {e}"))
}

fn die(code: i32, message: &str) -> ! {
    eprintln!("{message}");
    std::process::exit(code)
}

/// The supervisor's end of the status FIFO, held open from before the engine starts (so the
/// init's open finds a reader) until the engine has ended.
pub(super) struct Status(File);

impl Status {
    /// Opens the FIFO at `path` for reading, never blocking and never through a link.
    pub(super) fn open(path: &Path) -> std::io::Result<Status> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)?;
        if !file.metadata()?.file_type().is_fifo() {
            return Err(std::io::Error::other(format!(
                "{} is not the FIFO airlock made",
                path.display()
            )));
        }
        Ok(Status(file))
    }

    /// The outcome of an engine that exited `code`: what is in the FIFO now (at most
    /// [`MAX_RECORD`] bytes) read by [`outcome`].
    pub(super) fn outcome(mut self, code: i32) -> Outcome {
        let mut buf = vec![0u8; MAX_RECORD];
        let mut len = 0;
        while len < buf.len() {
            match self.0.read(&mut buf[len..]) {
                Ok(0) | Err(_) => break,
                Ok(n) => len += n,
            }
        }
        outcome(code, &buf[..len])
    }
}

/// The outcome of an engine that exited `code`, given what the status FIFO held: a death by N
/// when its last line is `signal N`, N is a signal a process dies of, and `code` is `128+N`;
/// else the exit code.
pub fn outcome(code: i32, fifo: &[u8]) -> Outcome {
    let last = fifo
        .strip_suffix(b"\n")
        .and_then(|b| b.split(|&c| c == b'\n').next_back());
    let signal = last
        .and_then(|l| l.strip_prefix(b"signal "))
        .and_then(|n| std::str::from_utf8(n).ok())
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|n| n.parse::<i32>().ok())
        .filter(|&n| kills(n) && code == 128 + n);
    match signal {
        Some(n) => Outcome::Signaled(n),
        None => Outcome::Exited(code),
    }
}

/// Whether a process can die of `signal`: 1 to 64 but those whose default is to stop, continue
/// or be ignored (re-raised on airlock, SIGSTOP would stop it instead of ending it).
fn kills(signal: i32) -> bool {
    (1..=64).contains(&signal)
        && ![
            libc::SIGCHLD,
            libc::SIGCONT,
            libc::SIGSTOP,
            libc::SIGTSTP,
            libc::SIGTTIN,
            libc::SIGTTOU,
            libc::SIGURG,
            libc::SIGWINCH,
        ]
        .contains(&signal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_death_by_signal_is_believed_only_with_the_matching_exit_code() {
        assert_eq!(outcome(143, b"signal 15\n"), Outcome::Signaled(15));
        assert_eq!(outcome(137, record(9).as_bytes()), Outcome::Signaled(9));
        assert_eq!(outcome(128 + 34, b"signal 34\n"), Outcome::Signaled(34));
        // `exit 143` with nothing written is an exit.
        assert_eq!(outcome(143, b""), Outcome::Exited(143));
        // A record that does not match the engine's code is not believed.
        assert_eq!(outcome(0, b"signal 15\n"), Outcome::Exited(0));
        assert_eq!(outcome(142, b"signal 15\n"), Outcome::Exited(142));
    }

    #[test]
    fn the_last_whole_line_counts_and_anything_odd_is_an_exit() {
        // What a workload wrote before the init's line does not count.
        assert_eq!(
            outcome(143, b"garbage\nsignal 9\nsignal 15\n"),
            Outcome::Signaled(15)
        );
        for odd in [
            &b"signal 15"[..],
            b"signal 15\nsig",
            b"signal +15\n",
            b"signal 015x\n",
            b"signal \n",
            b"SIGNAL 15\n",
            b"signal 15 \n",
            b"\xffsignal 15\n",
        ] {
            assert_eq!(outcome(143, odd), Outcome::Exited(143), "{odd:?}");
        }
    }

    #[test]
    fn signals_that_would_stop_airlock_are_never_reported() {
        for n in [
            libc::SIGSTOP,
            libc::SIGTSTP,
            libc::SIGTTIN,
            libc::SIGTTOU,
            libc::SIGCHLD,
            libc::SIGCONT,
            libc::SIGURG,
            libc::SIGWINCH,
            0,
            65,
        ] {
            let line = record(n);
            assert_eq!(
                outcome(128 + n, line.as_bytes()),
                Outcome::Exited(128 + n),
                "{n}"
            );
        }
    }

    #[test]
    fn the_supervisor_reads_the_fifo_without_blocking_and_at_most_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("status");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        // Nothing written, and no writer: an exit, at once.
        assert_eq!(Status::open(&path).unwrap().outcome(3), Outcome::Exited(3));
        let status = Status::open(&path).unwrap();
        let mut writer = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)
            .unwrap();
        use std::io::Write as _;
        writer.write_all(&vec![b'x'; MAX_RECORD * 2]).unwrap();
        writer.write_all(b"\nsignal 15\n").unwrap();
        // The writer stays open (a workload holding it): the read still ends, capped, and what
        // lies past the cap is not read.
        assert_eq!(status.outcome(143), Outcome::Exited(143));
        // A regular file where the FIFO should be is refused.
        let file = dir.path().join("file");
        std::fs::write(&file, "signal 15\n").unwrap();
        assert!(Status::open(&file).is_err());
    }
}
