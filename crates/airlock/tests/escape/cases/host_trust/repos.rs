//! Git dirs of the sandbox's making that the host's git would use: a submodule's `.git` file
//! pointed elsewhere, a repository created inside, a `commondir` redirect, a hooks path in the
//! project.

use std::fs;
use std::path::Path;

use super::{
    Findings, bare_with_commit, control_marker, control_plant, git_mode, git_ok, inside, prelude,
    prepared, repo, world,
};
use crate::cases::files::s;
use crate::harness::{Failure, Mode, Outcome, Run, World, give};

/// `project` gets a real submodule `sub`, added from a local bare repository and committed.
fn superproject_with_submodule(w: &mut World) -> Outcome {
    let upstream = bare_with_commit(w, "upstream")?;
    let project = w.project.clone();
    repo(w, &project)?;
    git_ok(
        w,
        &project,
        &["submodule", "add", "-q", s(&upstream), "sub"],
    )?;
    git_ok(w, &project, &["commit", "-q", "-m", "add sub"])?;
    Ok(())
}

/// Makes `.cache/evil` a git dir whose worktree is `sub` and whose `core.fsmonitor` is the
/// planted program, then points `sub/.git` at it.
fn redirect_script(w: &World) -> String {
    let p = s(&w.project);
    format!(
        "{}mkdir -p .cache\nplant .cache/evil.sh\ngit init -q --bare .cache/evil\n\
         git --git-dir=.cache/evil config core.bare false\n\
         git --git-dir=.cache/evil config core.worktree {p}/sub\n\
         git --git-dir=.cache/evil config core.fsmonitor {p}/.cache/evil.sh\n\
         echo trust-prepared\n\
         printf 'gitdir: ../.cache/evil\\n' > sub/.git || echo rewrite-refused\n",
        prelude(w)
    )
}

/// `trust-submodule-gitdir-redirect` (default `readonly` mode): a submodule's `.git` file is
/// rewritten inside to name a git dir the sandbox made, with `core.fsmonitor` set. The rewrite
/// must fail inside or be undone at exit: host `git status` in the superproject and in `sub` runs
/// nothing.
pub fn submodule_gitdir_redirect(mode: &Mode) -> Outcome {
    let mut c = world(mode)?;
    superproject_with_submodule(&mut c)?;
    let (project, sub) = (c.project.clone(), c.project.join("sub"));
    let script = redirect_script(&c);
    control_plant(&mut c, &project, &script)?;
    control_marker(&mut c, &[(&project, &["status"]), (&sub, &["status"])])?;

    let mut w = world(mode)?;
    superproject_with_submodule(&mut w)?;
    let (project, sub) = (w.project.clone(), w.project.join("sub"));
    let script = redirect_script(&w);
    let run = inside(&mut w, &project, &script)?;
    prepared(&run)?;
    let mut f = Findings::default();
    f.no_marker(&w, "the session");
    f.host_steps(&mut w, &[(&project, &["status"]), (&sub, &["status"])])?;
    f.outcome()
}

/// Plants the program, runs `git init -q <dir>`, and plants a pre-commit hook and
/// `core.fsmonitor` in the new repository.
fn init_script(w: &World, dir: &str) -> String {
    let evil = w.project.join("evil.sh");
    format!(
        "{}plant {evil}\ngit init -q {dir}\nplant {dir}/.git/hooks/pre-commit\n\
         git -C {dir} config core.fsmonitor {evil}\necho trust-prepared\n",
        prelude(w),
        evil = s(&evil)
    )
}

const STATUS: &[&str] = &["status"];
const COMMIT: &[&str] = &["commit", "-q", "--allow-empty", "-m", "x"];

/// After a session that created a repository in `dir`: `.git` is gone, renamed to `quarantine`
/// (holding the repository: its `HEAD` is there), airlock said `quarantined`, and the host's git
/// there runs nothing.
fn quarantined(
    w: &mut World,
    run: &Run,
    dir: &Path,
    quarantine: &str,
    f: &mut Findings,
) -> Outcome {
    f.no_marker(w, &format!("the session ({})", run.described));
    let dot_git = dir.join(".git");
    f.check(fs::symlink_metadata(&dot_git).is_err(), || {
        format!(
            "ESCAPE: the repository created inside is still at {} on the host",
            dot_git.display()
        )
    });
    let kept = dir.join(quarantine);
    f.check(kept.join("HEAD").is_file(), || {
        format!(
            "the repository created inside was not renamed to {} (no HEAD there)",
            kept.display()
        )
    });
    f.check(run.stderr.contains("quarantined"), || {
        format!(
            "airlock did not say it quarantined the repository:\n      {}",
            run.describe()
        )
    });
    f.host_steps(w, &[(dir, STATUS), (dir, COMMIT)])
}

