//! Files the host trusts: git metadata, `PATH` entries and config files the sandbox can write, which
//! the host's git (or airlock itself) reads and acts on later, outside the sandbox.
//!
//! Each attack plants a program the way a hostile workload would: a shell script appending to a
//! marker file outside the project, in a directory the sandbox does not have (so the script can
//! only leave a mark when it runs on the host). Then the host action that would run it (`git
//! status`, `git commit`, `git push`, the next `airlock run`) is taken as the mode's user: the
//! marker must not appear. Each control plants the same way unsandboxed, as the same user, and
//! the same host action must create the marker: the attack is real, so its absence after a
//! session is the sandbox's doing. A control that fails is a harness failure, never a pass.
//!
//! Attack assertions are collected ([`Findings`]) rather than stopping at the first, so one run
//! says everything that reached the host.

mod config;
mod launch;
mod masks;
mod refs;
mod repos;

pub use config::{config_keys_readwrite, config_secrets_hidden, guard_symlink_race};
pub use launch::{git_link_not_followed, path_planted_git};
pub use masks::{git_config_stays_sanitised, hide_globs, mask_host_replaces, mask_moved_parent};
pub use refs::commits_come_back_as_refs;
pub use repos::{
    commondir_redirect, hookspath_in_project, repo_created_inside, submodule_gitdir_redirect,
};

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use super::files::s;
use crate::harness::{
    CONDITION_DEADLINE, Failure, Mode, Outcome, RUN_DEADLINE, Run, World, fail, give, skip,
    status_text, wait_deadline, wait_until,
};

/// What every host git command the suite runs gets: an identity, and local clones allowed.
const GIT_FLAGS: [&str; 6] = [
    "-c",
    "user.name=t",
    "-c",
    "user.email=t@t",
    "-c",
    "protocol.file.allow=always",
];

/// Printed by a planting script once its setup is done, before the step a defence may refuse:
/// proof that the sandbox ran the script, so a missing marker is not a sandbox that never started.
const PREPARED: &str = "trust-prepared";

/// A world for a host-trust case: git on the host (else the case is skipped), an empty marker
/// directory the mode's user can write, and a git identity in the host `~/.gitconfig`.
pub fn world(mode: &Mode) -> Result<World<'_>, Failure> {
    if let Err(e) = Command::new("git").arg("--version").output() {
        return Err(skip(format!(
            "git is not installed ({e}); scripts/test installs it"
        )));
    }
    let w = World::new(mode)?;
    let markers = w.base().join("markers");
    fs::create_dir(&markers)?;
    give(mode, &markers)?;
    w.put(
        &w.home.join(".gitconfig"),
        "[user]\n\tname = t\n\temail = t@t\n",
    )?;
    w.give_to_user()?;
    Ok(w)
}

/// The file the planted program appends to: outside the project, and not mounted in the sandbox.
pub fn marker(w: &World) -> PathBuf {
    w.base().join("markers/ran")
}

/// `set -e`, and `plant FILE`: writes the planted program to FILE and makes it executable. The
/// program appends `ran: <its path> <its arguments>` to the marker.
pub fn prelude(w: &World) -> String {
    format!(
        "set -e\nplant() {{ printf '#!/bin/sh\\necho \"ran: $0 $*\" >> %s\\n' '{}' > \"$1\"; chmod +x \"$1\"; }}\n",
        s(&marker(w))
    )
}

/// `[tools.git] mode = <git_mode>` in the host `~/.config/airlock/config.toml`.
pub fn git_mode(w: &World, git_mode: &str) -> Outcome {
    w.put(
        &w.home.join(".config/airlock/config.toml"),
        &format!("[tools.git]\nmode = \"{git_mode}\"\n"),
    )?;
    w.give_to_user()?;
    Ok(())
}

/// `airlock run --network none -- sh -c <script>` from `dir`.
pub fn inside(w: &mut World, dir: &Path, script: &str) -> Result<Run, Failure> {
    w.airlock_in(dir, &["run", "--network", "none", "--", "sh", "-c", script])
}

/// `sh -c <script>` on the host, unsandboxed, as the mode's user, in `dir`.
pub fn on_host(w: &mut World, dir: &Path, script: &str) -> Result<Run, Failure> {
    let mut cmd = w.mode.command(Path::new("/bin/sh"), &w.home);
    cmd.arg("-c").arg(script).current_dir(dir);
    w.run_host(
        cmd,
        format!(
            "(on the host, unsandboxed, in {}) sh -c {script:?}",
            dir.display()
        ),
    )
}

