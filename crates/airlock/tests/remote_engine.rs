//! The container backend on a remote engine, end to end: a real `podman system service` on
//! `tcp://127.0.0.1:PORT` (podman's remote API, which sees none of the client's binds) stands in
//! for another machine; the image is a minimal rootfs (static busybox, the host's git and the
//! libraries it and airlock's wrapper link) imported through that API, no registry.
//!
//! Each attack has its control: what is sent (hidden files, a planted link's target), what comes
//! back (files, deletions, commits as `airlock/<branch>`) and what must not (a container's
//! `core.fsmonitor` and hooks, links, FIFOs, setuid bits), the clear errors, and nothing left on
//! the engine. podman runs as root here; elsewhere every case skips with the reason.

mod common;
#[path = "common/remote_engine.rs"]
mod remote;

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{TestHome, report, stderr, stdout, write};
use remote::{IMAGE, Remote};

fn image_config(h: &TestHome, more: &str) {
    h.config(&format!("[sandbox.container]\nimage = \"{IMAGE}\"\n{more}"));
}

#[test]
fn the_project_goes_in_without_hidden_files_and_its_changes_come_back() {
    let Some(remote) = Remote::start() else {
        return;
    };
    let h = TestHome::new("home/code/app-sync");
    image_config(&h, "");
    write(&h.project.join("a.txt"), "before\n");
    write(&h.project.join("del.txt"), "delete me\n");
    write(&h.project.join("sub/keep.txt"), "kept\n");
    let marker = format!("sent-{}-{:?}", std::process::id(), Instant::now());
    write(&h.project.join("marker.txt"), &marker);
    write(&h.project.join(".env"), "API_KEY=host-secret\n");
    write(&h.root.join("secret"), "TOP-SECRET\n");
    std::os::unix::fs::symlink(h.root.join("secret"), h.project.join("leak")).unwrap();
    let script = "cat .env 2>/dev/null || echo NO-ENV; cat leak 2>/dev/null || echo NO-LEAK; \
                  echo after > a.txt; rm del.txt; echo new > sub/new.txt; \
                  echo API_KEY=from-container > .env; exit 3";
    let out = remote.run(&h, &["--network", "none"], script);
    assert_eq!(out.status.code(), Some(3), "{}", report(&out));
    let seen = stdout(&out);
    assert!(
        seen.contains("NO-ENV") && seen.contains("NO-LEAK"),
        "{}",
        report(&out)
    );
    assert!(
        !seen.contains("host-secret") && !seen.contains("TOP-SECRET"),
        "{seen}"
    );
    let read = |p: &str| std::fs::read_to_string(h.project.join(p)).ok();
    assert_eq!(
        read("a.txt").as_deref(),
        Some("after\n"),
        "{}",
        report(&out)
    );
    assert_eq!(read("del.txt"), None, "{}", report(&out));
    assert_eq!(read("sub/new.txt").as_deref(), Some("new\n"));
    assert_eq!(read("sub/keep.txt").as_deref(), Some("kept\n"));
    // The hidden file is never overwritten; the planted link stays a link.
    assert_eq!(read(".env").as_deref(), Some("API_KEY=host-secret\n"));
    assert!(
        stderr(&out).contains(".env (hidden by the spec)"),
        "{}",
        report(&out)
    );
    let leak = std::fs::symlink_metadata(h.project.join("leak")).unwrap();
    assert!(leak.file_type().is_symlink());
    assert_eq!(remote.left(&h), "", "left on the engine");
    // The engine CLI spools what `cp -` reads from airlock (podman 4.3 in /var/tmp, and never
    // removes it): that copy of the project stays with airlock's session, not on this machine.
    assert_eq!(
        remote::spooled_copies(&marker),
        Vec::<std::path::PathBuf>::new()
    );
}