/// `trust-repo-created-inside`: a repository created inside (with a pre-commit hook and
/// `core.fsmonitor` planted) is renamed at exit to the first free `.git.airlock-quarantine`,
/// `-2`, … in its directory, with a message, so the host's `git status` / `git commit` there run
/// nothing. (a) the project had no `.git` (run twice: the second lands in `-2`); (b) in `sub` of a
/// project that has one.
pub fn repo_created_inside(mode: &Mode) -> Outcome {
    let mut c = world(mode)?;
    let project = c.project.clone();
    let script = init_script(&c, ".");
    control_plant(&mut c, &project, &script)?;
    control_marker(&mut c, &[(&project, STATUS), (&project, COMMIT)])?;
    let mut c = world(mode)?;
    let project = c.project.clone();
    repo(&mut c, &project)?;
    let script = init_script(&c, "sub");
    control_plant(&mut c, &project, &script)?;
    let sub = project.join("sub");
    control_marker(&mut c, &[(&sub, STATUS), (&sub, COMMIT)])?;

    let mut f = Findings::default();
    let mut w = world(mode)?;
    let project = w.project.clone();
    let script = init_script(&w, ".");
    let run = inside(&mut w, &project, &script)?;
    prepared(&run)?;
    f.label("(a) no .git before");
    quarantined(&mut w, &run, &project, ".git.airlock-quarantine", &mut f)?;
    // The second session builds on the first quarantine; after an escape it would only measure
    // the leftovers of the first.
    if f.is_clean() {
        let run = inside(&mut w, &project, &script)?;
        prepared(&run)?;
        f.label("(a) second session");
        quarantined(&mut w, &run, &project, ".git.airlock-quarantine-2", &mut f)?;
    }

    let mut w = world(mode)?;
    let project = w.project.clone();
    repo(&mut w, &project)?;
    let script = init_script(&w, "sub");
    let run = inside(&mut w, &project, &script)?;
    prepared(&run)?;
    f.label("(b) sub/ of a repository");
    quarantined(
        &mut w,
        &run,
        &project.join("sub"),
        ".git.airlock-quarantine",
        &mut f,
    )?;
    f.outcome()
}

/// Makes `evil` a git dir with `core.fsmonitor` set, then points `.git/commondir` at it (git then
/// takes config, refs and objects from there).
fn commondir_script(w: &World) -> String {
    let evil = w.project.join("evil.sh");
    format!(
        "{}plant {evil}\ngit init -q --bare evil\ngit --git-dir=evil config core.bare false\n\
         git --git-dir=evil config core.fsmonitor {evil}\necho trust-prepared\n\
         echo ../evil > .git/commondir || echo commondir-refused\n",
        prelude(w),
        evil = s(&evil)
    )
}

/// `trust-commondir-redirect` (`readwrite` and `disabled`): `.git/commondir` written inside to
/// name a git dir of the sandbox's making. `.git` writes stay in the sandbox: no
/// `.git/commondir` on the host after exit, and host `git status` runs nothing.
pub fn commondir_redirect(mode: &Mode) -> Outcome {
    let mut c = world(mode)?;
    let project = c.project.clone();
    repo(&mut c, &project)?;
    let script = commondir_script(&c);
    control_plant(&mut c, &project, &script)?;
    control_marker(&mut c, &[(&project, STATUS)])?;

    let mut f = Findings::default();
    for git in ["readwrite", "disabled"] {
        let mut w = world(mode)?;
        let project = w.project.clone();
        repo(&mut w, &project)?;
        git_mode(&w, git)?;
        let script = commondir_script(&w);
        let run = inside(&mut w, &project, &script)?;
        prepared(&run)?;
        f.label(git);
        f.no_marker(&w, "the session");
        let commondir = project.join(".git/commondir");
        f.check(fs::symlink_metadata(&commondir).is_err(), || {
            format!(
                "ESCAPE: {} written inside is on the host: {:?}",
                commondir.display(),
                fs::read_to_string(&commondir).unwrap_or_default()
            )
        });
        f.host_steps(&mut w, &[(&project, STATUS)])?;
    }
    f.outcome()
}

/// A repository using `core.hooksPath = .husky`, with `.husky/` present.
fn husky_repo(w: &mut World) -> Result<(), Failure> {
    let project = w.project.clone();
    repo(w, &project)?;
    git_ok(w, &project, &["config", "core.hooksPath", ".husky"])?;
    let husky = project.join(".husky");
    fs::create_dir(&husky)?;
    give(w.mode, &husky)?;
    Ok(())
}

/// `trust-hookspath-in-project` (default mode): with `core.hooksPath = .husky`, a
/// `.husky/pre-commit` written inside must not reach the host's `.husky` (or is quarantined):
/// host `git commit` runs nothing.
pub fn hookspath_in_project(mode: &Mode) -> Outcome {
    let husky_script = |w: &World| {
        format!(
            "{}echo trust-prepared\nplant .husky/pre-commit || echo hook-refused\n",
            prelude(w)
        )
    };
    let mut c = world(mode)?;
    husky_repo(&mut c)?;
    let project = c.project.clone();
    let script = husky_script(&c);
    control_plant(&mut c, &project, &script)?;
    control_marker(&mut c, &[(&project, COMMIT)])?;

    let mut w = world(mode)?;
    husky_repo(&mut w)?;
    let project = w.project.clone();
    let script = husky_script(&w);
    let run = inside(&mut w, &project, &script)?;
    prepared(&run)?;
    let mut f = Findings::default();
    f.no_marker(&w, "the session");
    f.host_steps(&mut w, &[(&project, COMMIT)])?;
    f.outcome()
}