/// The host's git as the mode's user in `dir`; its status is the caller's to judge.
pub fn host_git(w: &mut World, dir: &Path, args: &[&str]) -> Result<Run, Failure> {
    let mut cmd = w.mode.command(Path::new("git"), &w.home);
    cmd.args(GIT_FLAGS).args(args).current_dir(dir);
    w.run_host(
        cmd,
        format!("(on the host, in {}) git {}", dir.display(), args.join(" ")),
    )
}

/// A host git command the fixture needs: it must succeed. Returns its stdout.
pub fn git_ok(w: &mut World, dir: &Path, args: &[&str]) -> Result<String, Failure> {
    let run = host_git(w, dir, args)?;
    if run.code() != Some(0) {
        return Err(fail(format!(
            "setting up the fixture failed:\n      {}",
            run.describe()
        )));
    }
    Ok(run.stdout)
}

/// `dir` becomes a repository on `main` with one empty commit, made by the mode's user.
pub fn repo(w: &mut World, dir: &Path) -> Outcome {
    git_ok(w, dir, &["init", "-q", "-b", "main"])?;
    git_ok(w, dir, &["commit", "-q", "--allow-empty", "-m", "first"])?;
    Ok(())
}

/// A bare repository `<base>/remotes/<name>.git` holding one commit, made by the mode's user.
pub fn bare_with_commit(w: &mut World, name: &str) -> Result<PathBuf, Failure> {
    let remotes = w.base().join("remotes");
    if !remotes.exists() {
        fs::create_dir(&remotes)?;
        give(w.mode, &remotes)?;
    }
    let seed = remotes.join(format!("{name}-seed"));
    fs::create_dir(&seed)?;
    give(w.mode, &seed)?;
    repo(w, &seed)?;
    let bare = remotes.join(format!("{name}.git"));
    git_ok(w, &remotes, &["clone", "-q", "--bare", s(&seed), s(&bare)])?;
    Ok(bare)
}

/// The sandbox must have run the planting script's setup (it printed [`PREPARED`]); otherwise
/// the attack proved nothing and the case fails as a harness failure.
pub fn prepared(run: &Run) -> Outcome {
    if run.stdout.contains(PREPARED) {
        return Ok(());
    }
    Err(fail(format!(
        "the sandbox did not run the attack's setup (no {PREPARED:?} printed), so the attack proves nothing:\n      {}",
        run.describe()
    )))
}

/// A control's planting, unsandboxed: it must run to the end.
pub fn control_plant(w: &mut World, dir: &Path, script: &str) -> Outcome {
    let run = on_host(w, dir, script)?;
    if run.code() == Some(0) && run.stdout.contains(PREPARED) {
        return Ok(());
    }
    Err(fail(format!(
        "control failed (a harness failure, not a pass): the planting script did not run unsandboxed:\n      {}",
        run.describe()
    )))
}

/// A control's host steps: the host git commands, each in its directory; afterwards the marker
/// must be there, or the attack does not work here and its absence after a session means nothing.
pub fn control_marker(w: &mut World, steps: &[(&Path, &[&str])]) -> Outcome {
    let mut ran = Vec::new();
    for (dir, args) in steps {
        ran.push(host_git(w, dir, args)?.describe());
    }
    if marker(w).exists() {
        return Ok(());
    }
    Err(fail(format!(
        "control failed (a harness failure, not a pass): planted unsandboxed, the host's git did not run the planted program:\n      {}",
        ran.join("\n      ")
    )))
}

/// Attack assertions, collected so that one run reports everything that reached the host.
#[derive(Default)]
pub struct Findings {
    found: Vec<String>,
    /// Prefixed to what is found from now on (the git mode of this part of a case).
    label: String,
}

impl Findings {
    /// Labels what is found from now on, e.g. with the git mode being tried.
    pub fn label(&mut self, label: &str) {
        self.label = format!("[{label}] ");
    }

    pub fn check(&mut self, ok: bool, msg: impl FnOnce() -> String) {
        if !ok {
            let msg = msg();
            self.found.push(format!("{}{msg}", self.label));
        }
    }

