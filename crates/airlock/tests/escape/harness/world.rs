//! The fixture tree each case gets, and the host-side things a case sets up around it.

use std::fs;
use std::io;
use std::os::unix::fs::{PermissionsExt as _, chown, lchown};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::mode::Mode;
use super::pty::run_on_pty;
use super::run::{Probe, Run, finish};
use super::{Failure, fail, token};

/// The `--network` mode of one run.
#[derive(Clone, Copy, Debug)]
pub enum Net {
    Host,
    None,
}

impl Net {
    fn arg(self) -> &'static str {
        match self {
            Net::Host => "host",
            Net::None => "none",
        }
    }
}

/// A fixture tree for one case, under a fresh 0755 temp dir:
/// `home/` (the host `$HOME`, with planted secrets), `project/` (with a probe copy, a planted
/// file and `.env` files) and `sibling/` (beside the project, with its own secret).
pub struct World<'m> {
    pub mode: &'m Mode,
    root: tempfile::TempDir,
    pub home: PathBuf,
    pub project: PathBuf,
    pub sibling: PathBuf,
    pub token: String,
    logs: PathBuf,
    runs: usize,
}

/// What the planted files contain, so a leak is recognisable anywhere in the output.
pub struct Secrets;

impl Secrets {
    pub fn ssh(w: &World) -> String {
        format!("SSH-PRIVATE-KEY-{}", w.token)
    }
    pub fn aws(w: &World) -> String {
        format!("AWS-SECRET-{}", w.token)
    }
    pub fn env(w: &World) -> String {
        format!("DOTENV-SECRET-{}", w.token)
    }
    pub fn sibling(w: &World) -> String {
        format!("SIBLING-SECRET-{}", w.token)
    }
    pub fn planted(w: &World) -> String {
        format!("PLANTED-{}", w.token)
    }
}