#[test]
fn links_fifos_setuid_bits_and_git_metadata_written_inside_do_not_reach_the_host() {
    let Some(remote) = Remote::start() else {
        return;
    };
    let h = TestHome::new("home/code/app-hostile");
    image_config(&h, "");
    let outside = h.root.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    write(&h.project.join("sub/b.txt"), "b\n");
    let script = format!(
        "ln -s {o} out; mkfifo fifo; cp /bin/busybox suid; chmod 4755 suid; \
         rm -r sub; ln -s {o} sub; mkdir -p nested/.git; echo '[core] fsmonitor = x' > nested/.git/config; \
         echo control > control.txt",
        o = outside.display()
    );
    let out = remote.run(&h, &["--network", "none"], &script);
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(
        std::fs::read_to_string(h.project.join("control.txt")).unwrap(),
        "control\n",
        "{}",
        report(&out)
    );
    // The link comes back as data (a link), and nothing was written through it.
    assert!(
        std::fs::symlink_metadata(h.project.join("out"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(std::fs::read_dir(&outside).unwrap().next().is_none());
    assert!(std::fs::symlink_metadata(h.project.join("fifo")).is_err());
    let mode = std::fs::metadata(h.project.join("suid"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7000, 0, "a setuid bit survived: {mode:o}");
    assert!(!h.project.join("nested/.git").exists(), "{}", report(&out));
    assert!(
        stderr(&out).contains("not brought back: nested/.git (git metadata"),
        "{}",
        report(&out)
    );
    // A directory the container swapped for a link: the link is not applied over it.
    assert!(
        std::fs::symlink_metadata(h.project.join("sub"))
            .unwrap()
            .is_dir()
    );
    assert_eq!(remote.left(&h), "");
}

fn git(project: &Path, args: &[&str]) -> String {
    let out = Command::new("/usr/bin/git")
        .arg("-C")
        .arg(project)
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", report(&out));
    stdout(&out).trim().to_owned()
}

#[test]
fn a_commit_inside_lands_as_an_airlock_branch_and_its_config_and_hooks_stay_inside() {
    let Some(remote) = Remote::start() else {
        return;
    };
    let h = TestHome::new("home/code/app-git");
    image_config(&h, "");
    git(&h.project, &["init", "-q", "-b", "main"]);
    write(&h.project.join("f.txt"), "one\n");
    git(&h.project, &["add", "f.txt"]);
    git(&h.project, &["commit", "-qm", "first"]);
    let config_before = std::fs::read_to_string(h.project.join(".git/config")).unwrap();
    let script = "echo two > f.txt; git -c user.name=in -c user.email=in@x commit -qam inside && \
                  git config core.fsmonitor 'touch /tmp/pwned' && \
                  printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .git/hooks/post-checkout && echo committed";
    let out = remote.run(
        &h,
        &["--network", "none", "--git-mode", "readwrite"],
        script,
    );
    assert!(out.status.success(), "{}", report(&out));
    assert!(stdout(&out).contains("committed"), "{}", report(&out));
    let inside = git(
        &h.project,
        &["log", "-1", "--format=%s", "refs/remotes/airlock/main"],
    );
    assert_eq!(inside, "inside", "{}", report(&out));
    assert_eq!(
        std::fs::read_to_string(h.project.join(".git/config")).unwrap(),
        config_before
    );
    assert!(!h.project.join(".git/hooks/post-checkout").exists());
    assert_eq!(
        std::fs::read_to_string(h.project.join("f.txt")).unwrap(),
        "two\n"
    );
    assert_eq!(remote.left(&h), "");
}

/// The host's `core.hooksPath` names a directory in the project that does not exist yet: the
/// container makes it with a hook in it. The copy-back brings the file (it is project data),
/// and the end of the session quarantines the directory before the host's git can run it.
/// Control: a plain directory the container makes beside it comes back as it is.
#[test]
fn a_hook_dir_the_hosts_git_names_made_inside_is_quarantined_when_it_comes_back() {
    let Some(remote) = Remote::start() else {
        return;
    };
    let h = TestHome::new("home/code/app-hooks");
    image_config(&h, "");
    git(&h.project, &["init", "-q", "-b", "main"]);
    git(&h.project, &["config", "core.hooksPath", ".husky"]);
    git(
        &h.project,
        &["commit", "-q", "--allow-empty", "-m", "first"],
    );
    let script = "mkdir -p .husky tools && printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .husky/pre-commit && \
                  chmod +x .husky/pre-commit && echo plain > tools/notes.txt && echo made";
    let out = remote.run(&h, &["--network", "none"], script);
    assert!(out.status.success(), "{}", report(&out));
    assert!(stdout(&out).contains("made"), "{}", report(&out));
    assert!(
        !h.project.join(".husky/pre-commit").exists(),
        "the host's git would run the container's hook: {}",
        report(&out)
    );
    assert!(
        h.project
            .join(".husky.airlock-quarantine/pre-commit")
            .exists(),
        "{}",
        report(&out)
    );
    assert_eq!(
        std::fs::read_to_string(h.project.join("tools/notes.txt"))
            .ok()
            .as_deref(),
        Some("plain\n"),
        "control: {}",
        report(&out)
    );
    assert_eq!(remote.left(&h), "");
}

#[test]
fn a_missing_image_an_unreachable_engine_and_refused_features_fail_before_anything_is_made() {
    let Some(remote) = Remote::start() else {
        return;
    };
    let h = TestHome::new("home/code/app-errors");
    let none = ["run", "--network", "none", "--", "sh", "-c", "echo RAN"];
    // No image configured: airlock's own cannot work there.
    h.config("");
    let out = remote.run_env(&h, &remote.url, &none);
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    let e = stderr(&out);
    assert!(
        e.contains(&format!("CONTAINER_HOST={}", remote.url))
            && e.contains("needs [sandbox.container] image"),
        "{e}"
    );
    assert!(!h.sandboxes().exists(), "state was made before the refusal");
    // An image that engine does not have.
    h.config("[sandbox.container]\nimage = \"localhost/airlock-no-such:1\"\n");
    let out = remote.run_env(&h, &remote.url, &none);
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    assert!(
        stderr(&out).contains(
            "\"localhost/airlock-no-such:1\" ([sandbox.container] image) is not in the store"
        ),
        "{}",
        report(&out)
    );
    // An engine that does not answer.
    image_config(&h, "");
    let doctor = remote.run_env(&h, &remote.url, &["doctor"]);
    let row = stdout(&doctor);
    assert!(
        row.contains(&format!("at {} (remote", remote.url))
            && row.contains(&format!("image {IMAGE} is there")),
        "{row}"
    );
    let dead = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("tcp://127.0.0.1:{dead}");
    let out = remote.run_env(&h, &url, &none);
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    assert!(
        stderr(&out).contains(&format!(
            "the remote engine CONTAINER_HOST={url} does not answer"
        )),
        "{}",
        report(&out)
    );
    // The allowlisted network (the default) is refused, naming the way out.
    let out = remote.run_env(&h, &remote.url, &["run", "--", "true"]);
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    assert!(
        stderr(&out).contains("use --network none"),
        "{}",
        report(&out)
    );
    assert_eq!(remote.left(&h), "", "something was created on the engine");
    // What --render prints for it: the engine's create, with no host path bound.
    let out = remote.run_env(
        &h,
        &remote.url,
        &[
            "run",
            "--network",
            "none",
            "--print-spec",
            "--render",
            "--",
            "true",
        ],
    );
    assert!(out.status.success(), "{}", report(&out));
    let line = stdout(&out);
    assert!(
        line.contains(" create --pull never ")
            && line.contains("type=volume,src=airlock-app-errors-"),
        "{line}"
    );
    assert!(
        !line.contains("type=bind"),
        "a host bind on a remote engine: {line}"
    );
    // Control: the same engine and image run the workload.
    let out = remote.run_env(&h, &remote.url, &none);
    assert!(stdout(&out).contains("RAN"), "{}", report(&out));
}

#[test]
fn in_readonly_git_mode_git_is_read_only_inside_and_the_configs_secrets_stay_here() {
    let Some(remote) = Remote::start() else {
        return;
    };
    let h = TestHome::new("home/code/app-gitro");
    image_config(&h, "");
    git(&h.project, &["init", "-q", "-b", "main"]);
    git(
        &h.project,
        &[
            "config",
            "http.extraHeader",
            "AUTHORIZATION: bearer GIT-SECRET",
        ],
    );
    write(&h.project.join("f.txt"), "one\n");
    git(&h.project, &["add", "f.txt"]);
    git(&h.project, &["commit", "-qm", "first"]);
    let script = "cat .git/config; git log --format=%s; \
                  echo x > .git/planted 2>/dev/null && echo WROTE-GIT; \
                  git -c user.name=in -c user.email=in@x commit -q --allow-empty -m inside 2>/dev/null \
                  && echo COMMITTED; echo two > f.txt; echo done";
    let out = remote.run(&h, &["--network", "none"], script);
    assert!(out.status.success(), "{}", report(&out));
    let seen = stdout(&out);
    assert!(
        seen.contains("first") && seen.contains("done"),
        "{}",
        report(&out)
    );
    assert!(
        !seen.contains("GIT-SECRET"),
        "the host's token was sent: {seen}"
    );
    assert!(
        !seen.contains("WROTE-GIT") && !seen.contains("COMMITTED"),
        "{seen}"
    );
    // Control: the working tree's change came back; the repository is as it was.
    assert_eq!(
        std::fs::read_to_string(h.project.join("f.txt")).unwrap(),
        "two\n"
    );
    assert_eq!(git(&h.project, &["log", "--format=%s"]), "first");
    assert!(!h.project.join(".git/planted").exists());
    assert_eq!(remote.left(&h), "");
}

/// airlock killed mid-session: nothing comes back and no host file changes; the container stays
/// on the engine, and the next launch names it with how to look and remove.
#[test]
fn a_session_killed_before_its_copy_back_changes_nothing_here_and_is_named_next_time() {
    let Some(remote) = Remote::start() else {
        return;
    };
    let h = TestHome::new("home/code/app-killed");
    image_config(&h, "");
    write(&h.project.join("a.txt"), "before\n");
    let mut child = h
        .airlock(&[
            "run",
            "--network",
            "none",
            "--",
            "sh",
            "-c",
            "echo after > a.txt; sleep 60",
        ])
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("CONTAINERS_CONF", &remote.conf)
        .env("AIRLOCK_BACKEND", "container")
        .env("CONTAINER_HOST", &remote.url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let running = |r: &Remote| {
        let ps = r.podman(&["ps", "--format", "{{.Names}}"]);
        stdout(&ps)
            .lines()
            .any(|l| l.starts_with("airlock-app-killed-"))
    };
    while !running(&remote) {
        assert!(Instant::now() < deadline, "the container did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        std::fs::read_to_string(h.project.join("a.txt")).unwrap(),
        "before\n"
    );
    let left = remote.left(&h);
    assert!(
        !left.is_empty(),
        "the container should be left on the engine"
    );
    let out = remote.run(&h, &["--network", "none"], "true");
    assert!(out.status.success(), "{}", report(&out));
    let name = left
        .split_whitespace()
        .find(|n| !n.ends_with("-project"))
        .unwrap();
    assert!(
        stderr(&out).contains(&format!(
            "the container {name} on CONTAINER_HOST={}",
            remote.url
        )) && stderr(&out).contains("rm --force"),
        "{}",
        report(&out)
    );
    for v in left.split_whitespace() {
        let _ = remote.podman(&["rm", "--force", v]);
        let _ = remote.podman(&["volume", "rm", "--force", v]);
    }
}
