use super::*;
use proptest::prelude::*;

fn parse(head: &str) -> Result<Request, Refusal> {
    parse_request(head.as_bytes(), 128, &mut Seen::default())
}

fn status(head: &str) -> u16 {
    parse(head).expect_err(head).status
}

fn forward(head: &str) -> Forward {
    match parse(head).expect(head) {
        Request::Forward(f) => f,
        other => panic!("{other:?}"),
    }
}

#[test]
fn connect_targets() {
    assert_eq!(
        parse("CONNECT API.github.com.:443 HTTP/1.1\r\nHost: api.github.com:443\r\n\r\n").unwrap(),
        Request::Connect {
            host: Host::Name("api.github.com".into()),
            port: 443
        }
    );
    assert!(parse("CONNECT [::1]:8443 HTTP/1.1\r\n\r\n").is_ok());
    assert_eq!(
        parse("CONNECT github.com HTTP/1.1\r\n\r\n")
            .unwrap()
            .host_port()
            .1,
        443
    );
    for bad in [
        "github.com:https",
        "github.com:0",
        "github.com:70000",
        "github.com:-1",
        "/:443",
        "user:secret@github.com:443",
    ] {
        assert_eq!(
            status(&format!("CONNECT {bad} HTTP/1.1\r\n\r\n")),
            400,
            "{bad}"
        );
    }
    // The Host of a CONNECT is not used (Node's http.request sends the proxy's address there);
    // two of them are still refused.
    assert!(parse("CONNECT a.com:443 HTTP/1.1\r\nHost: 127.0.0.1:3128\r\n\r\n").is_ok());
    assert_eq!(
        status("CONNECT a.com:443 HTTP/1.1\r\nHost: a.com:443\r\nHost: b.com\r\n\r\n"),
        400
    );
}

#[test]
fn credentials_in_targets_never_reach_the_reason() {
    for req in [
        "CONNECT user:secret@github.com:443 HTTP/1.1\r\n\r\n",
        "GET http://user:secret@github.com/ HTTP/1.1\r\nHost: github.com\r\n\r\n",
    ] {
        let refusal = parse(req).unwrap_err();
        assert_eq!(refusal.status, 400);
        assert!(!refusal.reason.contains("secret"), "{}", refusal.reason);
    }
}

#[test]
fn absolute_targets_and_host_agreement() {
    let f = forward("GET http://Example.com:8080/p?q=1 HTTP/1.1\r\nHost: example.com:8080\r\n\r\n");
    assert_eq!((f.host.to_string(), f.port), ("example.com".into(), 8080));
    let head = String::from_utf8(f.upstream_head).unwrap();
    assert!(
        head.starts_with("GET /p?q=1 HTTP/1.1\r\nHost: example.com:8080\r\n"),
        "{head}"
    );
    let f = forward("GET http://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n");
    assert!(f.upstream_head.starts_with(b"GET / HTTP/1.1\r\n"));
    let f = forward("GET http://example.com?x HTTP/1.0\r\n\r\n");
    assert!(
        f.upstream_head
            .starts_with(b"GET /?x HTTP/1.1\r\nHost: example.com\r\n")
    );

    for bad in [
        "GET http://a.com/ HTTP/1.1\r\nHost: b.com\r\n\r\n",
        "GET http://a.com/ HTTP/1.1\r\nHost: a.com:81\r\n\r\n",
        "GET http://a.com:81/ HTTP/1.1\r\nHost: a.com\r\n\r\n",
        "GET http://a.com/ HTTP/1.1\r\nHost: a.com\r\nHost: a.com\r\n\r\n",
        "GET http://a.com/ HTTP/1.1\r\n\r\n",
        "GET /relative HTTP/1.1\r\nHost: a.com\r\n\r\n",
        "GET https://a.com/ HTTP/1.1\r\nHost: a.com\r\n\r\n",
        "GET http://user:pw@a.com/ HTTP/1.1\r\nHost: a.com\r\n\r\n",
        "GET ftp://a.com/ HTTP/1.1\r\nHost: a.com\r\n\r\n",
    ] {
        assert_eq!(status(bad), 400, "{bad}");
    }
}

