//! Commits made inside come back to the host as `refs/remotes/airlock/*`, never as the host's own
//! branches, also while a second session holds the project.

use super::{Findings, Session, git_mode, host_git, inside, repo, world};
use crate::check;
use crate::harness::{Mode, Outcome, World, fail};

/// The commit `reference` names on the host, with its subject; `None` when it does not exist.
fn commit(
    w: &mut World,
    reference: &str,
) -> Result<Option<(String, String)>, crate::harness::Failure> {
    let project = w.project.clone();
    let run = host_git(
        w,
        &project,
        &["log", "-1", "--format=%H %s", reference, "--"],
    )?;
    if run.code() != Some(0) {
        return Ok(None);
    }
    Ok(run
        .stdout
        .trim()
        .split_once(' ')
        .map(|(id, subject)| (id.to_owned(), subject.to_owned())))
}

/// `trust-commits-come-back-as-refs` (`readwrite`, a positive case): commits made inside on
/// `main` and on a new `feature` branch appear on the host as `refs/remotes/airlock/main` and
/// `refs/remotes/airlock/feature` (subjects `inside` and `f`), the host's `refs/heads/main` is
/// unchanged, and airlock says so (`airlock/main`). A second session holding the project
/// meanwhile writes a branch of its own in `.git`: it does not reach the host's `refs/heads`
/// either, before or after that session ends.
pub fn commits_come_back_as_refs(mode: &Mode) -> Outcome {
    let mut w = world(mode)?;
    let project = w.project.clone();
    repo(&mut w, &project)?;
    git_mode(&w, "readwrite")?;
    let main_before = commit(&mut w, "refs/heads/main")?
        .ok_or_else(|| fail("the fixture has no refs/heads/main"))?;

    let b_script = "set -e\nc=$(git commit-tree -m from-b -p HEAD 'HEAD^{tree}')\n\
                    git update-ref refs/heads/session-b \"$c\"\n: > b-ready\n\
                    while [ ! -e b-stop ]; do sleep 0.05; done\n";
    let mut b = Session::start(
        &mut w,
        b_script,
        &project.join("b-ready"),
        &project.join("b-stop"),
    )?;

    let a = inside(
        &mut w,
        &project,
        "set -e\ngit checkout -q main\ngit commit --allow-empty -q -m inside\n\
         git checkout -q -b feature\ngit commit --allow-empty -q -m f\necho trust-prepared\n",
    )?;
    check!(
        a.code() == Some(0) && a.stdout.contains("trust-prepared"),
        "commits inside failed (readwrite mode must allow them):\n      {}",
        a.describe()
    );
    check!(
        b.running(),
        "session B ended before session A did, so the sessions did not overlap"
    );

    let mut f = Findings::default();
    for (branch, subject) in [("main", "inside"), ("feature", "f")] {
        let reference = format!("refs/remotes/airlock/{branch}");
        let found = commit(&mut w, &reference)?;
        f.check(
            found.as_ref().is_some_and(|(_, s)| s == subject),
            || format!("the host has no {reference} with subject {subject:?} after the session (found {found:?})"),
        );
    }
    let main_after = commit(&mut w, "refs/heads/main")?;
    f.check(main_after.as_ref() == Some(&main_before), || {
        format!("ESCAPE: the host's refs/heads/main moved from {main_before:?} to {main_after:?}")
    });
    f.check(a.stderr.contains("airlock/main"), || {
        format!(
            "airlock did not say where the commits came back (airlock/main):\n      {}",
            a.describe()
        )
    });
    let b_branch = commit(&mut w, "refs/heads/session-b")?;
    f.check(b_branch.is_none(), || {
        format!(
            "ESCAPE: session B's refs/heads/session-b reached the host while it ran: {b_branch:?}"
        )
    });

    let b_run = b.stop()?;
    f.label("after session B ended");
    let b_branch = commit(&mut w, "refs/heads/session-b")?;
    f.check(b_branch.is_none(), || {
        format!(
            "ESCAPE: session B's refs/heads/session-b is on the host: {b_branch:?}\n      {}",
            b_run.describe()
        )
    });
    let main_after = commit(&mut w, "refs/heads/main")?;
    f.check(main_after.as_ref() == Some(&main_before), || {
        format!("ESCAPE: the host's refs/heads/main moved from {main_before:?} to {main_after:?}")
    });
    f.outcome()
}