    /// The planted program must not have run since the last look; a mark found is reported
    /// against `after` and cleared, so the next step is judged on its own.
    pub fn no_marker(&mut self, w: &World, after: &str) {
        let marker = marker(w);
        if let Ok(ran) = fs::read_to_string(&marker) {
            let _ = fs::remove_file(&marker);
            self.check(false, || {
                format!(
                    "ESCAPE: the planted program ran on the host after {after}: {}",
                    ran.trim().replace('\n', "; ")
                )
            });
        }
    }

    /// Runs each host git command and checks the marker after each.
    pub fn host_steps(&mut self, w: &mut World, steps: &[(&Path, &[&str])]) -> Outcome {
        for (dir, args) in steps {
            let run = host_git(w, dir, args)?;
            self.no_marker(w, &format!("`{}`", run.described));
        }
        Ok(())
    }

    pub fn is_clean(&self) -> bool {
        self.found.is_empty()
    }

    pub fn outcome(self) -> Outcome {
        if self.found.is_empty() {
            return Ok(());
        }
        Err(fail(self.found.join("\n      ")))
    }
}

/// The file's bytes, or what went wrong reading it (so a comparison shows it).
pub fn bytes(path: &Path) -> Vec<u8> {
    fs::read(path).unwrap_or_else(|e| format!("<unreadable: {e}>").into_bytes())
}

/// Whether `text` names `name` as a path component: `.git` counts, `.gitconfig` does not.
pub fn names(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(at, _)| {
        text[at + name.len()..]
            .chars()
            .next()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
    })
}

/// A session left running in the background (`airlock run --network none -- sh -c <script>`
/// from the project), for cases where two sessions hold the project at once. It is ready once
/// its script created `ready`, and stops once the host creates `stop`; killed when dropped.
pub struct Session {
    child: Option<Child>,
    stop: PathBuf,
    out: PathBuf,
    err: PathBuf,
    described: String,
}

impl Session {
    pub fn start(
        w: &mut World,
        script: &str,
        ready: &Path,
        stop: &Path,
    ) -> Result<Session, Failure> {
        let cwd = w.project.clone();
        let args = ["run", "--network", "none", "--", "sh", "-c", script];
        let (mut cmd, out, err) = w.airlock_command(&cwd, &args)?;
        let described = format!("(background session) airlock {}", args.join(" "));
        let child = cmd
            .spawn()
            .map_err(|e| fail(format!("could not start {described}: {e}")))?;
        let mut session = Session {
            child: Some(child),
            stop: stop.to_path_buf(),
            out,
            err,
            described,
        };
        let mut exited = None;
        let ready_seen = wait_until(CONDITION_DEADLINE, || {
            if let Some(Ok(Some(status))) = session.child.as_mut().map(Child::try_wait) {
                exited = Some(status);
                return true;
            }
            ready.exists()
        });
        if !ready_seen || exited.is_some() {
            return Err(fail(format!(
                "the background session never became ready ({}):\n      {}\n      stdout: {}\n      stderr: {}",
                exited.map_or_else(|| format!("not within {CONDITION_DEADLINE:?}"), status_text),
                session.described,
                session.log(true),
                session.log(false)
            )));
        }
        Ok(session)
    }

    fn log(&self, stdout: bool) -> String {
        let path = if stdout { &self.out } else { &self.err };
        fs::read_to_string(path)
            .unwrap_or_default()
            .trim()
            .to_owned()
    }

    /// Whether it is still running: the other session must overlap it for the case to mean
    /// anything.
    pub fn running(&mut self) -> bool {
        matches!(self.child.as_mut().map(Child::try_wait), Some(Ok(None)))
    }

    /// Tells it to stop and waits for it (with the run deadline).
    pub fn stop(mut self) -> Result<Run, Failure> {
        fs::write(&self.stop, "")?;
        let mut child = self.child.take().expect("a session is stopped once");
        let Some(status) = wait_deadline(&mut child, RUN_DEADLINE)? else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(fail(format!(
                "{} did not stop within {RUN_DEADLINE:?} of {} appearing",
                self.described,
                self.stop.display()
            )));
        };
        Ok(Run {
            described: self.described.clone(),
            status,
            stdout: self.log(true),
            stderr: self.log(false),
            terminal_mode: None,
        })
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = fs::write(&self.stop, "");
            if !matches!(wait_deadline(&mut child, CONDITION_DEADLINE), Ok(Some(_))) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}
