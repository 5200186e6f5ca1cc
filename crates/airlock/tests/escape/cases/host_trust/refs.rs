//! Commits made inside come back to the host as `refs/remotes/airlock/*` (the checked-out branch
//! fast-forwarded to them), and a second session beside the one owning the git layer cannot write
//! the repository at all.

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
/// `refs/remotes/airlock/feature` (subjects `inside` and `f`), airlock says so (`airlock/main`),
/// and the host's checked-out `main` is fast-forwarded to `airlock/main`. Then session B holds
/// the layer and writes a branch: session C beside it cannot commit (told why), B's branch is not
/// in the host's `refs/heads` while or after it runs, and comes back as `airlock/session-b`.
pub fn commits_come_back_as_refs(mode: &Mode) -> Outcome {
    let mut w = world(mode)?;
    let project = w.project.clone();
    repo(&mut w, &project)?;
    git_mode(&w, "readwrite")?;
    let main_before = commit(&mut w, "refs/heads/main")?
        .ok_or_else(|| fail("the fixture has no refs/heads/main"))?;
    let main_before = Some(main_before);

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
    let mut f = Findings::default();
    for (branch, subject) in [("main", "inside"), ("feature", "f")] {
        let reference = format!("refs/remotes/airlock/{branch}");
        let found = commit(&mut w, &reference)?;
        f.check(
            found.as_ref().is_some_and(|(_, s)| s == subject),
            || format!("the host has no {reference} with subject {subject:?} after the session (found {found:?})"),
        );
    }
    // main is the host's checked-out branch, nothing staged: it is fast-forwarded to what came
    // back, so it holds the commit made inside, never anything else.
    let main_after = commit(&mut w, "refs/heads/main")?;
    let airlock_main = commit(&mut w, "refs/remotes/airlock/main")?;
    f.check(main_after.is_some() && main_after == airlock_main, || {
        format!("the host's main ({main_after:?}) is not airlock/main ({airlock_main:?}); it was {main_before:?}")
    });
    f.check(a.stderr.contains("airlock/main"), || {
        format!(
            "airlock did not say where the commits came back (airlock/main):\n      {}",
            a.describe()
        )
    });
    // Session B holds the layer while session C runs: C's .git is read-only (it says so), and
    // nothing B writes reaches the host's refs/heads, before or after it ends.
    let b_script = "set -e\nc=$(git commit-tree -m from-b -p HEAD 'HEAD^{tree}')\n\
                    git update-ref refs/heads/session-b \"$c\"\n: > b-ready\n\
                    while [ ! -e b-stop ]; do sleep 0.05; done\n";
    let mut b = Session::start(
        &mut w,
        b_script,
        &project.join("b-ready"),
        &project.join("b-stop"),
    )?;
    let c = inside(
        &mut w,
        &project,
        "git commit --allow-empty -q -m from-c; echo rc=$?\n",
    )?;
    f.check(
        !c.stdout.contains("rc=0") && c.stderr.contains("read-only in this one"),
        || {
            format!(
                "session C could commit beside session B, or was not told why not:\n      {}",
                c.describe()
            )
        },
    );
    f.check(b.running(), || {
        "session B ended before session C did".to_owned()
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
    // B owned the layer: its branch comes back as data, as airlock/session-b.
    let b_back = commit(&mut w, "refs/remotes/airlock/session-b")?;
    f.check(b_back.as_ref().is_some_and(|(_, s)| s == "from-b"), || {
        format!(
            "session B's branch did not come back as airlock/session-b: {b_back:?}\n      {}",
            b_run.describe()
        )
    });
    f.outcome()
}
