//! Choosing a backend (`run --backend`, `[sandbox] backend`, `$AIRLOCK_BACKEND`) and the bwrap
//! backend end to end with the real bubblewrap: what it renders, what it refuses (nothing created),
//! its overlays, and a launch's exit status, signal and environment passing through as in native.
//! The escape suite runs every attack against both backends.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::process::Command;

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

/// `run --backend bwrap --network none -- <workload>`.
fn in_bwrap<'a>(workload: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["run", "--backend", "bwrap", "--network", "none", "--"];
    args.extend_from_slice(workload);
    args
}

#[test]
fn render_prints_the_bwrap_command_and_native_says_it_runs_none() {
    if !bwrap_installed() {
        return;
    }
    let h = TestHome::new("home/code/app");
    let out = h.run_env(
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

    let out = h.run(&["run", "--print-spec", "--render", "--", "true"]);
    assert!(out.status.success(), "{}", report(&out));
    assert!(stdout(&out).contains("the native backend runs no command"));
}

#[test]
fn a_variable_naming_no_backend_is_refused_before_anything_runs() {
    let h = TestHome::new("home/code/app");
    let out = h.run_env(&[("AIRLOCK_BACKEND", "docker")], &["run", "--", "true"]);
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

/// A home with `~/notes/todo` ("host") and `~/notes` an overlay mount.
fn notes_overlay() -> (TestHome, std::path::PathBuf) {
    let h = TestHome::new("home/code/app");
    let notes = h.home.join("notes");
    write(&notes.join("todo"), "host\n");
    h.config("[[sandbox.mounts]]\npath = \"~/notes\"\nmode = \"overlay\"\n");
    (h, notes)
}

#[test]
fn bwrap_overlays_keep_writes_in_the_sandbox_and_a_mount_beneath_one_is_refused() {
    if !bwrap_installed() {
        return;
    }
    let (h, notes) = notes_overlay();
    let script = format!(
        "cat {n}/todo; echo sandbox > {n}/todo; echo new > {n}/added; cat {n}/todo; \
         ls /run/airlock/overlays/0 | wc -l",
        n = notes.display()
    );
    let args = in_bwrap(&["sh", "-c", &script]);
    let out = h.run(&args);
    assert!(out.status.success(), "{}", report(&out));
    // The host's file first, then the sandbox's own copy; the staged layers are gone inside.
    assert_eq!(stdout(&out), "host\nsandbox\n0\n", "{}", report(&out));
    assert_eq!(
        std::fs::read_to_string(notes.join("todo")).unwrap(),
        "host\n"
    );
    assert!(
        !notes.join("added").exists(),
        "an overlay write reached the host"
    );
    // The next session sees what the last one kept, as in native.
    let added = notes.join("added").display().to_string();
    let out = h.run(&in_bwrap(&["cat", &added]));
    assert_eq!(stdout(&out), "new\n", "{}", report(&out));

    // A hidden file beneath the overlay would end up under it: refused before anything runs.
    h.config(
        "[[sandbox.mounts]]\npath = \"~/notes\"\nmode = \"overlay\"\n\n\
         [[sandbox.mounts]]\npath = \"~/notes/todo\"\nmode = \"hidden\"\n",
    );
    let out = h.run(&["run", "--backend", "bwrap", "--", "true"]);
    assert_eq!(out.status.code(), Some(125), "{}", report(&out));
    let err = stderr(&out);
    assert!(err.contains("is mounted beneath the overlay on"), "{err}");
    assert!(err.contains("--backend native"), "{err}");
    let out = h.run(&["run", "--network", "none", "--", "true"]);
    assert!(
        out.status.success(),
        "native takes the same spec: {}",
        report(&out)
    );
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
    let out = h.run(&probe);
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(stdout(&out).trim(), "bwrap", "{}", report(&out));
    let mut native = vec!["run", "--backend", "native"];
    native.extend_from_slice(&probe[1..]);
    let out = h.run_env(&[("AIRLOCK_BACKEND", "bwrap")], &native);
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
    let out = h.run_env(
        &env,
        &["run", "--network", "none", "--", "sh", "-c", "exit 7"],
    );
    assert_eq!(out.status.code(), Some(7), "{}", report(&out));
    let out = h.run_env(
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
    let out = h.run_env(
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
    let out = h.run_env(
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

#[test]
fn a_second_bwrap_session_sees_the_first_ones_layer_and_keeps_nothing() {
    if !bwrap_installed() {
        return;
    }
    let (h, notes) = notes_overlay();
    let n = notes.display();
    // Session A owns the layer: it writes, then waits (the markers are in the project).
    let first =
        format!("echo from-a > {n}/todo; : > ready; while [ ! -e stop ]; do sleep 0.05; done");
    let mut a = h.airlock(&in_bwrap(&["sh", "-c", &first]));
    a.env("PATH", "/usr/local/bin:/usr/bin:/bin");
    let mut a = a.spawn().unwrap();
    let project_ready = h.project.join("ready");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !project_ready.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "session A never got ready"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Session B: the owner's upper read-only above the host's dir, its own writes thrown away.
    let second = format!("cat {n}/todo; echo from-b > {n}/todo; cat {n}/todo");
    let out = h.run(&in_bwrap(&["sh", "-c", &second]));
    std::fs::write(h.project.join("stop"), "").unwrap();
    assert!(a.wait().unwrap().success());
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(stdout(&out), "from-a\nfrom-b\n", "{}", report(&out));
    let todo = notes.join("todo").display().to_string();
    let out = h.run(&in_bwrap(&["cat", &todo]));
    assert_eq!(
        stdout(&out),
        "from-a\n",
        "B's write was kept: {}",
        report(&out)
    );
    assert_eq!(
        std::fs::read_to_string(notes.join("todo")).unwrap(),
        "host\n"
    );
}
