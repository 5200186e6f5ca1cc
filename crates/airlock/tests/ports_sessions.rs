//! Port forwards into running sessions: `airlock forward`, `airlock sessions`, the control
//! socket out of the sandbox's reach, the end of a session (also by SIGKILL), and an
//! unprivileged caller (root's requests refused by uid).

mod common;

use std::fs;
use std::path::Path;
use std::process::Command;

use common::ports::*;
use common::users::{as_user, chown_tree, other_user};
use common::{AIRLOCK, TestHome};

#[test]
fn forward_into_a_running_session_and_sessions_lists_it() {
    if !available() {
        return;
    }
    let h = site("forwarded\n");
    let run = Running::start(&h, &[], &http_server(8000));
    wait_for("the session", || h.project.join(".started").exists());
    let port = free_port();
    let mapping = format!("{port}:8000");
    let out = h.run(&["forward", &mapping]);
    assert!(out.status.success(), "{}", common::report(&out));
    assert!(
        common::stdout(&out).contains(&format!(
            "the host's 127.0.0.1:{port} now reaches 127.0.0.1:8000"
        )),
        "{}",
        common::report(&out)
    );
    wait_for("the forwarded server", || get(port, "/").is_some());
    assert_eq!(get(port, "/").as_deref(), Some("forwarded\n"));
    // The same host port again: refused by the session, nothing else changes.
    let again = h.run(&["forward", &mapping]);
    assert_eq!(again.status.code(), Some(125));
    assert!(
        common::stderr(&again).contains("is in use"),
        "{}",
        common::report(&again)
    );
    let sessions = h.run(&["sessions", "--json"]);
    let listed: serde_json::Value = serde_json::from_str(&common::stdout(&sessions)).unwrap();
    let name = airlock_sandbox::state::sandbox_name(&h.project);
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    let s = &listed[0];
    assert_eq!(s["sandbox"], name.as_str());
    assert_eq!(s["project"], h.project.display().to_string());
    assert_eq!(s["pid"], run.pid());
    assert_eq!(s["network"], "proxy");
    assert_eq!(
        s["ports"],
        serde_json::json!([{"host": port, "sandbox": 8000, "direction": "in", "kind": "forward", "expires_in_secs": null}])
    );
    let table = common::stdout(&h.run(&["sessions"]));
    assert!(table.contains(&format!("{port}→8000 (forward)")), "{table}");
    // The other ways to name a session, and the wrong ones.
    let by_pid = h.run(&[
        "forward",
        "--session",
        &run.pid().to_string(),
        &free_port().to_string(),
    ]);
    assert!(by_pid.status.success(), "{}", common::report(&by_pid));
    let by_name = h.run(&[
        "forward",
        "--sandbox",
        &name,
        &format!("{}:8000", free_port()),
    ]);
    assert!(by_name.status.success(), "{}", common::report(&by_name));
    let nope = h.run(&["forward", "--sandbox", "nope-12345678", "9999"]);
    assert!(common::stderr(&nope).contains("sandbox nope-12345678 has no running session"));
    let (status, stderr) = run.stop();
    assert!(status.success(), "{stderr}");
    assert!(port_is_free(port), "the forward ended with the session");
    assert_eq!(common::stdout(&h.run(&["sessions", "--json"])).trim(), "[]");
    assert_eq!(
        common::stdout(&h.run(&["sessions"])).trim(),
        "no running sessions"
    );
}

#[test]
fn a_killed_supervisor_leaves_no_listener_helper_or_live_record() {
    if !available() {
        return;
    }
    let h = site("x\n");
    let port = free_port();
    let run = Running::start(
        &h,
        &["--publish", &format!("{port}:8000")],
        &http_server(8000),
    );
    wait_for("the published server", || get(port, "/").is_some());
    let helpers = helpers_of(run.pid());
    assert_eq!(helpers.len(), 1);
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(run.pid() as libc::pid_t, libc::SIGKILL) };
    let mut run = run;
    let _ = run.child.wait();
    wait_for("the port to be free", || port_is_free(port));
    wait_for("the helper to end", || {
        !Path::new(&format!("/proc/{}", helpers[0])).exists()
    });
    assert_eq!(common::stdout(&h.run(&["sessions", "--json"])).trim(), "[]");
    let run_dir = h.home.join(".local/state/airlock/run");
    assert!(
        !run_dir.join(format!("{}.json", run.pid())).exists(),
        "the stale record is gone"
    );
}

#[test]
fn the_control_socket_is_out_of_the_sandboxs_reach() {
    if !available() {
        return;
    }
    let h = TestHome::new("work/app");
    let run_dir = h.home.join(".local/state/airlock/run");
    let probe = format!(
        "ls -d {dir} 2>&1; ls {dir}/*.sock 2>&1; mkdir -p {dir} 2>&1 && touch {dir}/planted.sock && echo planted",
        dir = run_dir.display()
    );
    let run = Running::start(&h, &[], &format!("({probe}) > probe.txt"));
    wait_for("the probe", || h.project.join(".started").exists());
    let probe = fs::read_to_string(h.project.join("probe.txt")).unwrap();
    assert!(probe.contains("No such file or directory"), "{probe}");
    // Whatever the sandbox made lives in its synthetic home, not in the host's run dir.
    let host_entries: Vec<_> = fs::read_dir(&run_dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        host_entries.len(),
        2,
        "the socket and the record: {host_entries:?}"
    );
    assert!(!run_dir.join("planted.sock").exists());
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&fs::metadata(&run_dir).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o700);
    drop(run);
}

#[test]
fn an_unprivileged_caller_publishes_and_forwards_too() {
    if !available() {
        return;
    }
    let Some(user) = other_user() else {
        eprintln!("skipped: needs root to run airlock as an unprivileged user (AIRLOCK_TEST_USER)");
        return;
    };
    let h = site("unprivileged\n");
    // The binary where the user can run it, the whole tree theirs.
    let bin = h.root.join("bin");
    fs::create_dir(&bin).unwrap();
    fs::copy(AIRLOCK, bin.join("airlock")).unwrap();
    chown_tree(&h.root, user);
    let airlock = bin.join("airlock");
    let port = free_port();
    let publish = format!("{port}:8000");
    let run = Running::start_as(
        &h,
        &airlock,
        Some(user),
        &["--publish", &publish],
        &http_server(8000),
    );
    wait_for("the published server", || get(port, "/").is_some());
    assert_eq!(get(port, "/").as_deref(), Some("unprivileged\n"));
    let forwarded = free_port();
    let mut forward = Command::new(&airlock);
    forward
        .args(["forward", &format!("{forwarded}:8000")])
        .current_dir(&h.project)
        .env_clear()
        .env("HOME", &h.home)
        .env("PATH", "/usr/bin:/bin");
    as_user(&mut forward, user);
    let out = forward.output().unwrap();
    assert!(out.status.success(), "{}", common::report(&out));
    wait_for("the forward", || get(forwarded, "/").is_some());
    // Root is not the session's user: its requests are refused even though it can reach the
    // socket (0700 stops every other user).
    let root_asks = h.run(&[
        "forward",
        "--session",
        &run.pid().to_string(),
        &free_port().to_string(),
    ]);
    assert!(
        common::stderr(&root_asks).contains("refused: uid 0 is not this session's user"),
        "{}",
        common::report(&root_asks)
    );
    let (status, stderr) = run.stop();
    assert!(status.success(), "{stderr}");
    assert!(port_is_free(port) && port_is_free(forwarded));
}
