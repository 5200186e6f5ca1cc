//! What the mount-mode and git-mode tests share: a HOME with tool directories and a git project,
//! the real binary run there, and the check that a sandbox with overlayfs starts.

use std::ops::Deref;
use std::path::Path;
use std::process::{Command, Output};

use super::{TestHome, report as text, write};

/// A HOME with claude, codex and nvim directories, a git identity split over an includeIf file,
/// and a git project at ~/code/app.
pub struct World(pub TestHome);

impl Deref for World {
    type Target = TestHome;
    fn deref(&self) -> &TestHome {
        &self.0
    }
}

impl World {
    pub fn new(config: &str) -> World {
        let w = World(TestHome::new("home/code/app"));
        let home = &w.home;
        write(&home.join(".claude/settings.json"), "{\"host\": true}\n");
        write(&home.join(".codex/config.toml"), "model = \"host\"\n");
        write(&home.join(".config/nvim/init.lua"), "-- host config\n");
        write(
            &home.join(".gitconfig"),
            "[user]\n\tname = Host Dev\n[includeIf \"gitdir:~/code/\"]\n\tpath = ~/.gitconfig-work\n",
        );
        write(
            &home.join(".gitconfig-work"),
            "[user]\n\temail = dev@work.example\n",
        );
        w.config(config);
        w.host_git(&["init", "-q", "-b", "main"]);
        write(&w.project.join("README"), "hello\n");
        w.host_git(&["add", "README"]);
        w.host_git(&["commit", "-q", "-m", "first"]);
        w
    }

    pub fn host_git(&self, args: &[&str]) -> Output {
        self.host_git_in(&self.project, args)
    }

    /// The host's git in `dir`, with this world's HOME; asserts success.
    pub fn host_git_in(&self, dir: &Path, args: &[&str]) -> Output {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("HOME", &self.home)
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("GIT_CONFIG_GLOBAL")
            .output()
            .expect("host git");
        assert!(out.status.success(), "git {args:?}: {}", text(&out));
        out
    }

    /// airlock with `args` and the environment every case here uses.
    pub fn airlock_with(&self, args: &[&str], shell: &str) -> Output {
        self.airlock_in(&self.project, args, shell)
    }

    /// The same, started in `dir` (the project, when it is not a subdirectory of another).
    pub fn airlock_in(&self, dir: &Path, args: &[&str], shell: &str) -> Output {
        self.airlock(args)
            .current_dir(dir)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("SHELL", shell)
            .output()
            .expect("spawn airlock")
    }

    pub fn sh(&self, script: &str) -> Output {
        self.sh_in(&self.project, script)
    }

    /// `sh -c script` in a sandbox whose project is `dir`.
    pub fn sh_in(&self, dir: &Path, script: &str) -> Output {
        self.airlock_in(
            dir,
            &["run", "--network", "none", "--", "sh", "-c", script],
            "/bin/sh",
        )
    }
}

/// Whether the sandbox (with overlayfs) and git are usable here; says why when not.
pub fn available() -> bool {
    if Command::new("git").arg("--version").output().is_err() {
        eprintln!("skipped: git is not installed");
        return false;
    }
    let w = World::new("");
    let o = w.sh("true");
    if !o.status.success() {
        eprintln!(
            "skipped: the native sandbox cannot start here: {}",
            text(&o)
        );
        return false;
    }
    true
}

pub const MODES: &str = "[tools.claude]\nmount_mode = \"overlay\"\n\n[tools.codex]\nmount_mode = \"tmpoverlay\"\n\n\
                     [tools.nvim]\nmount_mode = \"readonly\"\n";
