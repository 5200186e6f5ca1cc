//! The git tool's modes end to end: read-only `.git`, the git layer and the commits brought back,
//! hooks, `.git` files, submodules, linked worktrees and the config, checked with the host's git.

mod common;

use std::fs;
use std::process::Command;

use common::modes::{World, available};
use common::{report as text, stdout, write};

#[test]
fn git_readonly_mode_refuses_commits_and_keeps_the_host_identity() {
    if !available() {
        return;
    }
    let w = World::new("");
    let o = w.sh(
        "git config user.name; git config user.email; git log --oneline | wc -l; \
         echo change >> README; git commit -qam second 2>/dev/null; echo commit=$?",
    );
    let out = stdout(&o);
    assert!(
        out.starts_with("Host Dev\ndev@work.example\n1\n"),
        "identity through includeIf: {}",
        text(&o)
    );
    assert!(
        out.contains("commit=") && !out.contains("commit=0"),
        "{}",
        text(&o)
    );
    let log = w.host_git(&["log", "--oneline"]);
    assert_eq!(String::from_utf8_lossy(&log.stdout).lines().count(), 1);
}

#[test]
fn a_failed_write_in_readonly_mode_says_once_which_key_allows_commits() {
    if !available() {
        return;
    }
    let w = World::new("");
    let o = w.sh(
        "echo change >> README; git commit -qam second; echo commit=$?; \
         git -C . commit -qam third; echo again=$?; git status --short; echo status=$?; \
         git config --get no.such.key; echo config=$?; \
         cd /tmp && git init -q elsewhere && cd elsewhere && git commit -q --allow-empty -m x; \
         echo elsewhere=$?",
    );
    let (out, err) = (stdout(&o), String::from_utf8_lossy(&o.stderr).into_owned());
    for want in [
        "commit=128",
        "again=128",
        "status=0",
        "config=1",
        "elsewhere=0",
    ] {
        assert!(out.contains(want), "{want}: {}", text(&o));
    }
    assert!(
        err.contains("Read-only file system"),
        "git's own error: {err}"
    );
    assert_eq!(
        err.matches("[tools.git] mode = \"readwrite\"").count(),
        1,
        "the hint, once per session: {err}"
    );
    // A later session says it again (its /tmp is new).
    let o = w.sh("git commit -qam fourth; true");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("[tools.git] mode"),
        "{}",
        text(&o)
    );
}

#[test]
fn git_readwrite_commits_come_back_as_airlock_branches() {
    if !available() {
        return;
    }
    let w = World::new("[tools.git]\nmode = \"readwrite\"\n");
    let o = w.sh("echo change >> README && git commit -qam second && echo ok");
    assert_eq!(stdout(&o), "ok\n", "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("airlock/main (new"),
        "{}",
        text(&o)
    );
    let log = |rev: &str| {
        let out = w.host_git(&["log", "-1", "--format=%an <%ae> %s", rev]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(log("airlock/main"), "Host Dev <dev@work.example> second\n");
    // main was the host's checked-out branch with nothing staged: it is fast-forwarded, and
    // its index follows, so the host sees a clean tree.
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("main fast-forwarded"),
        "{}",
        text(&o)
    );
    assert_eq!(log("main"), "Host Dev <dev@work.example> second\n");
    let status = w.host_git(&["status", "--porcelain"]);
    assert_eq!(String::from_utf8_lossy(&status.stdout), "");
    // The layer is cleared: the next session starts from the host repository as it is now.
    let o = w.sh("git log -1 --format=%s && git status --porcelain | wc -l");
    assert_eq!(stdout(&o), "second\n0\n", "{}", text(&o));
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("commits from"),
        "{}",
        text(&o)
    );
}

#[test]
fn hooks_cannot_be_planted_in_any_mode() {
    if !available() {
        return;
    }
    for mode in ["readonly", "readwrite", "disabled"] {
        let w = World::new(&format!("[tools.git]\nmode = \"{mode}\"\n"));
        let o =
            w.sh("printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .git/hooks/pre-commit; echo rc=$?");
        // readonly refuses the write; the layer takes it and keeps it in the sandbox.
        let refused = !stdout(&o).contains("rc=0");
        assert_eq!(refused, mode == "readonly", "{mode}: {}", text(&o));
        assert!(
            !w.project.join(".git/hooks/pre-commit").exists(),
            "{mode}: hook on the host"
        );
    }
}

#[test]
fn a_git_file_cannot_be_rewritten_or_moved_away() {
    if !available() {
        return;
    }
    // A project whose `.git` is a file naming its git dir (as in a worktree or a submodule).
    let w = World::new("[tools.git]\nmode = \"readwrite\"\n");
    let real = w.project.with_extension("git");
    fs::rename(w.project.join(".git"), &real).expect("move the git dir");
    let pointer = format!("gitdir: {}\n", real.display());
    write(&w.project.join(".git"), &pointer);
    let o = w.sh(
        "printf 'gitdir: /tmp/evil\\n' > .git; echo rc=$?; mv .git moved; echo rc=$?; \
         rm -f .git; echo rc=$?",
    );
    assert!(!stdout(&o).contains("rc=0"), "{}", text(&o));
    assert_eq!(
        fs::read_to_string(w.project.join(".git")).expect(".git"),
        pointer
    );
}

#[test]
fn a_submodule_gets_its_git_dir() {
    if !available() {
        return;
    }
    let w = World::new("[tools.git]\nmode = \"readwrite\"\n");
    let upstream = w.project.with_file_name("upstream");
    fs::create_dir_all(&upstream).expect("dir");
    w.host_git_in(&upstream, &["init", "-q"]);
    w.host_git_in(
        &upstream,
        &[
            "-c",
            "user.name=T",
            "-c",
            "user.email=t@example.com",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "upstream",
        ],
    );
    let url = upstream.to_str().unwrap();
    w.host_git_in(
        &w.project,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            url,
            "sub",
        ],
    );
    let o = w.sh_in(
        &w.project.join("sub"),
        "git log -1 --format=%s && git status --porcelain | wc -l",
    );
    assert_eq!(stdout(&o), "upstream\n0\n", "{}", text(&o));
}

