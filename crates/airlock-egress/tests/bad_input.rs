//! Malformed, ambiguous and hostile requests: each gets its documented status, nothing reaches the
//! upstream server, and stalled clients are cut off.

mod support;

use std::io::{Read, Write};
use std::time::Duration;

use airlock_config::EgressPreset;
use airlock_egress::{LogDecision, ProxyConfig};
use support::upstream::Upstream;
use support::*;

fn open_proxy() -> Proxy {
    Proxy::start(&settings(
        EgressPreset::DenyAll,
        &["allowed.test", "127.0.0.1"],
        &[],
    ))
}

#[test]
fn host_header_disagreeing_with_the_target_is_refused() {
    let up = Upstream::start();
    let p = up.port();
    let proxy = open_proxy();
    for req in [
        format!("GET http://allowed.test:{p}/hello HTTP/1.1\r\nHost: evil.test:{p}\r\n\r\n"),
        format!("GET http://allowed.test:{p}/hello HTTP/1.1\r\nHost: allowed.test\r\n\r\n"),
        format!(
            "GET http://allowed.test:{p}/hello HTTP/1.1\r\nHost: allowed.test:{p}\r\nHost: evil.test\r\n\r\n"
        ),
        format!(
            "CONNECT allowed.test:{p} HTTP/1.1\r\nHost: allowed.test:{p}\r\nHost: evil.test\r\n\r\n"
        ),
    ] {
        let resp = proxy.raw(req.as_bytes());
        assert_eq!(status_of(&resp), 400, "{req}\n{resp}");
    }
    let resp = proxy.raw(
        format!("GET http://allowed.test:{p}/hello HTTP/1.1\r\nHost: evil.test:{p}\r\n\r\n")
            .as_bytes(),
    );
    assert!(
        resp.contains("the Host header does not match the request target allowed.test:"),
        "{resp}"
    );
    let records = proxy.finish();
    assert!(
        records.iter().all(|r| r.decision == LogDecision::Error),
        "{records:#?}"
    );
    assert_eq!(up.connections(), 0);
}

#[test]
fn request_smuggling_is_refused_and_nothing_after_the_body_is_forwarded() {
    let up = Upstream::start();
    let p = up.port();
    let proxy = open_proxy();
    let cl_te = format!(
        "POST http://allowed.test:{p}/sum HTTP/1.1\r\nHost: allowed.test:{p}\r\nContent-Length: 6\r\n\
         Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: allowed.test\r\n\r\n"
    );
    let resp = proxy.raw(cl_te.as_bytes());
    assert_eq!(status_of(&resp), 400, "{resp}");
    assert!(
        resp.contains("both Content-Length and Transfer-Encoding"),
        "{resp}"
    );
    assert_eq!(up.connections(), 0);

    // A well-framed body followed by a pipelined second request: only the first is forwarded.
    for body in [
        "Content-Length: 5\r\n\r\nhelloGET /smuggled HTTP/1.1\r\nHost: evil.test\r\n\r\n".to_owned(),
        "Transfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\nT: 1\r\n\r\nGET /smuggled HTTP/1.1\r\n\r\n".to_owned(),
    ] {
        let req = format!("POST http://allowed.test:{p}/sum HTTP/1.1\r\nHost: allowed.test:{p}\r\n{body}");
        let resp = proxy.raw(req.as_bytes());
        assert_eq!(status_of(&resp), 200, "{resp}");
        assert!(resp.ends_with(&format!("len=5 sum={}", support::upstream::checksum(b"hello"))), "{resp}");
    }
    let received = up.wait_received(2);
    assert_eq!(received.len(), 2);
    for r in &received {
        assert_eq!(r.body, b"hello");
        assert!(
            r.after.is_empty(),
            "forwarded after the body: {:?}",
            String::from_utf8_lossy(&r.after)
        );
        assert!(!r.head.contains("smuggled"));
    }
    proxy.finish();
}

#[test]
fn oversized_heads_get_431() {
    let proxy = open_proxy();
    let mut req = b"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nX-Big: ".to_vec();
    req.extend(std::iter::repeat_n(b'a', 70 * 1024));
    req.extend_from_slice(b"\r\n\r\n");
    let mut s = proxy.connect();
    // The proxy answers once it has read 64 KiB; it may close before taking the rest.
    let _ = s.write_all(&req);
    let resp = read_to_end(&mut s);
    assert_eq!(status_of(&resp), 431, "{resp}");
    let many: String = (0..200).map(|i| format!("X-{i}: v\r\n")).collect();
    let resp = proxy.raw(
        format!("GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n{many}\r\n").as_bytes(),
    );
    assert_eq!(status_of(&resp), 431, "{resp}");
    let records = proxy.finish();
    assert_eq!(records.len(), 2);
    assert!(
        records
            .iter()
            .all(|r| r.decision == LogDecision::Error && r.host.is_empty())
    );
}

