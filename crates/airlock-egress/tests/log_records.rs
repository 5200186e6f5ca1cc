//! The decision log as the proxy writes it and as readers get it back: the `status` field, time
//! order with a long tunnel, rotation at a small cap.

mod support;

use std::io::{Read, Write};
use std::time::{Duration, SystemTime};

use airlock_config::EgressPreset;
use airlock_config::logfile::Rotation;
use airlock_egress::log::{LogReader, Query};
use airlock_egress::{LogDecision, ProxyConfig};
use support::upstream::Upstream;
use support::*;

fn open_settings() -> airlock_config::EgressSettings {
    settings(EgressPreset::DenyAll, &["allowed.test", "127.0.0.1"], &[])
}

#[test]
fn status_is_the_upstreams_for_plain_http_the_proxys_for_refusals_and_absent_for_tunnels() {
    let up = Upstream::start();
    let p = up.port();
    let proxy = Proxy::start(&open_settings());
    let get = |path: &str| {
        proxy.raw(
            format!("GET http://allowed.test:{p}{path} HTTP/1.1\r\nHost: allowed.test:{p}\r\n\r\n")
                .as_bytes(),
        )
    };
    assert_eq!(status_of(&get("/hello")), 200);
    assert_eq!(status_of(&get("/missing")), 404);
    assert_eq!(status_of(&get("/garbage")), 502);
    let denied = proxy.raw(b"CONNECT evil.test:443 HTTP/1.1\r\n\r\n");
    assert_eq!(status_of(&denied), 403);
    let bad = proxy.raw(b"GET /relative HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(status_of(&bad), 400);
    let method = proxy.raw(b"BREW http://allowed.test/ HTTP/1.1\r\n\r\n");
    assert_eq!(status_of(&method), 405);
    let unresolvable = proxy.raw(b"CONNECT nowhere.invalid:443 HTTP/1.1\r\n\r\n");
    assert_eq!(status_of(&unresolvable), 403, "not allowed: {unresolvable}");
    let tunnel = open_tunnel(&proxy, p);
    drop(tunnel);
    let records = proxy.finish();
    let status = |pred: &dyn Fn(&airlock_egress::LogRecord) -> bool| {
        let r = records
            .iter()
            .find(|r| pred(r))
            .unwrap_or_else(|| panic!("{records:#?}"));
        r.status
    };
    assert_eq!(
        status(&|r| r.method == "GET" && r.bytes_down > 30 && r.status == Some(200)),
        Some(200)
    );
    assert_eq!(
        status(&|r| r.method == "GET" && r.status == Some(404)),
        Some(404)
    );
    let garbage = records.iter().find(|r| r.status == Some(502)).unwrap();
    assert_eq!(garbage.decision, LogDecision::Allowed, "{garbage:?}");
    assert_eq!(status(&|r| r.host == "evil.test"), Some(403));
    assert_eq!(
        status(&|r| r.method == "GET" && r.host.is_empty()),
        Some(400)
    );
    assert_eq!(status(&|r| r.method == "BREW"), Some(405));
    assert_eq!(
        status(&|r| r.method == "CONNECT" && r.host == "allowed.test"),
        None,
        "the proxy never sees the status inside a tunnel"
    );
    // The field is in the JSON line only when there is a status.
    let text = records
        .iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect::<Vec<_>>();
    assert!(
        text.iter().any(|l| l.contains("\"status\":404")),
        "{text:?}"
    );
    assert!(
        text.iter().any(|l| l.contains("\"CONNECT\"")
            && l.contains("allowed.test")
            && !l.contains("status")),
        "{text:?}"
    );
}

/// A CONNECT tunnel to the upstream on `port`, established.
fn open_tunnel(proxy: &Proxy, port: u16) -> std::net::TcpStream {
    let mut tunnel = proxy.connect();
    tunnel
        .write_all(format!("CONNECT allowed.test:{port} HTTP/1.1\r\n\r\n").as_bytes())
        .unwrap();
    let mut established = [0u8; 39];
    tunnel.read_exact(&mut established).unwrap();
    assert!(established.starts_with(b"HTTP/1.1 200"), "{established:?}");
    tunnel
}

/// Waits (without sleeping) until the wall clock has moved past `since` by a few milliseconds,
/// so two requests get different `time`s.
fn clock_moves_past(since: SystemTime) {
    while SystemTime::now() < since + Duration::from_millis(3) {
        std::hint::spin_loop();
    }
}

#[test]
fn a_long_tunnel_opened_first_is_read_back_first_though_logged_last() {
    let up = Upstream::start();
    let p = up.port();
    let proxy = Proxy::start(&open_settings());
    let tunnel = open_tunnel(&proxy, p);
    clock_moves_past(SystemTime::now());
    for _ in 0..3 {
        proxy.raw(
            format!("GET http://allowed.test:{p}/hello HTTP/1.1\r\nHost: allowed.test:{p}\r\n\r\n")
                .as_bytes(),
        );
    }
    proxy.wait_for_records(3);
    drop(tunnel);
    let written = proxy.wait_for_records(4);
    assert_eq!(
        written[3].method, "CONNECT",
        "logged when it closed: {written:#?}"
    );

    let mut reader = LogReader::new(&proxy.log);
    let read = reader.latest(&Query::default(), 10).unwrap();
    let methods: Vec<&str> = read.iter().map(|l| l.record.method.as_str()).collect();
    assert_eq!(methods, ["CONNECT", "GET", "GET", "GET"]);
    assert!(read.windows(2).all(|w| w[0].time <= w[1].time));
    // The latest one by time is the last short request, not the tunnel logged after it.
    let last = reader.latest(&Query::default(), 1).unwrap();
    assert_eq!(last[0].record.method, "GET");
    assert_eq!(reader.take_unreadable(), 0);
    proxy.finish();
}

#[test]
fn the_log_rotates_at_its_cap_and_readers_get_every_kept_file_in_order() {
    let rotation = Rotation {
        max_bytes: 1024,
        files: 2,
    };
    let proxy = Proxy::start_with(
        &open_settings(),
        ProxyConfig {
            log_rotation: rotation,
            ..ProxyConfig::default()
        },
    );
    // ~190-byte denial records: five fill a file, thirty rotate it several times.
    for n in 0..30 {
        let resp = proxy.raw(format!("CONNECT denied-{n:02}.test:443 HTTP/1.1\r\n\r\n").as_bytes());
        assert_eq!(status_of(&resp), 403);
        proxy.wait_until_logged(&format!("denied-{n:02}.test"));
    }
    let mut proxy = proxy;
    proxy.handle.take().expect("running").shutdown();
    let log = proxy.log.clone();
    let rotated = |n: usize| log.with_file_name(format!("network.jsonl.{n}"));
    for file in [log.clone(), rotated(1), rotated(2)] {
        let len = std::fs::metadata(&file).unwrap().len();
        assert!(len > 0 && len <= 1024, "{file:?}: {len} bytes");
    }
    assert!(!rotated(3).exists(), "two rotated files are kept");

    let mut reader = LogReader::new(&log);
    let mut hosts = Vec::new();
    reader
        .scan(&Query::default(), |l| hosts.push(l.record.host))
        .unwrap();
    assert_eq!(reader.take_unreadable(), 0);
    assert_eq!(hosts.last().map(String::as_str), Some("denied-29.test"));
    let expected: Vec<String> = (30 - hosts.len()..30)
        .map(|n| format!("denied-{n:02}.test"))
        .collect();
    assert_eq!(
        hosts, expected,
        "oldest file first, nothing lost within them"
    );
    assert!(hosts.len() >= 10, "{hosts:?}");
}
