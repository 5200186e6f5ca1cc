//! `.git/config`: keys written inside that the host's git acts on, the guard's restore racing a
//! symlink, and secrets in the host's config shown to the sandbox.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::{
    Findings, Session, bytes, control_marker, control_plant, git_mode, git_ok, inside, on_host,
    prelude, prepared, repo, world,
};
use crate::cases::files::s;
use crate::check;
use crate::harness::{Failure, Mode, Outcome, World, fail, give};

/// The project becomes a repository whose `origin` is a bare clone of it (so a push there is a
/// harmless no-op); returns the clone.
fn repo_with_origin(w: &mut World) -> Result<PathBuf, Failure> {
    let project = w.project.clone();
    repo(w, &project)?;
    let remotes = w.base().join("remotes");
    fs::create_dir(&remotes)?;
    give(w.mode, &remotes)?;
    let origin = remotes.join("origin.git");
    git_ok(
        w,
        &remotes,
        &["clone", "-q", "--bare", s(&project), s(&origin)],
    )?;
    git_ok(w, &project, &["remote", "add", "origin", s(&origin)])?;
    Ok(origin)
}

/// Plants a bare repository in the project whose pre-receive hook is the planted program, and
/// writes keys that send the host's git there or make it run a program.
fn keys_script(w: &World) -> String {
    let (p, evil) = (s(&w.project), w.project.join("evil.sh"));
    let evil = s(&evil);
    format!(
        "{}plant {evil}\ngit init -q --bare .cache/remote.git\n\
         plant .cache/remote.git/hooks/pre-receive\necho trust-prepared\n\
         git config remote.origin.url {p}/.cache/remote.git || echo refused\n\
         git config protocol.allow always || echo refused\n\
         git config url./evil.insteadOf https://example.test/ || echo refused\n\
         git config core.worktree /tmp || echo refused\n\
         git config core.fsmonitor {evil} || echo refused\n",
        prelude(w)
    )
}

/// `trust-config-keys-readwrite` (`readwrite`): `remote.origin.url` (to a bare repository with a
/// pre-receive hook, planted in the project), `protocol.allow`, `url.*.insteadOf`,
/// `core.worktree` and `core.fsmonitor` set inside. After exit the host's `.git/config` is
/// byte-identical to before, and host `git status` and `git push origin HEAD` run nothing.
pub fn config_keys_readwrite(mode: &Mode) -> Outcome {
    let mut c = world(mode)?;
    repo_with_origin(&mut c)?;
    let (project, config) = (c.project.clone(), c.project.join(".git/config"));
    let before = bytes(&config);
    let script = keys_script(&c);
    control_plant(&mut c, &project, &script)?;
    check!(
        bytes(&config) != before,
        "control failed (a harness failure, not a pass): the keys set unsandboxed did not change {}",
        config.display()
    );
    control_marker(&mut c, &[(&project, &["status"])])?;

    let mut w = world(mode)?;
    repo_with_origin(&mut w)?;
    git_mode(&w, "readwrite")?;
    let (project, config) = (w.project.clone(), w.project.join(".git/config"));
    let before = bytes(&config);
    let script = keys_script(&w);
    let run = inside(&mut w, &project, &script)?;
    prepared(&run)?;
    let mut f = Findings::default();
    f.no_marker(&w, "the session");
    let after = bytes(&config);
    f.check(after == before, || {
        format!(
            "ESCAPE: keys set inside reached the host's {}:\n      before: {:?}\n      after:  {:?}",
            config.display(),
            String::from_utf8_lossy(&before),
            String::from_utf8_lossy(&after)
        )
    });
    f.host_steps(
        &mut w,
        &[
            (&project, &["status"]),
            (&project, &["push", "-q", "origin", "HEAD"]),
        ],
    )?;
    f.outcome()
}