impl<'m> World<'m> {
    pub fn new(mode: &'m Mode) -> io::Result<World<'m>> {
        let root = tempfile::Builder::new()
            .prefix("airlock-escape-")
            .tempdir()?;
        fs::set_permissions(root.path(), fs::Permissions::from_mode(0o755))?;
        let base = root.path().to_path_buf();
        let logs = base.join("logs");
        fs::create_dir(&logs)?;
        let mut w = World {
            mode,
            home: base.join("home"),
            project: base.join("project"),
            sibling: base.join("sibling"),
            token: token(),
            logs,
            runs: 0,
            root,
        };
        w.plant()?;
        Ok(w)
    }

    fn plant(&mut self) -> io::Result<()> {
        let ssh = self.home.join(".ssh");
        fs::create_dir_all(&ssh)?;
        fs::set_permissions(&ssh, fs::Permissions::from_mode(0o700))?;
        self.put(&ssh.join("id_ed25519"), &Secrets::ssh(self))?;
        fs::set_permissions(ssh.join("id_ed25519"), fs::Permissions::from_mode(0o600))?;
        self.put(&self.home.join(".aws/credentials"), &Secrets::aws(self))?;
        for other in Self::other_credentials() {
            self.put(
                &self.home.join(other),
                &format!("CREDENTIAL-{}", self.token),
            )?;
        }
        self.put(&self.project.join("planted.txt"), &Secrets::planted(self))?;
        self.put(&self.project.join(".env"), &Secrets::env(self))?;
        self.put(
            &self.project.join("config/.env.production"),
            &Secrets::env(self),
        )?;
        self.put(&self.sibling.join("secret"), &Secrets::sibling(self))?;
        let probe = self.project.join("probe");
        fs::copy(&self.mode.probe, &probe)?;
        fs::set_permissions(&probe, fs::Permissions::from_mode(0o755))?;
        self.give_to_user()
    }

    /// Credential files that must be absent inside, relative to `$HOME`.
    pub fn other_credentials() -> [&'static str; 6] {
        [
            ".gnupg/private-keys-v1.d/airlock.key",
            ".netrc",
            ".git-credentials",
            ".kube/config",
            ".docker/config.json",
            ".config/gcloud/application_default_credentials.json",
        ]
    }

    /// Writes a host file (creating parents) for the fixture.
    pub fn put(&self, path: &Path, contents: &str) -> io::Result<()> {
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::write(path, contents)
    }

    /// In the unprivileged mode, hands home, project and sibling to that user (recursively).
    pub fn give_to_user(&self) -> io::Result<()> {
        if let Some(user) = &self.mode.user {
            for dir in [&self.home, &self.project, &self.sibling] {
                chown_tree(dir, user.uid, user.gid)?;
            }
        }
        Ok(())
    }

    /// The temp dir that holds home, project and sibling.
    pub fn base(&self) -> &Path {
        self.root.path()
    }

    /// A command running the airlock copy as the mode's user in `cwd`, output going to log files.
    pub fn airlock_command(
        &mut self,
        cwd: &Path,
        args: &[&str],
    ) -> io::Result<(Command, PathBuf, PathBuf)> {
        let mut cmd = self.mode.command(&self.mode.airlock, &self.home);
        cmd.args(args).current_dir(cwd);
        let (out, err) = self.log_files()?;
        cmd.stdout(fs::File::create(&out)?)
            .stderr(fs::File::create(&err)?);
        Ok((cmd, out, err))
    }

    fn log_files(&mut self) -> io::Result<(PathBuf, PathBuf)> {
        self.runs += 1;
        let (out, err) = (
            self.logs.join(format!("{}.out", self.runs)),
            self.logs.join(format!("{}.err", self.runs)),
        );
        Ok((out, err))
    }

    /// Runs `airlock <args>` from the project and waits for it, with a deadline.
    pub fn airlock(&mut self, args: &[&str]) -> Result<Run, Failure> {
        let cwd = self.project.clone();
        self.airlock_in(&cwd, args)
    }

    /// Runs `airlock <args>` from `cwd` and waits for it, with a deadline.
    pub fn airlock_in(&mut self, cwd: &Path, args: &[&str]) -> Result<Run, Failure> {
        let (mut cmd, out, err) = self.airlock_command(cwd, args)?;
        let described = format!("(cwd {}) airlock {}", cwd.display(), args.join(" "));
        let child = cmd
            .spawn()
            .map_err(|e| fail(format!("could not start {described}: {e}")))?;
        finish(child, described, &out, &err)
    }

    /// Runs `airlock <args>` from the project on a fresh controlling pseudo-terminal.
    pub fn airlock_on_pty(&mut self, args: &[&str]) -> Result<Run, Failure> {
        let mut cmd = self.mode.command(&self.mode.airlock, &self.home);
        cmd.args(args).current_dir(&self.project);
        let owner = self.mode.uid;
        run_on_pty(cmd, format!("(on a pty) airlock {}", args.join(" ")), owner)
    }

    /// The host-side twin of [`World::airlock_on_pty`]: the probe run unsandboxed on a pty.
    pub fn host_probe_on_pty(&mut self, action: &[&str]) -> Result<Probe, Failure> {
        let mut cmd = self.mode.command(&self.mode.probe, &self.home);
        cmd.arg("probe").args(action).current_dir(&self.project);
        let described = format!(
            "(on the host, unsandboxed, on a pty) probe {}",
            action.join(" ")
        );
        Probe::parse(run_on_pty(cmd, described, self.mode.uid)?)
    }

    /// Runs the probe inside the sandbox on a fresh controlling pseudo-terminal.
    pub fn probe_on_pty(&mut self, action: &[&str]) -> Result<Probe, Failure> {
        let mut args = vec!["run", "--", "./probe", "probe"];
        args.extend_from_slice(action);
        Probe::parse(self.airlock_on_pty(&args)?)
    }

    /// Runs the probe inside the sandbox with `customize` applied to the airlock command
    /// (extra environment, inherited fds).
    pub fn probe_with(
        &mut self,
        action: &[&str],
        customize: impl FnOnce(&mut Command),
    ) -> Result<Probe, Failure> {
        let mut args = vec!["run", "--", "./probe", "probe"];
        args.extend_from_slice(action);
        let cwd = self.project.clone();
        let (mut cmd, out, err) = self.airlock_command(&cwd, &args)?;
        customize(&mut cmd);
        let described = format!("airlock {}", args.join(" "));
        let child = cmd
            .spawn()
            .map_err(|e| fail(format!("could not start {described}: {e}")))?;
        Probe::parse(finish(child, described, &out, &err)?)
    }

    /// The host-side twin of [`World::probe_with`]: the probe run unsandboxed, customised alike.
    pub fn host_probe_customized(
        &mut self,
        action: &[&str],
        customize: impl FnOnce(&mut Command),
    ) -> Result<Probe, Failure> {
        let mut cmd = self.mode.command(&self.mode.probe, &self.home);
        cmd.arg("probe").args(action).current_dir(&self.project);
        customize(&mut cmd);
        let (out, err) = self.log_files()?;
        cmd.stdout(fs::File::create(&out)?)
            .stderr(fs::File::create(&err)?);
        let described = format!("(on the host, unsandboxed) probe {}", action.join(" "));
        let child = cmd
            .spawn()
            .map_err(|e| fail(format!("could not start {described}: {e}")))?;
        Probe::parse(finish(child, described, &out, &err)?)
    }

    /// Runs the probe inside the sandbox: `airlock run --network <net> -- ./probe probe <action…>`.
    pub fn probe(&mut self, net: Net, action: &[&str]) -> Result<Probe, Failure> {
        let mut args = vec!["run", "--network", net.arg(), "--", "./probe", "probe"];
        args.extend_from_slice(action);
        let run = self.airlock(&args)?;
        Probe::parse(run)
    }

    /// Runs a probe at `exe` on the host, unsandboxed, as the mode's user: the control showing
    /// the attempt itself works, so a refusal inside is the sandbox's doing.
    pub fn host_probe_with(&mut self, exe: &Path, action: &[&str]) -> Result<Probe, Failure> {
        let mut cmd = self.mode.command(exe, &self.home);
        cmd.arg("probe").args(action).current_dir(&self.project);
        let (out, err) = self.log_files()?;
        cmd.stdout(fs::File::create(&out)?)
            .stderr(fs::File::create(&err)?);
        let described = format!(
            "(on the host, unsandboxed) {} probe {}",
            exe.display(),
            action.join(" ")
        );
        let child = cmd
            .spawn()
            .map_err(|e| fail(format!("could not start {described}: {e}")))?;
        Probe::parse(finish(child, described, &out, &err)?)
    }

    pub fn host_probe(&mut self, action: &[&str]) -> Result<Probe, Failure> {
        let exe = self.mode.probe.clone();
        self.host_probe_with(&exe, action)
    }

    /// Runs a host command the case built (`mode.command(..)`, `airlock_command`) to completion
    /// with the run deadline, its output going to fresh log files. Its status is the caller's to
    /// judge: an attack's host-side step may fail, a setup step must not.
    pub fn run_host(&mut self, mut cmd: Command, described: String) -> Result<Run, Failure> {
        let (out, err) = self.log_files()?;
        cmd.stdout(fs::File::create(&out)?)
            .stderr(fs::File::create(&err)?);
        let child = cmd
            .spawn()
            .map_err(|e| fail(format!("could not start {described}: {e}")))?;
        finish(child, described, &out, &err)
    }

    /// Spawns a long `sleep` on the host as the mode's user (a process the sandbox must not reach).
    pub fn host_sleeper(&self) -> io::Result<Sleeper> {
        let mut cmd = self.mode.command(Path::new("/usr/bin/sleep"), &self.home);
        cmd.arg("1000").stdout(Stdio::null()).stderr(Stdio::null());
        Ok(Sleeper(cmd.spawn()?))
    }
}

/// Recursively chowns a tree, not following symlinks.
pub fn chown_tree(path: &Path, uid: u32, gid: u32) -> io::Result<()> {
    let meta = fs::symlink_metadata(path)?;
    lchown(path, Some(uid), Some(gid))?;
    if meta.is_dir() {
        for entry in fs::read_dir(path)? {
            chown_tree(&entry?.path(), uid, gid)?;
        }
    }
    Ok(())
}

/// Chowns one path to the mode's user, if the suite switches users.
pub fn give(mode: &Mode, path: &Path) -> io::Result<()> {
    match &mode.user {
        Some(u) => chown(path, Some(u.uid), Some(u.gid)),
        None => Ok(()),
    }
}

/// Host paths a case may cause to be created outside its temp dir (against a broken sandbox);
/// removed when dropped, whatever the outcome.
pub struct Leftovers(pub Vec<PathBuf>);

impl Drop for Leftovers {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = fs::remove_file(path);
        }
    }
}

/// A host process that is killed and reaped when dropped.
pub struct Sleeper(pub Child);

impl Sleeper {
    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.0.try_wait(), Ok(None))
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