#[test]
fn smuggling_patterns_are_refused() {
    for bad in [
        "POST http://a.com/ HTTP/1.1\r\nHost: a.com\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST http://a.com/ HTTP/1.1\r\nHost: a.com\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
        "POST http://a.com/ HTTP/1.1\r\nHost: a.com\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        "POST http://a.com/ HTTP/1.1\r\nHost: a.com\r\nContent-Length: -5\r\n\r\n",
        "POST http://a.com/ HTTP/1.1\r\nHost: a.com\r\nContent-Length: 5, 5\r\n\r\n",
        "POST http://a.com/ HTTP/1.1\r\nHost: a.com\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        "POST http://a.com/ HTTP/1.1\r\nHost: a.com\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST http://a.com/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
    ] {
        assert_eq!(status(bad), 400, "{bad}");
    }
    let f =
        forward("POST http://a.com/ HTTP/1.1\r\nHost: a.com\r\ntransfer-encoding: Chunked\r\n\r\n");
    assert_eq!(f.framing, Framing::Chunked);
    let f = forward(
        "POST http://a.com/ HTTP/1.1\r\nHost: a.com\r\nContent-Length: 12\r\nContent-Length: 12\r\n\r\n",
    );
    assert_eq!(f.framing, Framing::Length(12));
}

#[test]
fn hop_by_hop_and_proxy_headers_are_removed() {
    let f = forward(
        "POST http://a.com/ HTTP/1.1\r\nHost: a.com\r\nProxy-Authorization: Basic c2VjcmV0\r\n\
         Proxy-Connection: keep-alive\r\nConnection: keep-alive, X-Secret, Content-Length\r\nX-Secret: 1\r\n\
         Keep-Alive: 5\r\nTE: trailers\r\nX-Kept: yes\r\nContent-Length: 3\r\n\r\n",
    );
    let head = String::from_utf8(f.upstream_head).unwrap();
    assert_eq!(
        head,
        "POST / HTTP/1.1\r\nHost: a.com\r\nX-Kept: yes\r\nContent-Length: 3\r\nConnection: close\r\n\r\n"
    );
    assert!(!f.upgrade);
}

#[test]
fn websocket_upgrade_is_kept() {
    let f = forward(
        "GET http://a.com/ws HTTP/1.1\r\nHost: a.com\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Key: x\r\n\r\n",
    );
    assert!(f.upgrade);
    let head = String::from_utf8(f.upstream_head).unwrap();
    assert!(
        head.ends_with("Sec-WebSocket-Key: x\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n"),
        "{head}"
    );
    // With a body it is a plain request: no switch after a body the proxy frames.
    let f = forward(
        "POST http://a.com/ HTTP/1.1\r\nHost: a.com\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\
         Content-Length: 2\r\n\r\n",
    );
    assert!(!f.upgrade);
    let head = String::from_utf8(f.upstream_head).unwrap();
    assert!(
        head.ends_with("Content-Length: 2\r\nConnection: close\r\n\r\n") && !head.contains("h2c"),
        "{head}"
    );
}

#[test]
fn methods_and_malformed_lines() {
    assert_eq!(
        status("TRACE http://a.com/ HTTP/1.1\r\nHost: a.com\r\n\r\n"),
        405
    );
    assert_eq!(
        status("BREW http://a.com/ HTTP/1.1\r\nHost: a.com\r\n\r\n"),
        405
    );
    for bad in [
        "GET\r\n\r\n",
        "GET  http://a.com/ HTTP/1.1\r\n\r\n",
        "GET http://a.com/ HTTP/2.0\r\n\r\n",
        "\r\n\r\n",
        "GET http://a.com/ HTTP/1.1\r\nBad Header: x\r\n\r\n",
    ] {
        assert_eq!(status(bad), 400, "{bad:?}");
    }
    let many: String = (0..200).map(|i| format!("X-{i}: v\r\n")).collect();
    assert_eq!(
        status(&format!(
            "GET http://a.com/ HTTP/1.1\r\nHost: a.com\r\n{many}\r\n"
        )),
        431
    );
}

