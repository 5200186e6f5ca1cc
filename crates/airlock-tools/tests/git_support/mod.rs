//! The real git for the git tool's tests: a repository fixture and a runner.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::fixture::Fixture;

pub fn real_git() -> PathBuf {
    let path = std::env::var("PATH").expect("PATH");
    path.split(':')
        .map(|d| Path::new(d).join("git"))
        .find(|p| p.is_file())
        .expect("these tests need git on PATH")
}

/// A fixture whose PATH has the real git, with the project a git repository.
pub fn repo() -> Fixture {
    let f = Fixture::new();
    std::os::unix::fs::symlink(real_git(), f.bin.join("git")).unwrap();
    git(&f.project, &["init", "-q"]);
    f
}

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(real_git())
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// An empty commit in the repository at `dir`, under a throwaway identity.
#[allow(dead_code)] // tests/git.rs uses it, tests/git_guard.rs does not
pub fn commit_empty(dir: &Path, message: &str) {
    let identity = ["-c", "user.name=T", "-c", "user.email=t@example.com"];
    let args: Vec<&str> = identity
        .iter()
        .copied()
        .chain(["commit", "-q", "--allow-empty", "-m", message])
        .collect();
    git(dir, &args);
}
