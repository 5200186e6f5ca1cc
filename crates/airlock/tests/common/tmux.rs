//! A tmux server of a test's own: a real interactive program in a pane, keys typed into it, the
//! screen read back.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::{report, stdout};

/// A tmux server of the test's own, removed when dropped.
pub struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    pub fn start(socket: PathBuf, cwd: &Path, env: &[(&str, String)], shell: &[&str]) -> Tmux {
        let mut cmd = Command::new("tmux");
        cmd.arg("-S").arg(&socket).args([
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-x",
            "120",
            "-y",
            "30",
            "-c",
        ]);
        cmd.arg(cwd).arg("--").arg("env").arg("-i");
        for (k, v) in env {
            cmd.arg(format!("{k}={v}"));
        }
        cmd.args(shell);
        let out = cmd.output().expect("tmux");
        assert!(out.status.success(), "tmux: {}", report(&out));
        Tmux { socket }
    }

    pub fn type_line(&self, line: &str) {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(["send-keys", "-t", "0", "-l", line])
            .output()
            .expect("tmux send-keys");
        assert!(out.status.success(), "{}", report(&out));
        Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(["send-keys", "-t", "0", "Enter"])
            .output()
            .expect("enter");
    }

    /// Sends one key (`o`, `Enter`, `C-c`) without Enter.
    pub fn key(&self, key: &str) {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(["send-keys", "-t", "0", key])
            .output()
            .expect("tmux send-keys");
        assert!(out.status.success(), "{}", report(&out));
    }

    pub fn screen(&self) -> String {
        let out: Output = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(["capture-pane", "-p", "-t", "0"])
            .output()
            .expect("capture");
        stdout(&out)
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}