#[test]
fn unknown_methods_get_405_with_the_accepted_list() {
    let proxy = open_proxy();
    for method in ["TRACE", "BREW", "PROPFIND"] {
        let resp = proxy.raw(
            format!("{method} http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
                .as_bytes(),
        );
        assert_eq!(status_of(&resp), 405, "{resp}");
        assert!(
            resp.contains("Allow: CONNECT, GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS"),
            "{resp}"
        );
    }
    let records = proxy.finish();
    assert_eq!(records[0].method, "TRACE");
}

#[test]
fn bad_connect_ports_and_malformed_lines_get_400() {
    let proxy = open_proxy();
    for req in [
        "CONNECT allowed.test:https HTTP/1.1\r\n\r\n",
        "CONNECT allowed.test:65536 HTTP/1.1\r\n\r\n",
        "CONNECT allowed.test:0 HTTP/1.1\r\n\r\n",
        "CONNECT allowed.test: HTTP/1.1\r\n\r\n",
        "CONNECT allowed.test:-443 HTTP/1.1\r\n\r\n",
        "GET /relative HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
        "GET http://allowed.test/ HTTP/9.9\r\n\r\n",
        "GET http://allowed.test/\r\n\r\n",
        "\x16\x03\x01\x02\x00\x01\x00\x01\x7c\x03\x03\r\n\r\n",
        "GET http://bücher.test/ HTTP/1.1\r\nHost: bücher.test\r\n\r\n",
    ] {
        let resp = proxy.raw(req.as_bytes());
        assert_eq!(status_of(&resp), 400, "{req:?}\n{resp}");
    }
    let resp = proxy.raw("CONNECT bücher.test:443 HTTP/1.1\r\n\r\n".as_bytes());
    assert_eq!(status_of(&resp), 400, "{resp}");
    proxy.finish();
}

#[test]
fn a_head_with_bare_lf_line_ends_gets_400_at_once() {
    let up = Upstream::start();
    let p = up.port();
    // The default header timeout (30 s): an answer well before it is the parser's, not the timeout's.
    let proxy = open_proxy();
    let mut s = proxy.connect();
    let started = std::time::Instant::now();
    s.write_all(
        format!("GET http://allowed.test:{p}/hello HTTP/1.1\nHost: allowed.test:{p}\n\n")
            .as_bytes(),
    )
    .unwrap();
    // The client keeps its side open, as a real one waiting for an answer does.
    let resp = read_to_end(&mut s);
    let waited = started.elapsed();
    assert_eq!(status_of(&resp), 400, "{resp}");
    assert!(resp.contains("CRLF"), "{resp}");
    assert!(
        waited < ProxyConfig::default().header_timeout / 3,
        "the refusal took {waited:?}"
    );
    assert_eq!(up.connections(), 0, "nothing reached the upstream");
    proxy.finish();
}

fn short_timeouts() -> ProxyConfig {
    ProxyConfig {
        header_timeout: Duration::from_millis(200),
        idle_timeout: Duration::from_millis(300),
        ..ProxyConfig::default()
    }
}

#[test]
fn a_client_that_stalls_in_the_head_is_cut_off() {
    let proxy = Proxy::start_with(
        &settings(EgressPreset::DenyAll, &["allowed.test", "127.0.0.1"], &[]),
        short_timeouts(),
    );
    let mut s = proxy.connect();
    s.write_all(b"GET http://allowed.test/ HTTP/1.1\r\nHost: allo")
        .unwrap();
    // The proxy answers 408 and closes; read_to_end returning at all proves it let go.
    let resp = read_to_end(&mut s);
    assert_eq!(status_of(&resp), 408, "{resp}");
    // A client that connects and says nothing at all.
    let mut silent = proxy.connect();
    assert_eq!(status_of(&read_to_end(&mut silent)), 408);
    let records = proxy.wait_for_records(2);
    assert!(records.iter().all(|r| {
        r.reason
            .as_deref()
            .is_some_and(|x| x.contains("no complete request head"))
    }));
    proxy.finish();
}

#[test]
fn an_idle_tunnel_is_closed_and_logged() {
    let up = Upstream::start();
    let proxy = Proxy::start_with(
        &settings(EgressPreset::DenyAll, &["allowed.test", "127.0.0.1"], &[]),
        short_timeouts(),
    );
    let mut s = proxy.connect();
    s.write_all(format!("CONNECT allowed.test:{} HTTP/1.1\r\n\r\n", up.port()).as_bytes())
        .unwrap();
    let mut established = [0u8; 39];
    s.read_exact(&mut established).unwrap();
    assert_eq!(&established, b"HTTP/1.1 200 Connection established\r\n\r\n");
    // Neither side sends anything: the proxy must close the tunnel by itself.
    let rest = read_to_end(&mut s);
    assert!(rest.is_empty(), "{rest}");
    let records = proxy.wait_for_records(1);
    let r = record_for(&records, "allowed.test");
    assert_decision(r, LogDecision::Allowed);
    assert!(
        r.reason.as_deref().is_some_and(|x| x.contains("idle")),
        "{r:?}"
    );
    proxy.finish();
}

#[test]
fn shutdown_cuts_in_flight_tunnels_and_logs_them() {
    let up = Upstream::start();
    let proxy = Proxy::start_with(
        &settings(EgressPreset::DenyAll, &["allowed.test", "127.0.0.1"], &[]),
        ProxyConfig {
            shutdown_grace: Duration::from_millis(100),
            ..ProxyConfig::default()
        },
    );
    let mut s = proxy.connect();
    s.write_all(format!("CONNECT allowed.test:{} HTTP/1.1\r\n\r\n", up.port()).as_bytes())
        .unwrap();
    let mut established = [0u8; 39];
    s.read_exact(&mut established).unwrap();
    let records = proxy.finish();
    assert_eq!(read_to_end(&mut s), "", "the tunnel was closed");
    let r = record_for(&records, "allowed.test");
    assert!(
        r.reason.as_deref().is_some_and(|x| x.contains("shut down")),
        "{r:?}"
    );
}
