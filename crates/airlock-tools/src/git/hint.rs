//! `git` inside a sandbox whose `.git` is read-only (`[tools.git] mode = "readonly"`, the default):
//! the airlock binary answers as `git` (first on PATH), runs the real git, and when a command that
//! writes the repository fails there, adds one line saying why and which key changes it. Once per
//! session; commands that only read are handed to git directly (`exec`, no process in between).

use std::ffi::{OsStr, OsString};
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The environment variable naming the read-only git dir inside (set by the git tool).
pub const READONLY_ENV: &str = "AIRLOCK_GIT_READONLY";

/// Where the hint's "already said" mark lives (the sandbox's own /tmp).
const SAID: &str = "/tmp/.airlock-git-hint";

/// What git says nothing about: why its write failed, and what to do.
pub const HINT: &str = "airlock: .git is read-only in this sandbox ([tools.git] mode = \"readonly\", \
the default): commit on the host, or set [tools.git] mode = \"readwrite\" to commit here (commits \
come back to your repository as airlock/<branch> when the session ends; see docs/tools.md)";

/// Subcommands that write the repository (its index, refs or objects). Not `config` (reading a
/// missing key fails too, and a refused write names the file), nor `fetch`, `pull` and `push`
/// (their failures are mostly the network's).
const WRITES: &[&str] = &[
    "add",
    "am",
    "apply",
    "bisect",
    "branch",
    "checkout",
    "cherry-pick",
    "commit",
    "gc",
    "maintenance",
    "merge",
    "mv",
    "notes",
    "prune",
    "rebase",
    "reflog",
    "remote",
    "repack",
    "replace",
    "reset",
    "restore",
    "revert",
    "rm",
    "sparse-checkout",
    "stash",
    "submodule",
    "switch",
    "tag",
    "update-index",
    "update-ref",
    "worktree",
];

/// Whether `argv0` is this wrapper's name.
pub fn is_wrapper(argv0: &OsStr) -> bool {
    Path::new(argv0).file_name() == Some(OsStr::new("git"))
}

/// The subcommand and the directory git works in (`-C` applied), from git's own arguments.
fn subcommand(args: &[OsString]) -> (Option<&OsStr>, PathBuf) {
    let mut dir = std::env::current_dir().unwrap_or_default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let s = arg.to_string_lossy();
        match s.as_ref() {
            "-C" => {
                if let Some(d) = it.next() {
                    dir = dir.join(d);
                }
            }
            // Global options that take the next argument.
            "-c" | "--git-dir" | "--work-tree" | "--namespace" | "--exec-path" | "--config-env" => {
                it.next();
            }
            _ if s.starts_with('-') => {}
            _ => return (Some(arg.as_os_str()), dir),
        }
    }
    (None, dir)
}

/// The real git: the first on PATH that is not this binary.
fn real_git() -> Option<PathBuf> {
    let me = std::env::current_exe().ok()?;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("git"))
        .find(|candidate| {
            candidate.is_file() && airlock_config::canonicalize(candidate).is_ok_and(|c| c != me)
        })
}

/// Runs the real git with `args`; the exit code to leave with.
pub fn run(args: Vec<OsString>) -> i32 {
    let Some(git) = real_git() else {
        eprintln!("airlock: git is not on this sandbox's PATH");
        return 127;
    };
    let readonly = std::env::var_os(READONLY_ENV).map(PathBuf::from);
    let (sub, dir) = subcommand(&args);
    let watched = match (&readonly, sub) {
        (Some(git_dir), Some(sub)) => {
            WRITES.iter().any(|w| OsStr::new(w) == sub)
                && git_dir.parent().is_some_and(|work| dir.starts_with(work))
        }
        _ => false,
    };
    let mut cmd = Command::new(&git);
    cmd.arg0("git").args(&args);
    if !watched {
        let e = cmd.exec();
        eprintln!("airlock: cannot run {}: {e}", git.display());
        return 126;
    }
    // Git and this process share the terminal's process group: Ctrl-C is git's to act on.
    // SAFETY: ignoring SIGINT and SIGQUIT in this process only; git gets the defaults back at exec.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
    }
    // SAFETY: restoring default dispositions between fork and exec is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGQUIT, libc::SIG_DFL);
            Ok(())
        });
    }
    let status = match cmd.status() {
        Ok(status) => status,
        Err(e) => {
            eprintln!("airlock: cannot run {}: {e}", git.display());
            return 126;
        }
    };
    if !status.success() && readonly.as_deref().is_some_and(is_read_only) && first_time() {
        eprintln!("{HINT}");
    }
    if let Some(signal) = status.signal() {
        return 128 + signal;
    }
    status.code().unwrap_or(1)
}

/// Whether writes to `dir` fail because its mount is read-only.
fn is_read_only(dir: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: access reads a valid C string.
    let ret = unsafe { libc::access(c.as_ptr(), libc::W_OK) };
    ret != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EROFS)
}

/// True the first time in this sandbox's session (the mark is made atomically).
fn first_time() -> bool {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(SAID)
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_subcommand_is_found_past_global_options() {
        let a = args(&[
            "-C",
            "/p/sub",
            "-c",
            "user.name=x",
            "--no-pager",
            "commit",
            "-m",
            "x",
        ]);
        let (sub, dir) = subcommand(&a);
        assert_eq!(sub, Some(OsStr::new("commit")));
        assert_eq!(dir, PathBuf::from("/p/sub"));
        assert_eq!(subcommand(&args(&["--version"])).0, None);
        assert_eq!(subcommand(&args(&["status"])).0, Some(OsStr::new("status")));
    }

    #[test]
    fn only_writing_subcommands_are_watched() {
        for w in ["commit", "add", "checkout", "stash", "rebase"] {
            assert!(WRITES.contains(&w), "{w}");
        }
        for r in [
            "status", "log", "diff", "show", "config", "fetch", "ls-files",
        ] {
            assert!(!WRITES.contains(&r), "{r}");
        }
    }
}
