//! A host program a backend runs in the foreground (the container engine's `run`, `sbx exec`):
//! the supervisor waits for it and passes on the signals sent to airlock alone. A terminal's
//! signals (Ctrl-C) reach the whole foreground group, the program included, so they are not sent
//! twice; airlock itself does not die of them, so the backend still cleans up after the program.

use std::process::{Child, Command, ExitStatus};

use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};

use crate::native::LaunchError;

/// Whether stdin and stdout are both a terminal: the program then gets a terminal of its own
/// (the engine's `-t`, `sbx exec --tty`).
pub fn is_terminal() -> bool {
    // SAFETY: isatty only reads the descriptor's state.
    unsafe { libc::isatty(0) == 1 && libc::isatty(1) == 1 }
}

/// The signals that stop a session (native's forwarded list: SIGINT, SIGTERM, SIGHUP, SIGQUIT):
/// passed on to the program while it runs, held while a backend cleans up after it.
pub fn stop_signals() -> SigSet {
    let mut set = SigSet::empty();
    for s in crate::native::launch::FORWARDED {
        set.add(s);
    }
    set
}

/// Spawns `command` and waits for it. `started` runs once it exists (the gates start there); an
/// error from it kills the program and is returned. `what` names the program in errors.
pub fn run(
    command: &mut Command,
    what: &str,
    started: &mut dyn FnMut(&mut Child) -> Result<(), LaunchError>,
) -> Result<ExitStatus, LaunchError> {
    let mut set = stop_signals();
    set.add(Signal::SIGCHLD);
    let mut previous = SigSet::empty();
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set), Some(&mut previous))
        .map_err(|e| LaunchError::Start(e.into()))?;
    let restore = |previous: &SigSet| {
        let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(previous), None);
    };
    // The program must get signals as usual: start it with an empty mask (std's spawn keeps
    // the caller's, which blocks the very signals passed on to it).
    // SAFETY: the hook only calls sigprocmask, which is async-signal-safe.
    unsafe {
        use std::os::unix::process::CommandExt as _;
        command.pre_exec(|| {
            sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)
                .map_err(std::io::Error::from)
        });
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            restore(&previous);
            return Err(LaunchError::Setup(format!("cannot run {what}: {e}")));
        }
    };
    let pid = child.id() as libc::pid_t;
    if let Err(e) = started(&mut child) {
        // Fail closed: the gates this sandbox was planned with serve it, or it does not run.
        let _ = child.kill();
        let _ = child.wait();
        restore(&previous);
        return Err(e);
    }
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) => {}
            Err(e) => break Err(e),
        }
        // SAFETY: sigwaitinfo fills the siginfo it is given; the set is blocked.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let sig = unsafe { libc::sigwaitinfo(set.as_ref(), &mut info) };
        if sig <= 0 || sig == libc::SIGCHLD {
            continue;
        }
        // SAFETY: si_pid is valid for signals a process sent (SI_USER, SI_QUEUE).
        let sender = unsafe { info.si_pid() };
        if info.si_code <= 0 && sender != pid {
            // SAFETY: a signal to our own child, still unreaped.
            unsafe { libc::kill(pid, sig) };
        }
    };
    restore(&previous);
    status.map_err(LaunchError::Start)
}
