//! Fake `herdr` and `sbx` executables, built from their documented behaviour (herdr's CLI and
//! socket API, the sbx CLI and plugin state; docs/herdr-plugin.md). The test
//! binary runs as one of them when started under that name (a symlink in the test's `bin/`). Both
//! log every argv as a JSON line, keep their state in a JSON file (locked with flock, since the
//! action, the bridge and the popup call them concurrently), and take failures, delays and races
//! from environment variables, each documented at the top of its file.

pub mod herdr;
pub mod sbx;

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// Appends `{"argv": [...]}` to the file named by `var`.
pub fn log_argv(var: &str, argv: &[String]) {
    if let Ok(path) = std::env::var(var) {
        let line = serde_json::json!({ "argv": argv, "pid": std::process::id() });
        let _lock = FileLock::take(&PathBuf::from(format!("{path}.lock")));
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
        {
            let _ = writeln!(f, "{line}");
        }
    }
}

/// An exclusive flock on a side file, held until dropped.
pub struct FileLock(std::fs::File);

impl FileLock {
    pub fn take(path: &Path) -> FileLock {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .expect("lock file opens");
        use std::os::fd::AsRawFd as _;
        // SAFETY: flock on a file descriptor we own.
        unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        FileLock(f)
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd as _;
        // SAFETY: as above.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// Runs `f` on the JSON state in the file named by `var`, under its lock, saving what it leaves.
pub fn with_state<T>(var: &str, f: impl FnOnce(&mut Value) -> T) -> T {
    let path = PathBuf::from(
        std::env::var(var).unwrap_or_else(|_| panic!("{var} must be set for the fake")),
    );
    let _lock = FileLock::take(&PathBuf::from(format!("{}.lock", path.display())));
    let mut state: Value = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_else(|| serde_json::json!({}));
    let out = f(&mut state);
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(&state).expect("json")).expect("state writes");
    std::fs::rename(&tmp, &path).expect("state renames");
    out
}

/// `FAKE_X_DELAY_MS`-style lists: `cmd=value;cmd=value`.
pub fn knob(var: &str, key: &str) -> Option<String> {
    std::env::var(var).ok()?.split(';').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k.trim() == key).then(|| v.to_owned())
    })
}

/// Sleeps for the configured delay of `cmd` (the fakes may sleep; tests never do).
pub fn delay(var: &str, cmd: &str) {
    if let Some(ms) = knob(var, cmd).and_then(|v| v.parse::<u64>().ok()) {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}
