//! Probes: forked children that try a kernel feature for real. [`run_probe`] forks, runs the probe,
//! and reads back which [`Step`] failed with which errno (or nothing, on success), killing a probe that
//! outlives its deadline. The async-signal-safe building blocks that probes share (entering a user
//! namespace with [`IdMaps`], making mounts private, turning a return code into a failed step) live
//! here too.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// Longest a probe may take before it is killed; real probes finish in milliseconds.
pub(super) const PROBE_DEADLINE: Duration = Duration::from_secs(2);

/// The step of a probe that failed, reported by the child as one byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Step {
    Unshare,
    Setgroups,
    UidMap,
    GidMap,
    MakePrivate,
    ForkInPidNamespace,
    MountProc,
    NoNewPrivs,
    InstallFilter,
    MountOverlay,
    /// Only in tests.
    #[cfg(test)]
    Test,
}

impl Step {
    const ALL: &'static [Step] = &[
        Step::Unshare,
        Step::Setgroups,
        Step::UidMap,
        Step::GidMap,
        Step::MakePrivate,
        Step::ForkInPidNamespace,
        Step::MountProc,
        Step::NoNewPrivs,
        Step::InstallFilter,
        Step::MountOverlay,
        #[cfg(test)]
        Step::Test,
    ];

    fn describe(self) -> &'static str {
        match self {
            Step::Unshare => "creating the namespaces (unshare)",
            Step::Setgroups => "writing /proc/self/setgroups",
            Step::UidMap => "writing /proc/self/uid_map",
            Step::GidMap => "writing /proc/self/gid_map",
            Step::MakePrivate => "making the mount tree private",
            Step::ForkInPidNamespace => "forking into the new pid namespace",
            Step::MountProc => "mounting proc",
            Step::NoNewPrivs => "prctl(PR_SET_NO_NEW_PRIVS)",
            Step::InstallFilter => "installing a seccomp filter",
            Step::MountOverlay => "mounting an overlay",
            #[cfg(test)]
            Step::Test => "the test step",
        }
    }
}

/// A failed step and its errno, as sent from the probe child (5 bytes on a pipe).
#[derive(Debug, Clone, Copy)]
pub(super) struct StepFailure {
    step: u8,
    errno: i32,
}

impl StepFailure {
    /// A grandchild already wrote the report; the child only has to exit non-zero.
    pub(super) const ALREADY_REPORTED: StepFailure = StepFailure {
        step: u8::MAX,
        errno: 0,
    };

    pub(super) fn now(step: Step) -> StepFailure {
        StepFailure {
            step: step as u8,
            errno: errno(),
        }
    }
}

/// The write end of the report pipe, as seen by the probe.
#[derive(Clone, Copy)]
pub(super) struct Report(RawFd);

#[derive(Debug)]
pub(super) enum ProbeOutcome {
    Passed,
    Failed {
        step: Step,
        error: io::Error,
    },
    /// Fork failed, the probe was killed or timed out, or it exited without a report.
    Abnormal(String),
}

impl ProbeOutcome {
    pub(super) fn failed_entering_user_namespace(&self) -> bool {
        matches!(
            self,
            ProbeOutcome::Failed {
                step: Step::Unshare | Step::Setgroups | Step::UidMap | Step::GidMap,
                ..
            }
        )
    }

    pub(super) fn describe(&self) -> String {
        match self {
            ProbeOutcome::Passed => "passed".to_string(),
            ProbeOutcome::Failed { step, error } => format!("{} failed: {error}", step.describe()),
            ProbeOutcome::Abnormal(message) => message.clone(),
        }
    }
}

/// Forks, runs `probe` in the child, and waits at most `deadline` for it (then kills it).
///
/// `probe` runs between fork and `_exit` while the caller may have other threads (tests do), so it must
/// only make raw system calls on data prepared before the fork: no allocation, no locks, no panics.
pub(super) fn run_probe(
    deadline: Duration,
    probe: impl FnOnce(Report) -> Result<(), StepFailure>,
) -> ProbeOutcome {
    let mut fds = [-1; 2];
    // Non-blocking, so the parent's read cannot wait on a write end leaked into another forked child.
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return ProbeOutcome::Abnormal(format!(
            "cannot create a pipe: {}",
            io::Error::last_os_error()
        ));
    }
    // SAFETY: pipe2 just returned these descriptors; nobody else owns them.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: the child runs only `probe` (raw system calls, see above) and `_exit`s.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let report = Report(write_end.as_raw_fd());
        exit_probe(report, probe(report));
    }
    drop(write_end);
    if pid < 0 {
        return ProbeOutcome::Abnormal(format!("cannot fork: {}", io::Error::last_os_error()));
    }
    let status = match wait_with_deadline(pid, deadline) {
        Some(status) => status,
        None => {
            return ProbeOutcome::Abnormal(format!("the probe did not finish within {deadline:?}"));
        }
    };
    let mut record = [0u8; 5];
    // SAFETY: reading into a buffer of the given length.
    let read = unsafe {
        libc::read(
            read_end.as_raw_fd(),
            record.as_mut_ptr().cast(),
            record.len(),
        )
    };
    if read == record.len() as isize
        && let Some(&step) = Step::ALL.get(usize::from(record[0]))
    {
        let errno = i32::from_le_bytes([record[1], record[2], record[3], record[4]]);
        return ProbeOutcome::Failed {
            step,
            error: io::Error::from_raw_os_error(errno),
        };
    }
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        ProbeOutcome::Passed
    } else if libc::WIFSIGNALED(status) {
        ProbeOutcome::Abnormal(format!(
            "the probe was killed by signal {}",
            libc::WTERMSIG(status)
        ))
    } else {
        ProbeOutcome::Abnormal(format!(
            "the probe exited with status {} without saying why",
            libc::WEXITSTATUS(status)
        ))
    }
}

