//! `airlock logs network` as a user runs it: the real binary, a temp HOME, a decision log on disk
//! (written here, or by the real proxy of a real sandbox).

mod common;

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{TestHome, report, stderr, stdout};

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

/// A decision record as the proxy writes it.
fn rec(time: &str, host: &str, method: &str, decision: &str, status: Option<u16>) -> String {
    let mut r = serde_json::json!({
        "time": time, "host": host, "port": 443, "method": method, "decision": decision,
        "bytes_up": 10, "bytes_down": 100, "duration_ms": 5,
    });
    if let Some(status) = status {
        r["status"] = status.into();
    }
    r.to_string()
}

/// The hosts of `--json` output, in order.
fn hosts(out: &Output) -> Vec<String> {
    stdout(out)
        .lines()
        .map(|l| {
            let v: serde_json::Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            v["host"].as_str().unwrap().to_owned()
        })
        .collect()
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
fn follow_prints_new_whole_decisions_in_time_order() {
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
    // Written out of time order (a tunnel that closed later): printed in time order, the
    // unreadable line between them skipped.
    let later = rec(
        "2026-11-29T18:30:02.000Z",
        "later.test",
        "GET",
        "allowed",
        Some(200),
    );
    let earlier = rec(
        "2026-11-29T18:30:01.000Z",
        "earlier.test",
        "CONNECT",
        "allowed",
        None,
    );
    file.write_all(format!("{later}\ngarbage\n{earlier}\n").as_bytes())
        .unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), earlier);
    assert_eq!(lines.next().unwrap().unwrap(), later);
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Six decisions, one minute apart from 18:00, to filter.
fn filter_log(w: &World) -> String {
    let name = project_sandbox(&w.project);
    w.log(
        &name,
        &[
            &rec(
                "2026-11-29T18:00:00.000Z",
                "api.github.com",
                "CONNECT",
                "allowed",
                None,
            ),
            &rec(
                "2026-11-29T18:01:00.000Z",
                "uploads.github.com",
                "CONNECT",
                "denied",
                Some(403),
            ),
            &rec(
                "2026-11-29T18:02:00.000Z",
                "api.example.org",
                "GET",
                "allowed",
                Some(200),
            ),
            &rec(
                "2026-11-29T18:03:00.000Z",
                "evil.example",
                "POST",
                "denied",
                Some(403),
            ),
            &rec(
                "2026-11-29T18:04:00.000Z",
                "GitHub.com",
                "get",
                "error",
                Some(502),
            ),
            &rec(
                "2026-11-29T18:05:00.000Z",
                "api.github.com",
                "CONNECT",
                "allowed",
                None,
            ),
        ],
    );
    name
}

#[test]
fn each_filter_alone() {
    let w = World::new();
    filter_log(&w);
    let shown = |args: &[&str]| {
        let mut all = vec!["logs", "network", "--json"];
        all.extend_from_slice(args);
        let out = w.run(&all);
        assert!(out.status.success(), "{args:?}: {}", report(&out));
        hosts(&out)
    };
    assert_eq!(
        shown(&["--host", "*.GitHub.com"]),
        ["api.github.com", "uploads.github.com", "api.github.com"]
    );
    assert_eq!(
        shown(&["--host", "api.*"]),
        ["api.github.com", "api.example.org", "api.github.com"]
    );
    assert_eq!(
        shown(&["--host", "github.com"]),
        ["GitHub.com"],
        "case-insensitive"
    );
    assert_eq!(shown(&["--method", "post"]), ["evil.example"]);
    assert_eq!(
        shown(&["--method", "GET", "--method", "post"]),
        ["api.example.org", "evil.example"]
    );
    assert_eq!(shown(&["--decision", "error"]), ["GitHub.com"]);
    assert_eq!(
        shown(&["--decision", "denied"]),
        ["uploads.github.com", "evil.example"]
    );
    assert_eq!(shown(&["--denied"]), shown(&["--decision", "denied"]));
    assert_eq!(
        shown(&["--decision", "error", "--decision", "denied"]),
        ["uploads.github.com", "evil.example", "GitHub.com"]
    );
    assert_eq!(
        shown(&["--since", "2026-11-29T18:04:00Z"]),
        ["GitHub.com", "api.github.com"]
    );
    assert_eq!(
        shown(&["--until", "2026-11-29T18:01"]),
        ["api.github.com"],
        "until is exclusive"
    );
    assert_eq!(shown(&["--since", "2026-11-30"]), Vec::<String>::new());
}