/// `trust-guard-symlink-race` (`readwrite`, two sessions): while session A writes
/// `core.fsmonitor` and exits (so airlock's exit-time work on `.git/config` runs), session B keeps
/// replacing `.git/config` with a symlink to `$HOME/.bashrc-standin`, a host file. The stand-in
/// and the host's `.git/config` must both be unchanged.
pub fn guard_symlink_race(mode: &Mode) -> Outcome {
    let mut c = world(mode)?;
    let project = c.project.clone();
    repo(&mut c, &project)?;
    let standin = plant_standin(&c)?;
    let original = bytes(&standin);
    control_plant(
        &mut c,
        &project,
        &format!(
            "set -e; ln -sf {} .git/config; printf '[core]\\n\\tfsmonitor = x\\n' >> .git/config; echo trust-prepared",
            s(&standin)
        ),
    )?;
    check!(
        bytes(&standin) != original,
        "control failed (a harness failure, not a pass): a write through the .git/config symlink did not change {}",
        standin.display()
    );

    let mut w = world(mode)?;
    let project = w.project.clone();
    repo(&mut w, &project)?;
    git_mode(&w, "readwrite")?;
    let standin = plant_standin(&w)?;
    let original = bytes(&standin);
    let config = project.join(".git/config");
    let before = bytes(&config);
    let evil = project.join("evil.sh");
    let mut f = Findings::default();
    // A race: each round is one more chance for it to be won, and a defence must hold in all.
    for round in 1..=ROUNDS {
        let a_script = format!(
            "{}plant {evil}\n: > a-ready-{round}\nwhile [ ! -e a-go-{round} ]; do sleep 0.05; done\n\
             i=0\nwhile [ $i -lt 20 ]; do git config core.fsmonitor {evil} || true; i=$((i+1)); done\n\
             echo trust-prepared\n",
            prelude(&w),
            evil = s(&evil)
        );
        let b_script = format!(
            "exec ./probe probe swap-symlink {} .git/config b-ready-{round} b-stop-{round}",
            s(&standin)
        );
        // A starts first, so the config its session snapshots is the real one; B then races A's
        // exit with a tight loop.
        let ready = |name: &str| project.join(format!("{name}-{round}"));
        let a = Session::start(&mut w, &a_script, &ready("a-ready"), &ready("a-go"))?;
        let mut b = Session::start(&mut w, &b_script, &ready("b-ready"), &ready("b-stop"))?;
        let a_run = a.stop()?;
        check!(
            b.running(),
            "session B ended before session A exited, so nothing raced A's exit"
        );
        let b_run = b.stop()?;
        prepared(&a_run)?;
        f.label(&format!("round {round} of {ROUNDS}"));
        f.no_marker(&w, "the sessions");
        let now = bytes(&standin);
        f.check(now == original, || {
            format!(
                "ESCAPE: the host file {} was written through the .git/config symlink: now {:?}\n      session A: {}\n      session B: {}",
                standin.display(),
                String::from_utf8_lossy(&now),
                a_run.describe(),
                b_run.describe()
            )
        });
        let regular = fs::symlink_metadata(&config).is_ok_and(|m| m.is_file());
        let after = bytes(&config);
        f.check(regular && after == before, || {
            format!(
                "ESCAPE: the host's {} changed ({}): now {:?}\n      session B: {}",
                config.display(),
                fs::read_link(&config).map_or_else(
                    |_| "a regular file".to_owned(),
                    |t| format!("a symlink to {}", t.display())
                ),
                String::from_utf8_lossy(&after),
                b_run.describe()
            )
        });
        f.host_steps(&mut w, &[(&project, &["status"])])?;
        if !f.is_clean() {
            break;
        }
    }
    f.outcome()
}

/// How many times `trust-guard-symlink-race` races a session's exit.
const ROUNDS: u32 = 3;

/// `$HOME/.bashrc-standin` on the host, with known content, owned by the mode's user.
fn plant_standin(w: &World) -> Result<PathBuf, Failure> {
    let path = w.home.join(".bashrc-standin");
    w.put(&path, &format!("STANDIN-{}\n", w.token))?;
    give(w.mode, &path)?;
    Ok(path)
}

fn secrets(w: &World) -> [String; 3] {
    ["SECRET1", "SECRET2", "SECRET3"].map(|s| format!("{s}-{}", w.token))
}

/// Appends a token-bearing remote URL, an auth header and a credential helper to `.git/config`.
fn plant_secrets(w: &World, project: &Path) -> Outcome {
    let [one, two, three] = secrets(w);
    let mut config = fs::OpenOptions::new()
        .append(true)
        .open(project.join(".git/config"))?;
    write!(
        config,
        "[remote \"origin\"]\n\turl = https://x-access-token:{one}@github.com/o/r.git\n\
         \tfetch = +refs/heads/*:refs/remotes/origin/*\n[http]\n\textraheader = AUTHORIZATION: bearer {two}\n\
         [credential]\n\thelper = store-{three}\n"
    )?;
    Ok(())
}

const SHOW_CONFIG: &str = "cat .git/config; git config --list; git remote -v";

/// `trust-config-secrets-hidden` (`readonly` and `readwrite`): a token in `remote.origin.url`,
/// an `http.extraheader` and a `credential.helper` in the host's `.git/config` do not show inside
/// (`cat .git/config`, `git config --list`, `git remote -v`), `git remote -v` shows the URL
/// without its credentials, and the host's file keeps them unchanged.
pub fn config_secrets_hidden(mode: &Mode) -> Outcome {
    let mut c = world(mode)?;
    let project = c.project.clone();
    repo(&mut c, &project)?;
    plant_secrets(&c, &project)?;
    let shown = on_host(&mut c, &project, SHOW_CONFIG)?;
    for secret in secrets(&c) {
        if !shown.stdout.contains(&secret) {
            return Err(fail(format!(
                "control failed (a harness failure, not a pass): unsandboxed, {secret} is not shown:\n      {}",
                shown.describe()
            )));
        }
    }

    let mut f = Findings::default();
    for git in ["readonly", "readwrite"] {
        let mut w = world(mode)?;
        let project = w.project.clone();
        repo(&mut w, &project)?;
        plant_secrets(&w, &project)?;
        git_mode(&w, git)?;
        let config = project.join(".git/config");
        let before = bytes(&config);
        let run = inside(&mut w, &project, SHOW_CONFIG)?;
        f.label(git);
        let leaked: Vec<String> = secrets(&w)
            .into_iter()
            .filter(|secret| run.stdout.contains(secret) || run.stderr.contains(secret))
            .collect();
        let sanitised = run
            .stdout
            .lines()
            .any(|l| l == "origin\thttps://github.com/o/r.git (fetch)");
        f.check(leaked.is_empty() && sanitised, || {
            let mut wrong = Vec::new();
            if !leaked.is_empty() {
                wrong.push(format!(
                    "LEAK: {} from the host's .git/config shown inside",
                    leaked.join(", ")
                ));
            }
            if !sanitised {
                wrong.push(
                    "`git remote -v` does not show origin as https://github.com/o/r.git".to_owned(),
                );
            }
            format!("{}:\n      {}", wrong.join("; "), run.describe())
        });
        let after = bytes(&config);
        f.check(after == before, || {
            format!(
                "the host's {} was rewritten: now {:?}",
                config.display(),
                String::from_utf8_lossy(&after)
            )
        });
    }
    f.outcome()
}
