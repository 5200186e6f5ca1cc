//! `airlock logs network` filters and `--stats` as a user runs them: the real binary, a temp HOME,
//! a decision log on disk.

mod common;

use common::netlog::{World, hosts, project_sandbox, rec};
use common::{report, stderr, stdout};

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
