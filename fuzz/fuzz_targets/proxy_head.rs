//! The egress proxy's request-head reader and parser (`proxy/head.rs`): bytes from a sandboxed
//! client, read until the blank line, then parsed and rewritten for the upstream server.
//!
//! Beyond "no panic": the head ends exactly where a strict CRLF reader says (so bare-LF or lone-CR
//! heads are never accepted), refusals are 400/405/431, and a forwarded head is one a strict server
//! reads the same way: CRLF lines only, complete at its last byte, one Host naming the target,
//! `Connection: close` (or `upgrade`), no hop-by-hop or proxy headers, framing that matches.
#![no_main]

use airlock_egress::fuzzing::{self, Body, Parsed};
use airlock_egress::{ACCEPTED_METHODS, Host, ProxyConfig, parse_authority};
use airlock_fuzz::{crlf_head_end, has_hop_by_hop, values};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let end = fuzzing::head_end(data);
    assert_eq!(end, crlf_head_end(data), "head end of {data:?}");
    let Ok(Some(end)) = end else { return };
    let head = &data[..end];
    let max_headers = ProxyConfig::default().max_headers;
    let (method, parsed) = fuzzing::parse_request(head, max_headers);
    assert!(method.chars().count() <= 16, "logged method {method:?}");
    match parsed {
        Err(status) => assert!(matches!(status, 400 | 405 | 431), "status {status}"),
        Ok(Parsed::Connect { host, port }) => {
            assert!(request_line(head).starts_with(b"CONNECT "));
            assert_ne!(port, 0);
            assert_canonical(&host);
        }
        Ok(Parsed::Forward {
            method,
            host,
            port,
            upstream_head,
            body,
            upgrade,
        }) => {
            assert!(ACCEPTED_METHODS.contains(&method.as_str()) && method != "CONNECT");
            assert!(request_line(head).starts_with(format!("{method} ").as_bytes()));
            assert_ne!(port, 0);
            assert_canonical(&host);
            check_upstream(&method, &host, port, &upstream_head, body, upgrade);
        }
    }
});

/// The head from its request line: empty lines before it are ignored (RFC 9112, section 2.2).
fn request_line(mut head: &[u8]) -> &[u8] {
    while let Some(rest) = head.strip_prefix(b"\r\n") {
        head = rest;
    }
    head
}

fn assert_canonical(host: &Host) {
    assert_eq!(Host::parse(&host.to_string()).as_ref(), Ok(host));
}

fn check_upstream(method: &str, host: &Host, port: u16, up: &[u8], body: Body, upgrade: bool) {
    let shown = String::from_utf8_lossy(up);
    assert_eq!(
        crlf_head_end(up),
        Ok(Some(up.len())),
        "upstream head {shown}"
    );
    let mut headers = vec![httparse::EMPTY_HEADER; 1024];
    let mut req = httparse::Request::new(&mut headers);
    assert_eq!(
        req.parse(up),
        Ok(httparse::Status::Complete(up.len())),
        "upstream head {shown}"
    );
    assert_eq!(req.method, Some(method));
    assert!(req.path.is_some_and(|p| p.starts_with('/')), "{shown}");
    assert_eq!(req.version, Some(1), "{shown}");
    let headers = req.headers;
    assert_eq!(has_hop_by_hop(headers), None, "{shown}");

    let hosts = values(headers, "host");
    assert_eq!(hosts.len(), 1, "{shown}");
    let value = std::str::from_utf8(hosts[0]).expect("Host is UTF-8");
    let (h, p) = parse_authority(value.trim(), Some(0)).expect("Host parses");
    assert_eq!(&h, host, "{shown}");
    assert!(p == port || (p == 0 && port == 80), "{shown}");

    let connection = values(headers, "connection");
    let expected: &[u8] = if upgrade { b"upgrade" } else { b"close" };
    assert_eq!(connection, [expected], "{shown}");
    assert_eq!(
        values(headers, "upgrade").len(),
        usize::from(upgrade),
        "{shown}"
    );
    if upgrade {
        assert_eq!(body, Body::None);
    }

    let te = values(headers, "transfer-encoding");
    let lengths: Vec<u64> = values(headers, "content-length")
        .iter()
        .map(|v| {
            let text = std::str::from_utf8(v).expect("Content-Length is UTF-8");
            text.trim().parse().expect("Content-Length is a number")
        })
        .collect();
    match body {
        Body::Chunked => {
            assert_eq!(te, [&b"chunked"[..]], "{shown}");
            assert!(lengths.is_empty(), "{shown}");
        }
        Body::Length(n) => {
            assert!(te.is_empty(), "{shown}");
            assert!(
                !lengths.is_empty() && lengths.iter().all(|&l| l == n),
                "{shown}"
            );
        }
        Body::None => {
            assert!(te.is_empty(), "{shown}");
            assert!(lengths.iter().all(|&l| l == 0), "{shown}");
        }
    }
}
