//! The bad-input table: each request gets its documented status, and no host program runs.

use std::time::{Duration, Instant};

use crate::harness::World;

/// Route caps (bytes): one byte more is 413.
const CAPS: &[(&str, usize)] = &[
    ("/open", 9216),
    ("/edit", 9216),
    ("/credential", 64 * 1024),
    ("/command", 16 * 1024),
    ("/sound", 512 * 1024),
];

/// (what, method, path, authorization, body, expected status)
type Row<'a> = (&'a str, &'a str, &'a str, Option<String>, String, u16);

#[test]
fn bad_inputs_get_their_documented_status() {
    let w = World::installed();
    let token = w.token();
    let good = format!("Bearer {token}");
    let missing = w.home.join("nope.txt");
    let long_url = format!(r#"{{"url":"https://example.com/{}"}}"#, "a".repeat(8192));
    let missing_path = serde_json::json!({"editor": "code", "path": missing}).to_string();
    let json = |v: serde_json::Value| v.to_string();
    // (what, method, path, authorization, body, status)
    let table: Vec<Row> = vec![
        (
            "wrong method",
            "GET",
            "/open",
            Some(good.clone()),
            String::new(),
            405,
        ),
        (
            "PUT",
            "PUT",
            "/credential",
            Some(good.clone()),
            String::new(),
            405,
        ),
        (
            "missing token",
            "POST",
            "/open",
            None,
            json(serde_json::json!({"url": "https://e.com/"})),
            401,
        ),
        (
            "wrong token",
            "POST",
            "/open",
            Some(format!("Bearer {}", "0".repeat(64))),
            String::new(),
            401,
        ),
        (
            "short token",
            "POST",
            "/open",
            Some(format!("Bearer {}", &token[..63])),
            String::new(),
            401,
        ),
        (
            "long token",
            "POST",
            "/open",
            Some(format!("Bearer {token}0")),
            String::new(),
            401,
        ),
        (
            "basic scheme",
            "POST",
            "/open",
            Some(format!("Basic {token}")),
            String::new(),
            401,
        ),
        (
            "bare token",
            "POST",
            "/open",
            Some(token.clone()),
            String::new(),
            401,
        ),
        (
            "unknown route",
            "POST",
            "/proxim",
            Some(good.clone()),
            "{}".into(),
            404,
        ),
        (
            "/proximo verb not allowed",
            "POST",
            "/proximo",
            Some(good.clone()),
            json(serde_json::json!({"command": "install"})),
            400,
        ),
        (
            "/proximo refused flag",
            "POST",
            "/proximo",
            Some(good.clone()),
            json(serde_json::json!({"command": "status", "args": ["--outp", "x"]})),
            400,
        ),
        (
            "/proximo unknown key",
            "POST",
            "/proximo",
            Some(good.clone()),
            json(serde_json::json!({"command": "status", "program": "sh"})),
            400,
        ),
        (
            "long-flag prefix",
            "POST",
            "/command",
            Some(good.clone()),
            json(serde_json::json!({"command": "proximo", "args": ["status", "--outp=x"]})),
            400,
        ),
        (
            "file url",
            "POST",
            "/open",
            Some(good.clone()),
            json(serde_json::json!({"url": "file:///etc/passwd"})),
            400,
        ),
        (
            "javascript url",
            "POST",
            "/open",
            Some(good.clone()),
            json(serde_json::json!({"url": "javascript:alert(1)"})),
            400,
        ),
        (
            "data url",
            "POST",
            "/open",
            Some(good.clone()),
            json(serde_json::json!({"url": "data:text/html,hi"})),
            400,
        ),
        (
            "url over 8192 chars",
            "POST",
            "/open",
            Some(good.clone()),
            long_url,
            400,
        ),
        (
            "url without host",
            "POST",
            "/open",
            Some(good.clone()),
            json(serde_json::json!({"url": "https:///path"})),
            400,
        ),
        (
            "shell editor",
            "POST",
            "/edit",
            Some(good.clone()),
            json(serde_json::json!({"editor": "vim; rm -rf /", "path": "/"})),
            400,
        ),
        (
            "relative path",
            "POST",
            "/edit",
            Some(good.clone()),
            json(serde_json::json!({"editor": "code", "path": "src/main.rs"})),
            400,
        ),
        (
            "missing path",
            "POST",
            "/edit",
            Some(good.clone()),
            missing_path,
            400,
        ),
        (
            "op list",
            "POST",
            "/credential",
            Some(good.clone()),
            json(serde_json::json!({"op": "list", "input": ""})),
            400,
        ),
        (
            "command install",
            "POST",
            "/command",
            Some(good.clone()),
            json(serde_json::json!({"command": "proximo", "args": ["install"]})),
            400,
        ),
        (
            "-o/tmp/x",
            "POST",
            "/command",
            Some(good.clone()),
            json(serde_json::json!({"command": "proximo", "args": ["up", "-o/tmp/x"]})),
            400,
        ),
        (
            "-jo",
            "POST",
            "/command",
            Some(good.clone()),
            json(serde_json::json!({"command": "proximo", "args": ["status", "-jo"]})),
            400,
        ),
        (
            "--output=x",
            "POST",
            "/command",
            Some(good.clone()),
            json(serde_json::json!({"command": "proximo", "args": ["status", "--output=x"]})),
            400,
        ),
        (
            "errors dom",
            "POST",
            "/command",
            Some(good.clone()),
            json(serde_json::json!({"command": "proximo", "args": ["errors", "dom"]})),
            400,
        ),
        (
            "unconfigured command",
            "POST",
            "/command",
            Some(good.clone()),
            json(serde_json::json!({"command": "bash", "args": ["-c", "id"]})),
            400,
        ),
        (
            "invalid base64",
            "POST",
            "/sound",
            Some(good.clone()),
            json(serde_json::json!({"name": "x", "data": "not base64!"})),
            400,
        ),
        (
            "empty base64",
            "POST",
            "/sound",
            Some(good.clone()),
            json(serde_json::json!({"name": "x", "data": ""})),
            400,
        ),
        (
            "malformed json",
            "POST",
            "/open",
            Some(good.clone()),
            r#"{"url": "https://e.com/""#.into(),
            400,
        ),
        (
            "not an object",
            "POST",
            "/open",
            Some(good.clone()),
            r#"["https://e.com/"]"#.into(),
            400,
        ),
        (
            "empty body",
            "POST",
            "/open",
            Some(good.clone()),
            String::new(),
            400,
        ),
        (
            "unknown key",
            "POST",
            "/open",
            Some(good.clone()),
            r#"{"url":"https://e.com/","target":"_blank"}"#.into(),
            400,
        ),
        (
            "duplicate key",
            "POST",
            "/open",
            Some(good.clone()),
            r#"{"url":"https://e.com/","url":"https://f.com/"}"#.into(),
            400,
        ),
        (
            "case-variant key",
            "POST",
            "/open",
            Some(good.clone()),
            r#"{"URL":"https://e.com/"}"#.into(),
            400,
        ),
        (
            "duplicate op",
            "POST",
            "/credential",
            Some(good.clone()),
            r#"{"op":"get","op":"store","input":""}"#.into(),
            400,
        ),
        (
            "wrong type",
            "POST",
            "/command",
            Some(good.clone()),
            r#"{"command":"proximo","args":"status"}"#.into(),
            400,
        ),
        (
            "trailing data",
            "POST",
            "/edit",
            Some(good.clone()),
            r#"{"editor":"code","path":"/"} x"#.into(),
            400,
        ),
    ];
    let mut failures = Vec::new();
    for (what, method, path, auth, body, want) in &table {
        // A daemon per row: the rows would otherwise drain the shared bucket and read 429.
        let mut w = World::installed();
        w.start();
        let auth = auth.as_ref().map(|a| a.replace(&token, &w.token()));
        let (status, text) = w.send(method, path, auth.as_deref(), body.as_bytes());
        if status != *want {
            failures.push(format!(
                "{what}: {method} {path} got {status}, want {want}: {text}"
            ));
        }
        if *want == 400 && text.trim().is_empty() {
            failures.push(format!("{what}: a 400 must carry a plain reason"));
        }
        if !w.calls().is_empty() {
            failures.push(format!("{what}: a host program ran: {:?}", w.calls()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn one_byte_over_each_cap_is_413_and_a_full_cap_of_garbage_is_400() {
    for (route, cap) in CAPS {
        let mut w = World::installed();
        w.start();
        let auth = format!("Bearer {}", w.token());
        let over = vec![b'x'; cap + 1];
        let (status, text) = w.send("POST", route, Some(&auth), &over);
        assert_eq!(status, 413, "{route} at {} bytes: {text}", cap + 1);
        let at_cap = vec![b'x'; *cap];
        let (status, text) = w.send("POST", route, Some(&auth), &at_cap);
        assert_eq!(status, 400, "{route} at {cap} bytes: {text}");
    }
}

/// Sends `n` requests back to back: the statuses and how long they took.
fn burst(w: &World, route: &str, body: &str, n: usize) -> (Vec<u16>, Duration) {
    let start = Instant::now();
    let statuses: Vec<u16> = (0..n).map(|_| w.post(route, body).0).collect();
    (statuses, start.elapsed())
}

#[test]
fn burst_plus_one_is_429_per_bucket() {
    // (route, a body the route refuses with 400 after the bucket, burst, refill interval)
    let cases = [
        (
            "/open",
            r#"{"url":"file:///x"}"#,
            5,
            Duration::from_millis(100),
        ),
        (
            "/credential",
            r#"{"op":"list","input":""}"#,
            15,
            Duration::from_secs(1) / 30,
        ),
        (
            "/sound",
            r#"{"name":"x","data":""}"#,
            5,
            Duration::from_millis(100),
        ),
    ];
    for (route, body, burst_size, refill) in cases {
        // The exact claim holds when the burst fits in one refill interval; a loaded machine may
        // be slower, so such an attempt is retried, and after 5 the bound below is checked instead.
        let mut proven = false;
        for _attempt in 0..5 {
            let mut w = World::installed();
            w.start();
            let (statuses, took) = burst(&w, route, body, burst_size + 1);
            if took >= refill {
                continue;
            }
            assert!(
                statuses[..burst_size].iter().all(|s| *s == 400),
                "{route}: {statuses:?}"
            );
            assert_eq!(statuses[burst_size], 429, "{route}: {statuses:?}");
            proven = true;
            break;
        }
        if !proven {
            let mut w = World::installed();
            w.start();
            let (statuses, took) = burst(&w, route, body, burst_size * 3);
            let admitted = statuses.iter().filter(|s| **s == 400).count();
            let refills = (took.as_nanos() / refill.as_nanos()) as usize + 1;
            println!("{route}: slow machine, checked the bound ({admitted} admitted in {took:?})");
            assert!(
                statuses[..burst_size].iter().all(|s| *s == 400),
                "{route}: {statuses:?}"
            );
            assert!(
                admitted <= burst_size + refills,
                "{route}: {statuses:?} in {took:?}"
            );
            assert!(statuses.contains(&429), "{route}: {statuses:?}");
        }
    }
}

#[test]
fn the_buckets_are_separate() {
    let mut w = World::installed();
    w.start();
    while w.post("/open", r#"{"url":"file:///x"}"#).0 != 429 {}
    assert_eq!(
        w.post("/sound", r#"{"name":"x","data":""}"#).0,
        400,
        "sound has its own bucket"
    );
    assert_eq!(w.post("/credential", r#"{"op":"list","input":""}"#).0, 400);
}

#[test]
fn an_unauthenticated_flood_does_not_drain_the_bucket() {
    let mut w = World::installed();
    w.start();
    let wrong = format!("Bearer {}", "f".repeat(64));
    for _ in 0..200 {
        assert_eq!(
            w.send(
                "POST",
                "/open",
                Some(&wrong),
                br#"{"url":"https://e.com/"}"#
            )
            .0,
            401
        );
    }
    let (status, text) = w.post("/open", r#"{"url":"https://example.com/after-flood"}"#);
    assert_eq!(status, 204, "{text}");
    let log = w.audit_log();
    // Counted, not a line each: the first is logged, the rest summed into the next such line.
    let lines = log.lines().filter(|l| l.contains("bad token")).count();
    assert_eq!(lines, 1, "401s are summed, not logged one by one: {log}");
    assert!(
        log.contains("/open rejected (bad token: 1 request since the last such line)"),
        "{log}"
    );
}
