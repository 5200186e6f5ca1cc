//! The host's network and the egress proxy: what the container reaches.

use super::*;

#[test]
fn the_host_network_is_out_of_reach_without_network_host() {
    if !podman_runs() {
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let h = TestHome::new("home/code/app");
    let probe = format!(
        "bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}' 2>/dev/null && echo CONNECTED || echo refused"
    );
    let out = launch(&h, &[], &probe);
    assert!(out.status.success(), "{}", report(&out));
    assert!(stdout(&out).contains("refused"), "{}", report(&out));
    // Control: with network = "host" the same probe connects.
    let out = run_with(
        &h,
        &[],
        &[
            "run",
            "--network",
            "host",
            "--no-hide-env",
            "--",
            "sh",
            "-c",
            &probe,
        ],
    );
    assert!(stdout(&out).contains("CONNECTED"), "{}", report(&out));
}

/// A host HTTP server answering `ok` to every request, on 127.0.0.1 (the host's loopback).
fn http_server() -> u16 {
    use std::io::{Read, Write};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    port
}

#[test]
fn proxy_mode_reaches_allowed_hosts_through_the_egress_proxy_and_nothing_else() {
    if !podman_runs() {
        return;
    }
    let port = http_server();
    let h = TestHome::new("home/code/app");
    h.config(
        "[network]\npreset = \"deny-all\"\nallow = [\"allowed.test\"]\nallow_private = true\n\
         [network.resolve]\n\"allowed.test\" = \"127.0.0.1\"\n\"denied.test\" = \"127.0.0.1\"\n",
    );
    let script = format!(
        "curl -sS --max-time 10 http://allowed.test:{port}/; echo; \
         curl -s -o /dev/null -w '%{{http_code}}\\n' --max-time 10 http://denied.test:{port}/; \
         curl -s --max-time 5 --noproxy '*' http://127.0.0.1:{port}/ && echo DIRECT; \
         bash -c 'echo > /dev/tcp/127.0.0.1/{port}' 2>/dev/null && echo DIRECT-TCP; echo done"
    );
    let out = run_with(
        &h,
        &[],
        &["run", "--no-hide-env", "--", "sh", "-c", &script],
    );
    assert!(out.status.success(), "{}", report(&out));
    let seen = stdout(&out);
    let lines: Vec<&str> = seen.lines().collect();
    assert_eq!(
        lines.first(),
        Some(&"ok"),
        "the allowed host through the proxy: {}",
        report(&out)
    );
    assert_eq!(
        lines.get(1),
        Some(&"403"),
        "the denied host: {}",
        report(&out)
    );
    assert!(
        !seen.contains("DIRECT"),
        "the host's loopback was reached directly: {seen}"
    );
    assert!(seen.contains("done"), "{seen}");
    // Every decision is in the sandbox's log, with no empty connection of airlock's own.
    let logs = glob(&h.sandboxes(), "logs/network.jsonl");
    let log = std::fs::read_to_string(&logs[0]).unwrap();
    assert!(
        log.contains("\"host\":\"allowed.test\"") && log.contains("\"decision\":\"denied\""),
        "{log}"
    );
    assert!(!log.contains("before a full request head"), "{log}");
}
