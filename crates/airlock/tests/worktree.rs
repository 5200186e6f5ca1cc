//! `airlock run --worktree[=BRANCH]` with the real binary and the host's git: the worktree is made
//! under the project's sandbox state on first use and reused after, the sandbox runs in it under
//! the project's config, `--rm` removes it only when it is clean (or with `--force`), and what a
//! sandbox leaves in it never makes the host's git run its code.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::modes::{World, available};
use common::{report, stderr, stdout, write};

fn world() -> Option<World> {
    available().then(|| World::new("[sandbox]\nnetwork = \"none\"\n"))
}

fn run(w: &World, args: &[&str]) -> Output {
    w.airlock_with(args, "/bin/sh")
}

/// Where the worktree of `branch` lives: `<project's state root>/worktrees/<branch>`.
fn worktree_of(w: &World, branch: &str) -> PathBuf {
    let roots: Vec<PathBuf> = fs::read_dir(w.sandboxes())
        .expect("sandboxes dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.join("worktrees").is_dir())
        .collect();
    assert_eq!(roots.len(), 1, "one project holds worktrees: {roots:?}");
    roots[0].join("worktrees").join(branch)
}

fn branches(w: &World) -> String {
    stdout(&w.host_git(&["branch", "--format=%(refname:short)"]))
}

#[test]
fn a_worktree_is_made_on_first_use_reused_after_and_the_project_is_untouched() {
    let Some(w) = world() else { return };
    let out = run(
        &w,
        &[
            "run",
            "--worktree",
            "--",
            "sh",
            "-c",
            "pwd; git branch --show-current; cat README; echo wip > new.txt",
        ],
    );
    assert!(out.status.success(), "{}", report(&out));
    let lines: Vec<String> = stdout(&out).lines().map(str::to_owned).collect();
    let branch = lines[1].clone();
    assert!(branch.starts_with("airlock/app-"), "{}", report(&out));
    let tree = worktree_of(&w, &branch);
    assert_eq!(Path::new(&lines[0]), tree, "{}", report(&out));
    assert_eq!(lines[2], "hello");
    assert_eq!(fs::read_to_string(tree.join("new.txt")).unwrap(), "wip\n");
    assert!(
        !w.project.join("new.txt").exists(),
        "the project is not written"
    );
    assert!(branches(&w).contains(&branch));

    // The second run finds what the first left: the same worktree.
    let again = run(&w, &["run", "--worktree", "--", "cat", "new.txt"]);
    assert!(again.status.success(), "{}", report(&again));
    assert_eq!(stdout(&again), "wip\n");

    // The project is listed (its state holds the worktree), with its path.
    let list = run(&w, &["sandboxes", "list", "--json"]);
    assert!(
        stdout(&list).contains(&format!("\"{}\"", w.project.display())),
        "{}",
        report(&list)
    );
}

#[test]
fn rm_keeps_a_worktree_with_changes_and_force_removes_it_but_not_the_branch() {
    let Some(w) = world() else { return };
    // A link to the user's files in the worktree: removing the worktree removes the link only.
    let precious = w.root.join("precious");
    write(&precious.join("keep"), "mine\n");
    let script = format!("echo x > junk && ln -s {} link", precious.display());
    let made = run(&w, &["run", "--worktree=topic", "--", "sh", "-c", &script]);
    assert!(made.status.success(), "{}", report(&made));
    let tree = worktree_of(&w, "topic");

    let kept = run(&w, &["run", "--rm", "--worktree=topic", "--", "true"]);
    assert!(kept.status.success(), "{}", report(&kept));
    assert!(
        stderr(&kept).contains("kept the worktree") && stderr(&kept).contains("2 uncommitted"),
        "{}",
        report(&kept)
    );
    assert!(tree.join("junk").exists());

    let forced = run(
        &w,
        &["run", "--rm", "--force", "--worktree=topic", "--", "true"],
    );
    assert!(forced.status.success(), "{}", report(&forced));
    assert!(!tree.exists(), "{}", report(&forced));
    assert_eq!(fs::read_to_string(precious.join("keep")).unwrap(), "mine\n");
    assert!(branches(&w).contains("topic"), "the branch stays");
    let listed = stdout(&w.host_git(&["worktree", "list"]));
    assert!(!listed.contains("topic"), "{listed}");

    // A clean worktree goes with plain --rm.
    let clean = run(&w, &["run", "--rm", "--worktree=topic", "--", "true"]);
    assert!(clean.status.success(), "{}", report(&clean));
    assert!(!tree.exists(), "{}", report(&clean));
}

#[test]
fn an_existing_branch_is_checked_out_and_bad_names_are_refused_before_anything_is_made() {
    let Some(w) = world() else { return };
    w.host_git(&["branch", "feature"]);
    w.host_git(&["checkout", "-q", "-b", "other"]);
    write(&w.project.join("only-on-other"), "o\n");
    w.host_git(&["add", "only-on-other"]);
    w.host_git(&["commit", "-q", "-m", "other"]);
    let out = run(
        &w,
        &[
            "run",
            "--worktree=feature",
            "--",
            "sh",
            "-c",
            "git branch --show-current; ls",
        ],
    );
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(stdout(&out), "feature\nREADME\n", "{}", report(&out));

    for bad in ["--worktree=-x", "--worktree=a..b", "--worktree=has space"] {
        let out = run(&w, &["run", bad, "--", "true"]);
        assert!(!out.status.success(), "{bad}: {}", report(&out));
        assert!(
            stderr(&out).contains("not a valid branch name"),
            "{bad}: {}",
            report(&out)
        );
    }
    assert!(!branches(&w).contains("a..b"));
}

#[test]
fn a_project_that_is_not_a_repository_is_refused_with_what_to_do() {
    let h = common::TestHome::new("home/code/plain");
    let out = h.run(&["run", "--worktree", "--", "true"]);
    assert!(!out.status.success(), "{}", report(&out));
    assert!(
        stderr(&out).contains("is not a git repository") && stderr(&out).contains("git init"),
        "{}",
        report(&out)
    );
}

#[test]
fn print_spec_and_explain_create_no_worktree() {
    let Some(w) = world() else { return };
    let out = run(&w, &["run", "--worktree", "--print-spec"]);
    assert!(!out.status.success(), "{}", report(&out));
    assert!(stderr(&out).contains("create nothing"), "{}", report(&out));
    assert!(!w.sandboxes().exists() || fs::read_dir(w.sandboxes()).unwrap().count() == 0);
}

/// Attack: the sandbox plants what the host's git, run in the worktree at `--rm`, would execute:
/// a nested repository with `core.fsmonitor`, and an attributes filter. Control: the same
/// worktree, clean, is removed.
#[test]
fn what_a_sandbox_plants_in_the_worktree_never_runs_on_the_host() {
    let Some(w) = world() else { return };
    let marker = w.root.join("pwned");
    let script = format!(
        "git init -q sub && git -C sub config core.fsmonitor 'touch {m}' \
         && printf '* filter=evil\\n' > .gitattributes && echo y > sub/f",
        m = marker.display()
    );
    let out = run(&w, &["run", "--worktree", "--", "sh", "-c", &script]);
    assert!(out.status.success(), "{}", report(&out));
    assert!(stderr(&out).contains("quarantined"), "{}", report(&out));
    let rm = run(&w, &["run", "--rm", "--worktree", "--", "true"]);
    assert!(stderr(&rm).contains("kept the worktree"), "{}", report(&rm));
    assert!(!marker.exists(), "the host ran the sandbox's fsmonitor");
}

/// Attack: the worktree's `.git` file is made to point at another repository (as a sandbox
/// would if it could write it). The next run refuses to use it, and the host's git never runs
/// there. Control: the sandbox cannot write the `.git` file.
#[test]
fn a_worktree_whose_git_file_points_elsewhere_is_refused() {
    let Some(w) = world() else { return };
    let out = run(
        &w,
        &[
            "run",
            "--worktree=t",
            "--",
            "sh",
            "-c",
            "echo 'gitdir: /tmp' > .git && echo wrote",
        ],
    );
    assert!(!stdout(&out).contains("wrote"), "{}", report(&out));
    let tree = worktree_of(&w, "t");
    let other = w.root.join("other");
    fs::create_dir_all(&other).unwrap();
    w.host_git_in(&other, &["init", "-q"]);
    fs::write(
        tree.join(".git"),
        format!("gitdir: {}\n", other.join(".git").display()),
    )
    .unwrap();
    let refused = run(&w, &["run", "--worktree=t", "--", "true"]);
    assert!(!refused.status.success(), "{}", report(&refused));
    assert!(
        stderr(&refused).contains("is not a worktree of"),
        "{}",
        report(&refused)
    );
}