#[test]
fn filters_combine_and_n_counts_what_they_keep() {
    let w = World::new();
    filter_log(&w);
    let out = w.run(&[
        "logs",
        "network",
        "--json",
        "--host",
        "*.github.com",
        "--decision",
        "allowed",
        "--method",
        "connect",
        "--since",
        "2026-11-29T18:00:30Z",
        "--until",
        "2026-11-29T18:10:00Z",
    ]);
    assert_eq!(hosts(&out), ["api.github.com"], "{}", report(&out));
    let out = w.run(&[
        "logs",
        "network",
        "--json",
        "--host",
        "*.github.com",
        "-n",
        "1",
    ]);
    assert_eq!(hosts(&out), ["api.github.com"]);
    assert!(stdout(&out).contains("18:05:00"), "{}", report(&out));
}

#[test]
fn since_takes_a_duration_back_from_now() {
    let w = World::new();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let ago = |ms: i64| airlock_egress::rfc3339_from_unix_millis(now - ms);
    w.log(
        &project_sandbox(&w.project),
        &[
            &rec(
                &ago(3 * 86_400_000 + 60_000),
                "old.test",
                "GET",
                "allowed",
                Some(200),
            ),
            &rec(&ago(3_600_000), "hour.test", "GET", "allowed", Some(200)),
            &rec(&ago(10_000), "recent.test", "GET", "allowed", Some(200)),
        ],
    );
    let out = w.run(&["logs", "network", "--json", "--since", "10m"]);
    assert_eq!(hosts(&out), ["recent.test"], "{}", report(&out));
    let out = w.run(&["logs", "network", "--json", "--since", "2h"]);
    assert_eq!(hosts(&out), ["hour.test", "recent.test"]);
    let out = w.run(&[
        "logs", "network", "--json", "--since", "3d", "--until", "30m",
    ]);
    assert_eq!(hosts(&out), ["hour.test"]);
}

#[test]
fn a_time_that_is_not_one_names_the_flag_and_the_forms() {
    let w = World::new();
    filter_log(&w);
    for flag in ["--since", "--until"] {
        let out = w.run(&["logs", "network", flag, "yesterday-ish"]);
        assert_eq!(out.status.code(), Some(125), "{}", report(&out));
        let err = stderr(&out);
        assert!(
            err.contains(&format!("{flag} \"yesterday-ish\" is not a time")),
            "{err}"
        );
        assert!(
            err.contains("RFC 3339") && err.contains("2026-11-29T18:22:00Z"),
            "{err}"
        );
        assert!(err.contains("10m, 2h, 3d"), "{err}");
        assert_eq!(stdout(&out), "");
    }
    let out = w.run(&["logs", "network", "--host", "[oops"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr(&out).contains("--host \"[oops\" is not a glob"),
        "{}",
        report(&out)
    );
    let out = w.run(&["logs", "network", "--decision", "maybe"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "clap refuses it: {}",
        report(&out)
    );
    assert!(
        stderr(&out).contains("allowed, denied, error"),
        "{}",
        report(&out)
    );
}

#[test]
fn stats_sum_each_host_as_a_table_and_as_json() {
    let w = World::new();
    filter_log(&w);
    let out = w.run(&["logs", "network", "--stats", "--json"]);
    assert!(out.status.success(), "{}", report(&out));
    let rows: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        rows[0],
        serde_json::json!({"host": "api.github.com", "requests": 2, "allowed": 2, "denied": 0,
            "errors": 0, "bytes_up": 20, "bytes_down": 200,
            "first_seen": "2026-11-29T18:00:00.000Z", "last_seen": "2026-11-29T18:05:00.000Z"})
    );
    assert_eq!(rows.as_array().unwrap().len(), 5);
    let out = w.run(&["logs", "network", "--stats", "--host", "*.github.com"]);
    let text = stdout(&out);
    let header = text.lines().nth(1).unwrap();
    for column in [
        "HOST",
        "REQUESTS",
        "ALLOWED",
        "DENIED",
        "ERRORS",
        "UP",
        "DOWN",
        "FIRST SEEN",
        "LAST SEEN",
    ] {
        assert!(header.contains(column), "{text}");
    }
    assert!(
        text.contains("api.github.com") && text.contains("uploads.github.com"),
        "{text}"
    );
    assert!(!text.contains("evil.example"), "{text}");
    let out = w.run(&["logs", "network", "--stats", "-f"]);
    assert_eq!(out.status.code(), Some(2), "{}", report(&out));
}

#[test]
fn lines_are_in_time_order_though_a_long_tunnel_is_logged_last() {
    let w = World::new();
    // The tunnel arrived first and closed last, so the proxy wrote it last.
    w.log(
        &project_sandbox(&w.project),
        &[
            &rec(
                "2026-11-29T18:00:01.000Z",
                "short-1.test",
                "GET",
                "allowed",
                Some(200),
            ),
            &rec(
                "2026-11-29T18:00:02.000Z",
                "short-2.test",
                "GET",
                "allowed",
                Some(200),
            ),
            &rec(
                "2026-11-29T18:00:03.000Z",
                "short-3.test",
                "GET",
                "allowed",
                Some(200),
            ),
            &rec(
                "2026-11-29T18:00:00.000Z",
                "tunnel.test",
                "CONNECT",
                "allowed",
                None,
            ),
        ],
    );
    let out = w.run(&["logs", "network", "--json"]);
    assert_eq!(
        hosts(&out),
        [
            "tunnel.test",
            "short-1.test",
            "short-2.test",
            "short-3.test"
        ]
    );
    let out = w.run(&["logs", "network", "--json", "-n", "2"]);
    assert_eq!(
        hosts(&out),
        ["short-2.test", "short-3.test"],
        "the 2 latest by time"
    );
}

#[test]
fn rotated_files_are_read_oldest_first() {
    let w = World::new();
    let log = w.log(
        &project_sandbox(&w.project),
        &[&rec(
            "2026-11-29T18:00:03.000Z",
            "current.test",
            "GET",
            "allowed",
            Some(200),
        )],
    );
    let rotated = |n: u32, host: &str, time: &str| {
        let path = log.with_file_name(format!("network.jsonl.{n}"));
        common::write(
            &path,
            &(rec(time, host, "GET", "allowed", Some(200)) + "\n"),
        );
    };
    rotated(1, "one.test", "2026-11-29T18:00:02.000Z");
    rotated(2, "two.test", "2026-11-29T18:00:01.000Z");
    let out = w.run(&["logs", "network", "--json"]);
    assert_eq!(
        hosts(&out),
        ["two.test", "one.test", "current.test"],
        "{}",
        report(&out)
    );
    let out = w.run(&["logs", "network", "--stats", "--json"]);
    let rows: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 3);
}

