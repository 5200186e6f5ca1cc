//! The suite's host side: who runs airlock (a [`Mode`]), the throwaway fixture tree each case gets
//! (a [`World`]), running the real binary with deadlines, and reading the probe's verdict.

mod mode;
mod procs;
mod pty;
mod rootless;
mod run;
mod world;

pub use mode::{Mode, User, airlock_under_test, inherit_fd};
pub use procs::{in_another_pid_ns, pids_with_marker, process_alive};
pub use pty::{PTY_COLS, PTY_ROWS};
pub use run::{Probe, Run, finish, status_text};
pub use world::{Leftovers, Net, Secrets, World, chown_tree, give};

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

/// How long one `airlock run` may take before the case fails (a debug build, first launch included).
pub const RUN_DEADLINE: Duration = Duration::from_secs(60);
/// How long to wait for a condition the sandbox should bring about quickly.
pub const CONDITION_DEADLINE: Duration = Duration::from_secs(30);

/// Why a case did not pass.
pub enum Failure {
    Fail(String),
    Skip(String),
}

pub type Outcome = Result<(), Failure>;

/// Fails the current case with a formatted message unless `cond` holds.
#[macro_export]
macro_rules! check {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err($crate::harness::Failure::Fail(format!($($msg)+)));
        }
    };
}

pub fn fail(msg: impl Into<String>) -> Failure {
    Failure::Fail(msg.into())
}

pub fn skip(msg: impl Into<String>) -> Failure {
    Failure::Skip(msg.into())
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Failure::Fail(format!("harness I/O error: {e}"))
    }
}

/// Random hex, so planted secrets and markers cannot be matched by accident.
pub fn token() -> String {
    let mut buf = [0u8; 8];
    if let Ok(mut f) = fs::File::open("/dev/urandom") {
        let _ = io::Read::read_exact(&mut f, &mut buf);
    }
    buf.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Waits for `child` to exit, up to `timeout`; `None` if it is still running.
pub fn wait_deadline(child: &mut Child, timeout: Duration) -> io::Result<Option<ExitStatus>> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Polls `cond` until it holds or `timeout` passes; returns whether it held.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
