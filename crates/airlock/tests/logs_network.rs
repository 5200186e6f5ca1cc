//! `airlock logs network` as a user runs it: the real binary, a temp HOME, a decision log on disk.

mod common;

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{TestHome, stderr, stdout};

const ALLOWED: &str = r#"{"time":"2026-11-29T18:22:35.002Z","host":"api.github.com","port":443,"method":"CONNECT","decision":"allowed","rule":"github.com","bytes_up":1234,"bytes_down":49152,"duration_ms":312}"#;
const DENIED: &str = r#"{"time":"2026-11-29T18:22:34.123Z","host":"example.org","port":443,"method":"CONNECT","decision":"denied","bytes_up":0,"bytes_down":0,"duration_ms":0,"reason":"no rule allows it"}"#;
const ERROR: &str = r#"{"time":"2026-11-29T18:22:36.000Z","host":"","port":0,"method":"BREW","decision":"error","bytes_up":0,"bytes_down":0,"duration_ms":1,"reason":"method not accepted"}"#;

/// A temp HOME with a project directory in it (`~/code/app`).
struct World(TestHome);

impl Deref for World {
    type Target = TestHome;
    fn deref(&self) -> &TestHome {
        &self.0
    }
}

impl World {
    fn new() -> World {
        World(TestHome::new("home/code/app"))
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = self.0.airlock(args);
        cmd.env("PATH", "/usr/bin:/bin");
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("spawn airlock")
    }

    /// Writes `lines` as the decision log of sandbox `name` and returns the log's path.
    fn log(&self, name: &str, lines: &[&str]) -> PathBuf {
        let path = self.sandboxes().join(name).join("logs/network.jsonl");
        common::write(
            &path,
            &lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
        );
        path
    }
}

fn project_sandbox(project: &Path) -> String {
    airlock_sandbox::state::sandbox_name(project)
}

#[test]
fn shows_the_current_projects_last_decisions() {
    let w = World::new();
    w.log(&project_sandbox(&w.project), &[DENIED, ALLOWED, ERROR]);
    let out = w.run(&["logs", "network", "-n", "2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "2026-11-29T18:22:35.002Z  allowed  CONNECT api.github.com:443  rule=github.com  up=1.2 KiB down=48.0 KiB  312 ms\n\
         2026-11-29T18:22:36.000Z  error    BREW -  1 ms  method not accepted\n"
    );
    let out = w.run(&["logs", "network", "--denied", "--json"]);
    assert_eq!(stdout(&out), format!("{DENIED}\n"));
}

#[test]
fn another_sandbox_by_name_and_bad_names() {
    let w = World::new();
    w.log("other-12345678", &[ALLOWED]);
    let out = w.run(&["logs", "network", "--sandbox", "other-12345678", "--json"]);
    assert_eq!(stdout(&out), format!("{ALLOWED}\n"), "{}", stderr(&out));

    let out = w.run(&["logs", "network", "--sandbox", "missing"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr(&out).contains("there is no sandbox \"missing\""),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("airlock sandboxes list"),
        "{}",
        stderr(&out)
    );
    let out = w.run(&["logs", "network", "--sandbox", "../other-12345678"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr(&out).contains("is not a sandbox name"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_sandbox_without_a_log_says_so() {
    let w = World::new();
    fs::create_dir_all(
        w.home
            .join(".local/share/airlock/sandboxes")
            .join(project_sandbox(&w.project)),
    )
    .unwrap();
    let out = w.run(&["logs", "network"]);
    assert!(out.status.success());
    assert_eq!(stdout(&out), "");
    assert!(stderr(&out).contains("--network proxy"), "{}", stderr(&out));
}

#[test]
fn follow_prints_new_decisions_as_they_are_appended() {
    let w = World::new();
    let log = w.log("f-00000000", &[DENIED]);
    let mut child = w
        .command(&["logs", "network", "--sandbox", "f-00000000", "-f", "--json"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), DENIED);
    // Appended in two writes: a half-written line is not shown until it is complete.
    let mut file = fs::OpenOptions::new().append(true).open(&log).unwrap();
    file.write_all(&ALLOWED.as_bytes()[..20]).unwrap();
    file.flush().unwrap();
    file.write_all(&ALLOWED.as_bytes()[20..]).unwrap();
    file.write_all(b"\n").unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), ALLOWED);
    child.kill().unwrap();
    child.wait().unwrap();
}