#[test]
fn unreadable_lines_are_skipped_counted_and_reported_once() {
    let w = World::new();
    let name = project_sandbox(&w.project);
    let log = w.log(
        &name,
        &[
            DENIED,
            "garbage",
            r#"{"time":"2026-11-29T18:22:34"#,
            ALLOWED,
        ],
    );
    let rotated = log.with_file_name("network.jsonl.1");
    common::write(&rotated, "\u{0}\u{1}binary\n{\"host\":\"no time\"}\n");
    for args in [
        &["logs", "network"][..],
        &["logs", "network", "--stats"],
        &["network", "suggest"],
    ] {
        let out = w.run(args);
        assert!(out.status.success(), "{args:?}: {}", report(&out));
        let err = stderr(&out);
        assert_eq!(
            err.matches("unreadable").count(),
            1,
            "{args:?}: once: {err}"
        );
        assert!(
            err.contains(&format!(
                "airlock: skipped 4 unreadable lines in {}",
                log.display()
            )),
            "{args:?}: {err}"
        );
    }
    let out = w.run(&["logs", "network", "--json"]);
    assert_eq!(stdout(&out), format!("{DENIED}\n{ALLOWED}\n"));
}

#[test]
fn the_status_of_a_plain_http_request_through_the_real_proxy_is_logged() {
    use common::egress::{World as Sandbox, http_server_with, sandbox_available};
    if !sandbox_available() {
        return;
    }
    let port = http_server_with("418 I'm a teapot", "short and stout");
    let w = Sandbox::new(
        "[network]\npreset = \"deny-all\"\nallow = [\"allowed.test\", \"127.0.0.1\"]\n\
         resolve = { \"allowed.test\" = \"127.0.0.1\", \"denied.test\" = \"127.0.0.1\" }\n",
    );
    let script = format!(
        "curl -s -o /dev/null -w '%{{http_code}} ' http://allowed.test:{port}/pot?secret=1; \
         curl -s -o /dev/null -w '%{{http_code}}' http://denied.test:{port}/"
    );
    let o = w.sh(&[], &script);
    assert_eq!(stdout(&o), "418 403", "{}", report(&o));
    let out = w.run(&["logs", "network", "--json", "--method", "get"]);
    assert!(out.status.success(), "{}", report(&out));
    let records: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let status = |host: &str| {
        records
            .iter()
            .find(|r| r["host"] == host)
            .map(|r| r["status"].clone())
    };
    assert_eq!(status("allowed.test"), Some(418.into()), "{records:?}");
    assert_eq!(status("denied.test"), Some(403.into()), "{records:?}");
    assert!(!stdout(&out).contains("secret") && !stdout(&out).contains("/pot"));
    let human = w.run(&["logs", "network", "--host", "allowed.*"]);
    assert!(
        stdout(&human).contains(&format!("GET allowed.test:{port}  418  rule=allowed.test")),
        "{}",
        report(&human)
    );
}
