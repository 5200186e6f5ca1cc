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
    /// Kills the server and waits (up to 5 s) for the pane's shell to end: a shell writes its
    /// history on the hangup, and a write after the test's directory is removed would leave it
    /// behind in the machine's /tmp.
    fn drop(&mut self) {
        let pane = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(["display-message", "-p", "-t", "0", "#{pane_pid}"])
            .output()
            .ok()
            .and_then(|out| stdout(&out).trim().parse::<u32>().ok());
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while let Some(pid) = pane {
            let gone = !Path::new(&format!("/proc/{pid}")).exists();
            if gone || std::time::Instant::now() > deadline {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}
