//! Choosing a backend (`run --backend`, `[sandbox] backend`, `$AIRLOCK_BACKEND`) and the bwrap
//! backend end to end with the real bubblewrap: what it renders, what it refuses (nothing created),
//! and a launch's exit status, signal, environment and network passing through as in native.
//! The escape suite runs every attack against both backends.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output};

use common::{TestHome, report, stderr, stdout, write};

fn bwrap_installed() -> bool {
    let ok = Command::new("bwrap")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: bubblewrap is not installed (apt-get install bubblewrap)");
    }
    ok
}

fn run_with(h: &TestHome, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = h.airlock(args);
    cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("SHELL", "/bin/sh");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("spawn airlock")
}

#[test]
fn render_prints_the_bwrap_command_and_native_says_it_runs_none() {
    if !bwrap_installed() {
        return;
    }
    let h = TestHome::new("home/code/app");
    let out = run_with(
        &h,
        &[],
        &[
            "run",
            "--backend",
            "bwrap",
            "--print-spec",
            "--render",
            "--",
            "true",
        ],
    );
    assert!(out.status.success(), "{}", report(&out));
    let line = stdout(&out);
    assert!(line.contains("bwrap --unshare-user"), "{line}");
    assert!(
        line.trim_end()
            .ends_with("--remount-ro / -- /run/airlock/airlock-stage"),
        "{line}"
    );
    let project = h.project.display().to_string();
    assert!(
        line.contains(&format!("--bind {project} {project}")),
        "{line}"
    );
    // --render starts nothing: no state for the project.
    assert!(!h.sandboxes().exists(), "{}", h.sandboxes().display());

    let out = run_with(&h, &[], &["run", "--print-spec", "--render", "--", "true"]);
    assert!(out.status.success(), "{}", report(&out));
    assert!(stdout(&out).contains("the native backend runs no command"));
}

#[test]
fn a_variable_naming_no_backend_is_refused_before_anything_runs() {
    let h = TestHome::new("home/code/app");
    let out = run_with(&h, &[("AIRLOCK_BACKEND", "docker")], &["run", "--", "true"]);
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    assert!(
        stderr(&out)
            .contains("AIRLOCK_BACKEND=\"docker\" names no backend; use one of: native, bwrap"),
        "{}",
        report(&out)
    );
    assert!(!h.sandboxes().exists());
}

#[test]
fn bwrap_missing_from_path_is_a_clear_error() {
    let h = TestHome::new("home/code/app");
    let empty = h.root.join("empty-bin");
    std::fs::create_dir_all(&empty).unwrap();
    let out = h
        .airlock(&["run", "--backend", "bwrap", "--", "/bin/true"])
        .env("PATH", &empty)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    assert!(
        stderr(&out).contains("the bwrap backend needs bubblewrap, which is not on PATH"),
        "{}",
        report(&out)
    );
}

#[test]
fn an_overlay_spec_is_refused_with_bwrap_and_nothing_is_created() {
    if !bwrap_installed() {
        return;
    }
    let h = TestHome::new("home/code/app");
    // An overlay-mode mount: bubblewrap 0.8 has no overlays, so the launch must not go on weaker.
    std::fs::create_dir_all(h.home.join("notes")).unwrap();
    h.config("[[sandbox.mounts]]\npath = \"~/notes\"\nmode = \"overlay\"\n");
    let out = run_with(&h, &[], &["run", "--backend", "bwrap", "--", "true"]);
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    let err = stderr(&out);
    assert!(
        err.contains("the bwrap backend cannot mount overlays"),
        "{err}"
    );
    assert!(
        err.contains(&h.home.join("notes").display().to_string()),
        "{err}"
    );
    assert!(err.contains("--backend native"), "{err}");
    assert!(
        !h.sandboxes().exists(),
        "state was created for a refused launch"
    );
    // The same spec runs with native.
    let out = run_with(&h, &[], &["run", "--network", "none", "--", "true"]);
    assert!(out.status.success(), "{}", report(&out));
}

#[test]
fn the_config_chooses_bwrap_and_the_flag_wins_over_it() {
    if !bwrap_installed() {
        return;
    }
    let h = TestHome::new("home/code/app");
    h.config("[sandbox]\nbackend = \"bwrap\"\n");
    // Inside bwrap, init is not pid 1 (bwrap's own reaper is); in native it is airlock's init.
    let probe = [
        "run",
        "--network",
        "none",
        "--",
        "sh",
        "-c",
        "cat /proc/1/comm",
    ];
    let out = run_with(&h, &[], &probe);
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(stdout(&out).trim(), "bwrap", "{}", report(&out));
    let mut native = vec!["run", "--backend", "native"];
    native.extend_from_slice(&probe[1..]);
    let out = run_with(&h, &[("AIRLOCK_BACKEND", "bwrap")], &native);
    assert!(out.status.success(), "{}", report(&out));
    assert_ne!(stdout(&out).trim(), "bwrap", "{}", report(&out));
}

#[test]
fn bwrap_passes_the_exit_status_the_signal_and_only_the_specs_environment() {
    if !bwrap_installed() {
        return;
    }
    let h = TestHome::new("home/code/app");
    let env = [("AIRLOCK_BACKEND", "bwrap")];
    let out = run_with(
        &h,
        &env,
        &["run", "--network", "none", "--", "sh", "-c", "exit 7"],
    );
    assert_eq!(out.status.code(), Some(7), "{}", report(&out));
    let out = run_with(
        &h,
        &env,
        &[
            "run",
            "--network",
            "none",
            "--",
            "sh",
            "-c",
            "kill -TERM $$",
        ],
    );
    assert_eq!(out.status.signal(), Some(libc::SIGTERM), "{}", report(&out));
    let out = run_with(
        &h,
        &[("AIRLOCK_BACKEND", "bwrap"), ("SECRET_TOKEN", "s3cr3t")],
        &["run", "--network", "none", "--", "env"],
    );
    assert!(out.status.success(), "{}", report(&out));
    let env = stdout(&out);
    assert!(env.contains("AIRLOCK=1"), "{env}");
    assert!(
        !env.contains("s3cr3t"),
        "a host variable reached the sandbox: {env}"
    );
}

#[test]
fn bwrap_keeps_env_files_hidden_and_the_host_read_only() {
    if !bwrap_installed() {
        return;
    }
    let h = TestHome::new("home/code/app");
    write(&h.project.join(".env"), "API_KEY=hunter2\n");
    let script = "cat .env; echo x > /usr/planted 2>/dev/null && echo WROTE; \
                  echo new > .env.local; sleep 0.5; cat .env.local; \
                  chmod 666 /dev/null 2>/dev/null && echo CHMOD; echo ok > /dev/null && echo devnull";
    let out = run_with(
        &h,
        &[("AIRLOCK_BACKEND", "bwrap")],
        &["run", "--network", "none", "--", "sh", "-c", script],
    );
    assert!(out.status.success(), "{}", report(&out));
    let seen = stdout(&out);
    assert!(!seen.contains("hunter2"), "{seen}");
    assert!(!seen.contains("WROTE") && !seen.contains("CHMOD"), "{seen}");
    // A .env.* file created inside is hidden once the keeper sees it (inotify), as in native.
    assert!(!seen.contains("new"), "{seen}");
    assert!(seen.contains("devnull"), "{seen}");
}
