//! The keeper in a local container: `.env` files read empty and the sanitised `.git/config`
//! stays sanitised for the whole session, whatever the host does meanwhile; a keeper that
//! cannot hide everything keeps the command from running, or stops it.

use super::*;

/// Runs `git ARGS` in `dir` on the host.
fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("spawn git");
    assert!(out.status.success(), "git {args:?}: {}", report(&out));
}

/// Waits until `path` exists, or panics after a deadline.
fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `run` with the defaults (the keeper at work) and `script`, started with its output captured.
fn spawn(h: &TestHome, script: &str) -> Child {
    container_command(
        h,
        &[],
        &["run", "--network", "none", "--", "sh", "-c", script],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn airlock")
}

/// A project with `n` directories named `.env` (`d0/.env`, …), each one mask.
fn with_env_dirs(n: usize) -> TestHome {
    let h = TestHome::new("home/code/app");
    for i in 0..n {
        std::fs::create_dir_all(h.project.join(format!("d{i}/.env"))).unwrap();
    }
    h
}

#[test]
fn env_files_and_the_sanitised_git_config_stay_so_while_the_host_changes_them() {
    if !podman_runs() {
        return;
    }
    let h = TestHome::new("home/code/app");
    git(&h.project, &["init", "-q", "."]);
    git(
        &h.project,
        &[
            "remote",
            "add",
            "origin",
            "https://u:FIRST-TOKEN@git.test/r.git",
        ],
    );
    write(&h.project.join(".env"), "DOTENV=FIRST-SECRET\n");
    // The workload reads, says it is ready, waits for the host's changes, reads again.
    let script = "cat .env .git/config; : > ready; \
                  while [ ! -e go ]; do sleep 0.05; done; \
                  echo ---; cat .git/config web/.env.local";
    let child = spawn(&h, script);
    wait_for(&h.project.join("ready"));
    // The host's git renames a new config over the pinned one; a new secret file appears.
    git(
        &h.project,
        &[
            "remote",
            "set-url",
            "origin",
            "https://u:SECOND-TOKEN@git.test/r.git",
        ],
    );
    std::fs::create_dir(h.project.join("web")).unwrap();
    write(&h.project.join("web/.env.local"), "DOTENV=SECOND-SECRET\n");
    write(&h.project.join("go"), "");
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", report(&out));
    let seen = stdout(&out);
    for secret in [
        "FIRST-TOKEN",
        "FIRST-SECRET",
        "SECOND-TOKEN",
        "SECOND-SECRET",
    ] {
        assert!(
            !seen.contains(secret),
            "{secret} reached the container:\n{seen}"
        );
    }
    // Control: the config was read, both times, without its credentials.
    assert_eq!(
        seen.matches("url = https://git.test/r.git").count(),
        2,
        "{}",
        report(&out)
    );
}

#[test]
fn a_keeper_that_cannot_hide_every_file_at_the_start_keeps_the_command_from_running() {
    if !podman_runs() {
        return;
    }
    // One more directory to hide than a session keeps (`hide::MAX_HIDDEN`, 4096).
    let h = with_env_dirs(4097);
    let mark = ["run", "--network", "none", "--", "sh", "-c", ": > ran"];
    let out = run_with(&h, &[], &mark);
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    assert!(
        stderr(&out).contains("more than 4096 paths to hide"),
        "{}",
        report(&out)
    );
    assert!(!h.project.join("ran").exists(), "the command ran");
    // Control: one fewer and it runs.
    std::fs::remove_dir(h.project.join("d4096/.env")).unwrap();
    let out = run_with(&h, &[], &mark);
    assert!(out.status.success(), "{}", report(&out));
    assert!(h.project.join("ran").exists());
}

#[test]
fn a_keeper_that_cannot_hide_a_new_file_stops_the_container() {
    if !podman_runs() {
        return;
    }
    let h = with_env_dirs(4096);
    let script = ": > ready; while [ ! -e go ]; do sleep 0.05; done; sleep 5; : > survived";
    let child = spawn(&h, script);
    wait_for(&h.project.join("ready"));
    std::fs::create_dir(h.project.join(".env")).unwrap();
    write(&h.project.join("go"), "");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    assert!(
        stderr(&out).contains("more than 4096 paths to hide (the last: .env)"),
        "{}",
        report(&out)
    );
    assert!(!h.project.join("survived").exists(), "the workload went on");
}