#[tokio::test]
async fn read_head_caps_the_size_and_keeps_what_follows() {
    let mut big = b"GET http://a.com/ HTTP/1.1\r\nX: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 70_000));
    let err = read_head(&mut &big[..], 64 * 1024, Duration::from_secs(5))
        .await
        .unwrap_err();
    assert_eq!(err.status, 431);
    let input = b"CONNECT a.com:443 HTTP/1.1\r\n\r\n\x16\x03\x01";
    let (buf, end) = read_head(&mut &input[..], 1024, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(&buf[end..], b"\x16\x03\x01");
    let err = read_head(&mut &b"GET http://a"[..], 1024, Duration::from_secs(5))
        .await
        .unwrap_err();
    assert_eq!(err.status, 0);
}

#[tokio::test]
async fn bare_line_ends_are_refused_without_waiting_for_more() {
    // The reader never ends: a refusal must come from the bytes alone, not from EOF or the timeout.
    async fn refusal(head: &[u8]) -> Refusal {
        let (mut client, mut server) = tokio::io::duplex(4096);
        tokio::io::AsyncWriteExt::write_all(&mut client, head)
            .await
            .unwrap();
        let read = read_head(&mut server, 1024, Duration::from_secs(3600));
        tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .expect("refused at once, not at the header timeout")
            .unwrap_err()
    }
    for head in [
        &b"GET http://a.com/ HTTP/1.1\nHost: a.com\n\n"[..],
        b"GET http://a.com/ HTTP/1.1\r\nHost: a.com\n\r\n",
        b"GET http://a.com/ HTTP/1.1\r\nHost: a.com\r\n\n",
        b"\n",
        b"CONNECT a.com:443 HTTP/1.1\rHost: a.com\r\n\r\n",
        b"GET http://a.com/ HTTP/1.1\r\nX: a\rb\r\n\r\n",
    ] {
        let r = refusal(head).await;
        assert_eq!(r.status, 400, "{:?}", String::from_utf8_lossy(head));
        assert!(r.reason.contains("CRLF"), "{}", r.reason);
    }
    // CRLF heads pass; a bare LF in the body after them is the body's business.
    let input = b"POST http://a.com/ HTTP/1.1\r\nHost: a.com\r\nContent-Length: 3\r\n\r\na\nb";
    let (buf, end) = read_head(&mut &input[..], 1024, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(&buf[end..], b"a\nb");
    // A CR at the end of what has arrived so far may be followed by its LF in the next read.
    assert!(matches!(head_end(b"GET / HTTP/1.1\r"), Ok(None)));
    assert!(matches!(head_end(b"GET / HTTP/1.1\r\n\r"), Ok(None)));
}

proptest! {
    #[test]
    fn parsing_arbitrary_heads_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = parse_request(&bytes, 16, &mut Seen::default());
    }

    #[test]
    fn parsing_mutated_requests_never_panics(
        method in "(GET|CONNECT|POST|[A-Z]{1,7})",
        target in "[ -~]{0,40}",
        headers in proptest::collection::vec(("[A-Za-z-]{1,16}", "[ -~]{0,30}"), 0..8),
    ) {
        let mut head = format!("{method} {target} HTTP/1.1\r\n");
        for (name, value) in &headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        if let Ok(Request::Forward(f)) = parse(&head) {
            // Whatever was accepted is forwarded with exactly one framing and never a proxy header.
            let out = String::from_utf8(f.upstream_head).unwrap().to_ascii_lowercase();
            prop_assert!(!out.contains("\r\nproxy-"));
            prop_assert!(!(out.contains("\r\ncontent-length:") && out.contains("\r\ntransfer-encoding:")));
            prop_assert!(out.ends_with("\r\n\r\n"));
        }
    }
}
