//! Runs code in a forked child for tests of process-wide, irreversible state (seccomp filters, Landlock
//! domains, dropped capabilities).
//!
//! Shared by the tests of `seccomp`, `landlock` and `caps`: [`run`] forks and reports how the child
//! ended, [`assert_ok`] fails the test with the child's message, and [`errno_of`] and [`expect`] turn
//! raw system call results into messages the child can pass back.

use std::io::Read;
use std::panic::{AssertUnwindSafe, catch_unwind};

use nix::fcntl::OFlag;
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, fork, pipe2};

/// How the child ended, with the message it returned on failure.
#[derive(Debug, PartialEq, Eq)]
pub enum End {
    Exited(i32, String),
    Signaled(Signal),
}

/// Forks, runs `body` in the child and `_exit`s with 0 on `Ok`, 1 (message passed back) on `Err`.
pub fn run(body: impl FnOnce() -> Result<(), String>) -> End {
    // Non-blocking: the parent reads only after the child is gone, so a write end leaked into a
    // concurrently forked child (tests run in threads) cannot make it wait.
    let (read_end, write_end) = pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK).expect("pipe2");
    // SAFETY: the child only runs `body` and exits; glibc keeps malloc usable after fork.
    match unsafe { fork() }.expect("fork") {
        ForkResult::Child => {
            drop(read_end);
            let (code, message) = match catch_unwind(AssertUnwindSafe(body)) {
                Ok(Ok(())) => (0, String::new()),
                Ok(Err(message)) => (1, message),
                Err(_) => (2, "the child panicked".to_owned()),
            };
            let mut file = std::fs::File::from(write_end);
            let _ = std::io::Write::write_all(&mut file, message.as_bytes());
            // SAFETY: leave without running the test harness's atexit handlers or destructors.
            unsafe { libc::_exit(code) }
        }
        ForkResult::Parent { child } => {
            drop(write_end);
            let status = waitpid(child, None).expect("waitpid");
            let mut message = String::new();
            let _ = std::fs::File::from(read_end).read_to_string(&mut message);
            match status {
                WaitStatus::Exited(_, code) => End::Exited(code, message),
                WaitStatus::Signaled(_, signal, _) => End::Signaled(signal),
                other => panic!("unexpected wait status {other:?}"),
            }
        }
    }
}

/// Like [`run`], and panics with the child's message unless it succeeded.
pub fn assert_ok(body: impl FnOnce() -> Result<(), String>) {
    match run(body) {
        End::Exited(0, _) => {}
        End::Exited(_, message) => panic!("{message}"),
        End::Signaled(signal) => panic!("child killed by {signal}"),
    }
}

/// The result of a raw system call as `Ok(return value)` or `Err(errno)`.
pub fn errno_of(rc: libc::c_long) -> Result<libc::c_long, i32> {
    if rc == -1 {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        Ok(rc)
    }
}

/// Checks that `what` returned `expected`, describing the mismatch otherwise.
pub fn expect(
    what: &str,
    got: Result<libc::c_long, i32>,
    expected: Result<libc::c_long, i32>,
) -> Result<(), String> {
    let show = |r: Result<libc::c_long, i32>| match r {
        Ok(v) => format!("Ok({v})"),
        Err(e) => format!("Err({})", std::io::Error::from_raw_os_error(e)),
    };
    if got == expected {
        Ok(())
    } else {
        Err(format!(
            "{what}: got {}, expected {}",
            show(got),
            show(expected)
        ))
    }
}