/// Sends the probe's result to the parent and exits; async-signal-safe.
pub(super) fn exit_probe(report: Report, result: Result<(), StepFailure>) -> ! {
    let code = match result {
        Ok(()) => 0,
        Err(failure) => {
            if failure.step != StepFailure::ALREADY_REPORTED.step {
                let e = failure.errno.to_le_bytes();
                let record = [failure.step, e[0], e[1], e[2], e[3]];
                // SAFETY: writing a stack buffer; 5 bytes into a pipe are written whole or not at all.
                unsafe { libc::write(report.0, record.as_ptr().cast(), record.len()) };
            }
            1
        }
    };
    // SAFETY: leave without running destructors or atexit handlers inherited from the parent.
    unsafe { libc::_exit(code) }
}

/// Waits for `pid`; kills and reaps it after `deadline`, then returns `None`.
fn wait_with_deadline(pid: libc::pid_t, deadline: Duration) -> Option<libc::c_int> {
    let start = Instant::now();
    let mut status = 0;
    loop {
        // SAFETY: waitpid on our own child with a valid status pointer.
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if rc == pid {
            return Some(status);
        }
        if rc < 0 && errno() != libc::EINTR {
            return None;
        }
        if start.elapsed() >= deadline {
            // SAFETY: the child is ours and not yet reaped, so the pid cannot have been reused.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The uid and gid maps for a user namespace in which the caller keeps its own ids, prepared before
/// the fork. The child writes its own maps (allowed for a single id mapped to itself), so no parent
/// has to coordinate with it.
pub(super) struct IdMaps {
    uid_map: String,
    gid_map: String,
}

impl IdMaps {
    pub(super) fn current() -> IdMaps {
        // SAFETY: getuid and getgid have no preconditions.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        IdMaps {
            uid_map: format!("{uid} {uid} 1"),
            gid_map: format!("{gid} {gid} 1"),
        }
    }

    /// `unshare(CLONE_NEWUSER | extra)`, then `setgroups` = deny (required before an unprivileged
    /// `gid_map`), `uid_map`, `gid_map`. Async-signal-safe.
    pub(super) fn enter_user_namespace(&self, extra: libc::c_int) -> Result<(), StepFailure> {
        // SAFETY: a raw system call without pointers.
        sys(Step::Unshare, unsafe {
            libc::unshare(libc::CLONE_NEWUSER | extra)
        })?;
        write_proc_file(Step::Setgroups, c"/proc/self/setgroups", b"deny")?;
        write_proc_file(Step::UidMap, c"/proc/self/uid_map", self.uid_map.as_bytes())?;
        write_proc_file(Step::GidMap, c"/proc/self/gid_map", self.gid_map.as_bytes())
    }
}

fn write_proc_file(step: Step, path: &std::ffi::CStr, data: &[u8]) -> Result<(), StepFailure> {
    // SAFETY: a valid C string and a buffer of the given length; the fd is closed on every path.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(StepFailure::now(step));
        }
        let written = libc::write(fd, data.as_ptr().cast(), data.len());
        let failure = StepFailure::now(step);
        libc::close(fd);
        if written == data.len() as isize {
            Ok(())
        } else {
            Err(failure)
        }
    }
}

/// `mount(MS_REC | MS_PRIVATE)` on `/`, so nothing the probe mounts propagates anywhere.
pub(super) fn make_mounts_private() -> Result<(), StepFailure> {
    // SAFETY: static C strings; null fstype and data are allowed for a propagation change.
    sys(Step::MakePrivate, unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    })
}

pub(super) fn sys(step: Step, rc: libc::c_int) -> Result<(), StepFailure> {
    if rc < 0 {
        Err(StepFailure::now(step))
    } else {
        Ok(())
    }
}

pub(super) fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_reports_success_failed_step_and_errno() {
        assert!(matches!(
            run_probe(PROBE_DEADLINE, |_| Ok(())),
            ProbeOutcome::Passed
        ));
        let outcome = run_probe(PROBE_DEADLINE, |_| {
            // SAFETY: a static C string.
            let fd = unsafe { libc::open(c"/nonexistent/airlock".as_ptr(), libc::O_RDONLY) };
            sys(Step::Test, fd)
        });
        match outcome {
            ProbeOutcome::Failed { step, error } => {
                assert_eq!(step, Step::Test);
                assert_eq!(error.raw_os_error(), Some(libc::ENOENT));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn probe_without_report_or_killed_is_abnormal() {
        let outcome = run_probe(PROBE_DEADLINE, |_| Err(StepFailure::ALREADY_REPORTED));
        assert!(
            outcome.describe().contains("exited with status 1"),
            "{outcome:?}"
        );
        let outcome = run_probe(PROBE_DEADLINE, |_| {
            // SAFETY: raising a signal on ourselves.
            unsafe { libc::raise(libc::SIGKILL) };
            Ok(())
        });
        assert!(
            outcome.describe().contains("killed by signal 9"),
            "{outcome:?}"
        );
    }

    #[test]
    fn hung_probe_is_killed_at_the_deadline() {
        let start = Instant::now();
        let outcome = run_probe(Duration::from_millis(50), |_| {
            loop {
                // SAFETY: waits for a signal; SIGKILL ends it.
                unsafe { libc::pause() };
            }
        });
        assert!(outcome.describe().contains("did not finish"), "{outcome:?}");
        assert!(start.elapsed() < Duration::from_secs(2));
    }
}
