//! `airlock logs internal` as a user runs it: the socket filters' logs and the egress proxy's
//! diagnostics on disk, merged by time.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use common::{TestHome, report, stderr, stdout};

fn home_with_logs() -> (TestHome, std::path::PathBuf) {
    let h = TestHome::new("home/code/app");
    let dir = h
        .sandboxes()
        .join(airlock_sandbox::state::sandbox_name(&h.project))
        .join("logs/internal");
    common::write(
        &dir.join("herdr.log"),
        "1796000554123 pane.read allow owned pane\n1796000556000 pane.close deny not owned\n",
    );
    common::write(
        &dir.join("egress.log"),
        "1796000555000 the egress proxy cannot accept a connection: Too many open files (os error 24)\nnot a line\n",
    );
    (h, dir)
}

#[test]
fn every_log_merged_by_time_or_one_with_filter() {
    let (h, _) = home_with_logs();
    let out = h.run(&["logs", "internal"]);
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(
        stdout(&out),
        "2026-11-30T01:02:34.123Z  herdr   pane.read allow owned pane\n\
         2026-11-30T01:02:35.000Z  egress  the egress proxy cannot accept a connection: Too many open files (os error 24)\n\
         2026-11-30T01:02:36.000Z  herdr   pane.close deny not owned\n"
    );
    assert!(
        stderr(&out).contains("skipped 1 unreadable line in "),
        "{}",
        report(&out)
    );
    let out = h.run(&["logs", "internal", "--filter", "herdr", "-n", "1"]);
    assert_eq!(
        stdout(&out),
        "2026-11-30T01:02:36.000Z  herdr   pane.close deny not owned\n"
    );
}

#[test]
fn an_unknown_filter_names_the_logs_there() {
    let (h, _) = home_with_logs();
    for name in ["kitty", "../network"] {
        let out = h.run(&["logs", "internal", "--filter", name]);
        assert_eq!(out.status.code(), Some(125), "{}", report(&out));
        assert!(
            stderr(&out).contains(&format!("no internal log {name:?}"))
                && stderr(&out).contains("the logs there: egress, herdr"),
            "{}",
            report(&out)
        );
    }
}

#[test]
fn a_sandbox_without_internal_logs_says_so() {
    let h = TestHome::new("home/code/app");
    std::fs::create_dir_all(
        h.sandboxes()
            .join(airlock_sandbox::state::sandbox_name(&h.project)),
    )
    .unwrap();
    let out = h.run(&["logs", "internal"]);
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(stdout(&out), "");
    assert!(
        stderr(&out).contains("no internal logs for sandbox"),
        "{}",
        report(&out)
    );
}

#[test]
fn follow_prints_lines_of_logs_old_and_new() {
    let (h, dir) = home_with_logs();
    let mut child = h
        .airlock(&["logs", "internal", "-f", "-n", "1"])
        .env("PATH", "/usr/bin:/bin")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // The latest line first: the snapshot is read, what comes next is followed.
    assert_eq!(
        lines.next().unwrap().unwrap(),
        "2026-11-30T01:02:36.000Z  herdr   pane.close deny not owned"
    );
    let mut herdr = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join("herdr.log"))
        .unwrap();
    herdr
        .write_all(b"1796000557000 pane.list allow scoped\n")
        .unwrap();
    assert_eq!(
        lines.next().unwrap().unwrap(),
        "2026-11-30T01:02:37.000Z  herdr   pane.list allow scoped"
    );
    common::write(
        &dir.join("kitty.log"),
        "1796000558000 ls allow own window\n",
    );
    assert_eq!(
        lines.next().unwrap().unwrap(),
        "2026-11-30T01:02:38.000Z  kitty   ls allow own window"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}
