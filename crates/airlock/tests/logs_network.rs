//! `airlock logs network` as a user runs it: the real binary, a temp HOME, a decision log on disk
//! (written here, or by the real proxy of a real sandbox).

mod common;

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use common::netlog::{ALLOWED, DENIED, ERROR, World, hosts, project_sandbox, rec};
use common::{report, stderr, stdout};

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
