//! `airlock network suggest` as a user runs it: decision logs on disk, the TOML it prints pasted
//! into the config, and `airlock network explain` saying the hosts are then allowed.

mod common;

use std::process::Output;

use common::{TestHome, report, stderr, stdout};

fn rec(host: &str, port: u16, decision: &str) -> String {
    serde_json::json!({
        "time": "2026-11-29T18:00:00.000Z", "host": host, "port": port, "method": "CONNECT",
        "decision": decision, "bytes_up": 0, "bytes_down": 0, "duration_ms": 1,
    })
    .to_string()
}

fn home() -> TestHome {
    TestHome::new("home/code/app")
}

/// Writes the decision log of sandbox `name`: `n` records for each `(host, decision, n)`.
fn log(h: &TestHome, name: &str, entries: &[(&str, &str, usize)]) {
    let mut text = String::new();
    for &(host, decision, n) in entries {
        for _ in 0..n {
            text.push_str(&rec(host, 443, decision));
            text.push('\n');
        }
    }
    common::write(&h.sandboxes().join(name).join("logs/network.jsonl"), &text);
}

fn project_sandbox(h: &TestHome) -> String {
    airlock_sandbox::state::sandbox_name(&h.project)
}

fn allow_of(out: &Output) -> Vec<String> {
    let table: toml::Table =
        toml::from_str(&stdout(out)).unwrap_or_else(|e| panic!("not TOML: {e}\n{}", report(out)));
    table["allow"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

const USED: &[(&str, &str, usize)] = &[
    ("registry.example.com", "denied", 3),
    ("a.cdn.example.net", "denied", 1),
    ("b.cdn.example.net", "denied", 1),
    ("c.cdn.example.net", "denied", 2),
    ("api.github.com", "allowed", 5),
    ("tool.example.dev", "allowed", 2),
    ("127.0.0.1", "denied", 2),
    ("169.254.169.254", "denied", 1),
    ("localhost", "denied", 1),
];

#[test]
fn the_suggestion_pasted_into_the_config_allows_the_hosts_it_names() {
    let h = home();
    log(&h, &project_sandbox(&h), USED);
    let out = h.run(&["network", "suggest"]);
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(
        allow_of(&out),
        [
            "*.cdn.example.net",
            "registry.example.com",
            "tool.example.dev"
        ],
        "denied first, busiest first: {}",
        stdout(&out)
    );
    let text = stdout(&out);
    assert!(
        text.contains("#   api.github.com: 5 requests: 5 allowed (rule \"api.github.com\" from preset balanced)"),
        "{text}"
    );
    for refused in [
        "127.0.0.1: 2 requests: 2 denied (loopback)",
        "169.254.169.254",
        "localhost",
    ] {
        let line = text
            .lines()
            .find(|l| l.contains(refused))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(line.starts_with("#   "), "a comment, never a rule: {line}");
    }
    assert!(
        text.contains("A wildcard stands for 3 or more subdomains seen."),
        "{text}"
    );

    // Pasted as printed under [network], every suggested host is allowed.
    h.config(&format!("[network]\n{text}"));
    for host in [
        "registry.example.com",
        "a.cdn.example.net",
        "c.cdn.example.net",
        "tool.example.dev",
        "api.github.com",
    ] {
        let o = h.run(&["network", "explain", host]);
        assert_eq!(o.status.code(), Some(0), "{host}: {}", report(&o));
        assert!(stdout(&o).contains("is allowed"), "{host}: {}", report(&o));
    }
    for host in ["127.0.0.1:8080", "169.254.169.254:80", "localhost"] {
        let o = h.run(&["network", "explain", host]);
        assert_eq!(
            o.status.code(),
            Some(1),
            "{host} stays denied: {}",
            report(&o)
        );
    }
    // Run again with them allowed: nothing left to add.
    let again = h.run(&["network", "suggest", "--denied-only"]);
    assert_eq!(allow_of(&again), Vec::<String>::new(), "{}", report(&again));
}

#[test]
fn denied_only_min_requests_and_json() {
    let h = home();
    log(&h, &project_sandbox(&h), USED);
    let out = h.run(&["network", "suggest", "--denied-only"]);
    assert_eq!(
        allow_of(&out),
        ["*.cdn.example.net", "registry.example.com"]
    );
    assert!(!stdout(&out).contains("api.github.com"), "{}", report(&out));
    let out = h.run(&["network", "suggest", "--min-requests", "3"]);
    assert_eq!(allow_of(&out), ["registry.example.com"], "{}", report(&out));
    assert!(
        stdout(&out).contains("# Left out: 7 hosts with fewer than 3 requests (--min-requests)."),
        "{}",
        report(&out)
    );
    let out = h.run(&["network", "suggest", "--json"]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["requests"], 18);
    assert_eq!(json["allow"][0]["rule"], "*.cdn.example.net");
    assert_eq!(json["allow"][0]["denied"], 4);
    let verdict = |host: &str| {
        json["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["host"] == host)
            .map(|v| v["verdict"].as_str().unwrap().to_owned())
    };
    assert_eq!(verdict("api.github.com").as_deref(), Some("allowed"));
    assert_eq!(verdict("127.0.0.1").as_deref(), Some("address_check"));
    assert_eq!(verdict("b.cdn.example.net").as_deref(), Some("suggested"));
}

#[test]
fn all_reads_every_sandbox_and_a_deny_rule_is_never_overridden() {
    let h = home();
    log(
        &h,
        "one-11111111",
        &[
            ("shared.example", "denied", 1),
            ("gist.github.com", "denied", 1),
        ],
    );
    log(
        &h,
        "two-22222222",
        &[
            ("shared.example", "denied", 2),
            ("only-two.example", "denied", 1),
        ],
    );
    h.config("[network]\ndeny = [\"gist.github.com\"]\n");
    let out = h.run(&["network", "suggest", "--all"]);
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(allow_of(&out), ["shared.example", "only-two.example"]);
    let text = stdout(&out);
    assert!(
        text.starts_with(
            "# airlock network suggest: 5 requests in the network log of 2 sandboxes\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("\"shared.example\",  # 3 requests: 3 denied"),
        "{text}"
    );
    assert!(text.contains("# Denied by a deny rule"), "{text}");
    assert!(
        text.contains("#   gist.github.com: 1 request: 1 denied (rule \"gist.github.com\" from "),
        "{text}"
    );

    let out = h.run(&["network", "suggest", "--sandbox", "two-22222222"]);
    assert_eq!(allow_of(&out), ["shared.example", "only-two.example"]);
    assert!(
        stdout(&out).contains("of sandbox two-22222222"),
        "{}",
        report(&out)
    );
    let out = h.run(&["network", "suggest", "--all", "--sandbox", "one-11111111"]);
    assert_eq!(out.status.code(), Some(2), "{}", report(&out));
}

#[test]
fn no_log_yet_says_so_and_suggests_nothing() {
    let h = home();
    std::fs::create_dir_all(h.sandboxes().join(project_sandbox(&h))).unwrap();
    let out = h.run(&["network", "suggest"]);
    assert!(out.status.success(), "{}", report(&out));
    assert_eq!(allow_of(&out), Vec::<String>::new());
    assert!(
        stderr(&out).contains("no network decisions logged yet"),
        "{}",
        report(&out)
    );
}
