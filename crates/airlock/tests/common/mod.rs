//! What the CLI test files share: a throwaway HOME with a project in it, the real binary started
//! there with a cleared environment, and readers for what it printed.
#![allow(dead_code)] // each test file uses its own part of it

pub mod egress;
pub mod modes;
pub mod netlog;
pub mod ports;
pub mod tmux;
pub mod users;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub const AIRLOCK: &str = env!("CARGO_BIN_EXE_airlock");

/// A temp root (canonical) holding `home/` and a project directory.
pub struct TestHome {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub home: PathBuf,
    pub project: PathBuf,
}

impl TestHome {
    /// A home at `<root>/home` and a project at `<root>/<project>` (e.g. `home/code/app`).
    pub fn new(project: &str) -> TestHome {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = fs::canonicalize(dir.path()).expect("canonical tempdir");
        let home = root.join("home");
        let project = root.join(project);
        fs::create_dir_all(&home).expect("home dir");
        fs::create_dir_all(&project).expect("project dir");
        TestHome {
            _dir: dir,
            root,
            home,
            project,
        }
    }

    /// airlock with `args`, run in the project with stdin closed and an environment holding only
    /// `HOME`; callers add `PATH`, `SHELL`, ... as their case needs.
    pub fn airlock(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(AIRLOCK);
        cmd.args(args)
            .current_dir(&self.project)
            .env_clear()
            .env("HOME", &self.home)
            .stdin(Stdio::null());
        cmd
    }

    /// airlock with `args` run to completion, with a plain `PATH` and `SHELL=/bin/sh`.
    pub fn run(&self, args: &[&str]) -> Output {
        self.run_env(&[], args)
    }

    /// [`TestHome::run`] with `env` added to (or overriding) that environment.
    pub fn run_env(&self, env: &[(&str, &str)], args: &[&str]) -> Output {
        let mut cmd = self.airlock(args);
        cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("SHELL", "/bin/sh")
            .envs(env.iter().copied());
        cmd.output().expect("spawn airlock")
    }

    /// Writes `~/.config/airlock/config.toml` and returns its path.
    pub fn config(&self, text: &str) -> PathBuf {
        let path = self.home.join(".config/airlock/config.toml");
        write(&path, text);
        path
    }

    /// `~/.local/share/airlock/sandboxes`.
    pub fn sandboxes(&self) -> PathBuf {
        self.home.join(".local/share/airlock/sandboxes")
    }
}

/// Writes `text` to `path`, creating its parent directories.
pub fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().expect("parent")).expect("parent dirs");
    fs::write(path, text).expect("write");
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The whole outcome, for assertion messages.
pub fn report(out: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status,
        stdout(out),
        stderr(out)
    )
}

/// Whether the native sandbox starts on this machine; prints why when it does not.
pub fn sandbox_starts() -> bool {
    let h = TestHome::new("home/code/app");
    let out = h
        .airlock(&["run", "--network", "none", "--", "true"])
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .output()
        .expect("spawn airlock");
    if !out.status.success() {
        eprintln!(
            "skipped: the native sandbox cannot start here (see `airlock doctor`): {}",
            report(&out)
        );
    }
    out.status.success()
}
