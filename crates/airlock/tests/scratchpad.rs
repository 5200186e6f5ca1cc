//! `airlock scratchpad` with the real binary in a temp HOME: a workspace made on first use and
//! kept across runs, the global config applied and a project file in the workspace never read,
//! `list`, `rm` (refused while a session runs), `--rm`, and bad names refused before anything is
//! made.

mod common;

use std::fs;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{TestHome, report, sandbox_starts, stderr, stdout};

fn home() -> TestHome {
    TestHome::new("home/code/app")
}

fn pads(h: &TestHome) -> PathBuf {
    h.home.join(".local/share/airlock/scratchpads")
}

fn list_json(h: &TestHome) -> Vec<serde_json::Value> {
    let out = h.run(&["scratchpad", "list", "--json"]);
    assert!(out.status.success(), "{}", report(&out));
    serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {}", report(&out)))
}

#[test]
fn a_scratchpad_is_made_on_first_use_and_keeps_its_files() {
    if !sandbox_starts() {
        return;
    }
    let h = home();
    let out = h.run(&[
        "scratchpad",
        "try",
        "--network",
        "none",
        "--",
        "sh",
        "-c",
        "pwd; ls -A; echo kept > notes",
    ]);
    assert!(out.status.success(), "{}", report(&out));
    let workspace = pads(&h).join("try");
    assert_eq!(stdout(&out), format!("{}\n", workspace.display()));
    let again = h.run(&[
        "scratchpad",
        "try",
        "--network",
        "none",
        "--",
        "cat",
        "notes",
    ]);
    assert_eq!(stdout(&again), "kept\n", "{}", report(&again));

    let rows = list_json(&h);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["name"], "try");
    assert_eq!(rows[0]["status"], "idle");
    assert_eq!(rows[0]["path"], workspace.display().to_string());
    assert!(rows[0]["size_bytes"].as_u64().unwrap() > 0);
    let table = h.run(&["scratchpad", "list"]);
    assert!(stdout(&table).contains("try"), "{}", report(&table));

    let rm = h.run(&["scratchpad", "rm", "try"]);
    assert!(rm.status.success(), "{}", report(&rm));
    assert!(!workspace.exists());
    let sandbox = rows[0]["sandbox"].as_str().unwrap();
    assert!(!h.sandboxes().join(sandbox).exists(), "its state goes too");
    assert!(list_json(&h).is_empty());
}

/// Attack: a `.airlock.toml` in the workspace (the sandbox wrote it), even one the user trusted
/// by mistake, asks for the host's network. It is never read; the global config is.
#[test]
fn the_global_config_applies_and_a_project_file_in_the_workspace_is_never_read() {
    let h = home();
    h.config(
        "[sandbox]\nnetwork = \"none\"\n\n[sandbox.environment.PAD_VAR]\nvalue = \"global\"\n",
    );
    let workspace = pads(&h).join("default");
    fs::create_dir_all(&workspace).unwrap();
    fs::write(
        workspace.join(".airlock.toml"),
        "[sandbox]\nnetwork = \"host\"\n\n[sandbox.environment.PAD_VAR]\nvalue = \"planted\"\n",
    )
    .unwrap();
    let trusted = h
        .airlock(&["trust", "add", workspace.to_str().unwrap()])
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let spec = h.run(&["scratchpad", "--print-spec"]);
    assert!(spec.status.success(), "{}", report(&spec));
    let spec: serde_json::Value = serde_json::from_str(&stdout(&spec)).unwrap();
    assert_eq!(
        spec["network"],
        "none",
        "trust add said: {}",
        report(&trusted)
    );
    assert_eq!(spec["project"], workspace.display().to_string());
    let env = spec["env"].to_string();
    assert!(env.contains("PAD_VAR"), "{env}");
    assert!(!env.contains("planted"), "{env}");
    if !sandbox_starts() {
        return;
    }
    let out = h.run(&["scratchpad", "--", "sh", "-c", "echo $PAD_VAR"]);
    assert_eq!(stdout(&out), "global\n", "{}", report(&out));
}

#[test]
fn rm_is_refused_while_a_session_runs_and_rm_flag_removes_at_exit() {
    if !sandbox_starts() {
        return;
    }
    let h = home();
    let mut running = h
        .airlock(&[
            "scratchpad",
            "busy",
            "--network",
            "none",
            "--",
            "sleep",
            "30",
        ])
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !list_json(&h)
        .iter()
        .any(|r| r["name"] == "busy" && r["status"] == "running")
    {
        assert!(Instant::now() < deadline, "the session never showed up");
        std::thread::sleep(Duration::from_millis(50));
    }
    let refused = h.run(&["scratchpad", "rm", "busy"]);
    assert!(!refused.status.success(), "{}", report(&refused));
    assert!(stderr(&refused).contains("in use"), "{}", report(&refused));
    let all = h.run(&["scratchpad", "rm", "--all"]);
    assert_eq!(all.status.code(), Some(1), "{}", report(&all));
    assert!(
        pads(&h).join("busy").exists(),
        "nothing removed while in use"
    );
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &running.id().to_string()])
        .status();
    let _ = running.wait();

    // Control: once it ended (its last process gone), rm goes through.
    let deadline = Instant::now() + Duration::from_secs(10);
    let rm = loop {
        let rm = h.run(&["scratchpad", "rm", "--all"]);
        if rm.status.success() || Instant::now() > deadline {
            break rm;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(rm.status.success(), "{}", report(&rm));
    assert!(!pads(&h).join("busy").exists());

    let once = h.run(&[
        "scratchpad",
        "--rm",
        "once",
        "--network",
        "none",
        "--",
        "touch",
        "x",
    ]);
    assert!(once.status.success(), "{}", report(&once));
    assert!(!pads(&h).join("once").exists(), "{}", report(&once));
    assert!(list_json(&h).is_empty());
}

#[test]
fn bad_names_and_planning_make_nothing() {
    let h = home();
    for bad in ["../escape", ".hidden", "a/b", "sp ace"] {
        let out = h.run(&["scratchpad", bad, "--", "true"]);
        assert_eq!(out.status.code(), Some(125), "{bad}: {}", report(&out));
        assert!(
            stderr(&out).contains("is not valid"),
            "{bad}: {}",
            report(&out)
        );
    }
    let out = h.run(&["scratchpad", "plan", "--explain"]);
    assert!(out.status.success(), "{}", report(&out));
    assert!(!pads(&h).exists(), "planning made a workspace");
    let missing = h.run(&["scratchpad", "rm", "nope"]);
    assert!(
        stderr(&missing).contains("no scratchpad named"),
        "{}",
        report(&missing)
    );
    let inside = h
        .airlock(&["scratchpad", "--", "true"])
        .env("AIRLOCK", "1")
        .env("AIRLOCK_PROJECT", "app-12345678")
        .output()
        .unwrap();
    assert!(
        stderr(&inside).contains("already inside a sandbox"),
        "{}",
        report(&inside)
    );
}