#[test]
fn a_linked_worktree_gets_its_repository_in_the_layer() {
    if !available() {
        return;
    }
    let w = World::new("[tools.git]\nmode = \"readwrite\"\n");
    let wt = w.project.with_file_name("app-feature");
    w.host_git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        "feature",
        wt.to_str().unwrap(),
    ]);
    let o = w.sh_in(
        &wt,
        "echo change >> README && git commit -q -am inside && git log -1 --format=%s; \
         printf '#!/bin/sh\\n' > \"$(git rev-parse --git-common-dir)/hooks/pre-commit\"; echo rc=$?; \
         git config core.fsmonitor 'touch /tmp/pwned'",
    );
    let out = stdout(&o);
    assert!(
        out.starts_with("inside\n"),
        "commits from the worktree: {}",
        text(&o)
    );
    assert!(out.contains("rc=0"), "the layer takes writes: {}", text(&o));
    assert!(!w.project.join(".git/hooks/pre-commit").exists());
    let config = w.host_git(&["config", "--local", "--list"]);
    assert!(!String::from_utf8_lossy(&config.stdout).contains("fsmonitor"));
    // The commit comes back to the main repository as airlock/<the worktree's branch>.
    let log = w.host_git(&["log", "-1", "--format=%s", "airlock/feature"]);
    assert_eq!(String::from_utf8_lossy(&log.stdout), "inside\n");
    // It was the worktree's checked-out branch: fast-forwarded there.
    let log = w.host_git(&["log", "-1", "--format=%s", "feature"]);
    assert_eq!(String::from_utf8_lossy(&log.stdout), "inside\n");

    // A `.git` file pointing at a repository that does not point back is not followed.
    let other = World::new("");
    let stranger = w.project.with_file_name("stranger");
    fs::create_dir_all(&stranger).expect("dir");
    write(
        &stranger.join(".git"),
        &format!("gitdir: {}\n", other.project.join(".git").display()),
    );
    let target = other.project.join(".git");
    let o = w.sh_in(
        &stranger,
        &format!("ls -d '{}'; echo rc=$?", target.display()),
    );
    assert!(!stdout(&o).contains("rc=0"), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no repository is mounted"),
        "{}",
        text(&o)
    );
}

#[test]
fn git_config_written_inside_never_reaches_the_host() {
    if !available() {
        return;
    }
    for mode in ["readwrite", "disabled"] {
        let w = World::new(&format!("[tools.git]\nmode = \"{mode}\"\n"));
        let before = fs::read(w.project.join(".git/config")).expect("config");
        let o = w.sh(
            "git config alias.x '!touch /tmp/pwned' && git config core.fsmonitor 'touch /tmp/pwned' \
             && git config --get core.fsmonitor && echo ../evil > .git/commondir",
        );
        assert_eq!(stdout(&o), "touch /tmp/pwned\n", "{mode}: {}", text(&o));
        assert_eq!(
            fs::read(w.project.join(".git/config")).expect("config"),
            before,
            "{mode}"
        );
        assert!(!w.project.join(".git/commondir").exists(), "{mode}");
    }
}

/// The layer is sandbox-written: bringing commits back reads only regular object files and
/// checked refs from it, so planted links (to a host file, in `objects/` and `refs/heads`) carry
/// nothing of the host into the repository, and the real commit still comes back.
#[test]
fn links_planted_in_the_git_layer_are_not_followed_when_commits_come_back() {
    if !available() {
        return;
    }
    let w = World::new("[tools.git]\nmode = \"readwrite\"\n");
    let secret = w.root.join("host-secret");
    write(&secret, "HOST-SECRET-BYTES\n");
    let o = w.sh(&format!(
        "git commit -q --allow-empty -m inside && mkdir -p .git/objects/pack .git/refs/heads/x && \
         ln -s {s} .git/objects/pack/pack-{z}.pack && ln -s {s} .git/objects/pack/pack-{z}.idx && \
         ln -s {s} .git/refs/heads/x/linked && echo ok",
        s = secret.display(),
        z = "0".repeat(40)
    ));
    // Control: `ok` is printed only when every link was planted in the layer.
    assert_eq!(stdout(&o), "ok\n", "{}", text(&o));
    let log = w.host_git(&["log", "-1", "--format=%s", "airlock/main"]);
    assert_eq!(
        String::from_utf8_lossy(&log.stdout),
        "inside\n",
        "{}",
        text(&o)
    );
    let refs = w.host_git(&["for-each-ref", "--format=%(refname)"]);
    assert!(
        !String::from_utf8_lossy(&refs.stdout).contains("linked"),
        "{}",
        String::from_utf8_lossy(&refs.stdout)
    );
    let packs = fs::read_dir(w.project.join(".git/objects/pack"))
        .map(|d| d.flatten().any(|e| e.path().is_symlink()))
        .unwrap_or(false);
    assert!(!packs, "no link reached the host's objects");
    let grep = Command::new("grep")
        .args(["-rl", "HOST-SECRET-BYTES"])
        .arg(w.project.join(".git"))
        .output()
        .expect("grep");
    assert!(
        grep.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&grep.stdout)
    );
}
