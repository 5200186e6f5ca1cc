//! Heads: parsing the client's strictly, rebuilding it, rewriting the engine's.

use super::super::http::{denial_response, head_end, parse_request, parse_response, upstream_head};
use super::super::{Denial, Forward};

fn parse(head: &str) -> Result<super::super::http::RequestHead, Denial> {
    parse_request(head.as_bytes()).map_err(|(_, d)| d)
}

#[test]
fn a_head_ends_at_its_blank_line_and_a_bare_lf_is_refused() {
    assert_eq!(
        head_end(b"GET / HTTP/1.1\r\nA: b\r\n\r\nbody\n"),
        Ok(Some(24))
    );
    assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n"), Ok(None));
    for bare in [
        &b"GET / HTTP/1.1\nA: b\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nA: b\n\n",
        b"\n",
    ] {
        assert_eq!(head_end(bare).unwrap_err().status, 400);
    }
}

#[test]
fn framing_that_another_parser_could_read_differently_is_refused() {
    let cases = [
        (
            "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            501,
        ),
        (
            "POST /x HTTP/1.1\r\nTransfer-Encoding: identity\r\n\r\n",
            501,
        ),
        (
            "POST /x HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n",
            400,
        ),
        (
            "POST /x HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n",
            400,
        ),
        ("POST /x HTTP/1.1\r\nContent-Length: +2\r\n\r\n", 400),
        ("POST /x HTTP/1.1\r\nContent-Length: 2, 2\r\n\r\n", 400),
        ("POST /x HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n", 400),
        ("POST /x HTTP/1.1\r\nContent-Length: 65537\r\n\r\n", 413),
        (
            "POST /x HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
            400,
        ),
        ("POST /x HTTP/1.1\r\nContent-Length : 2\r\n\r\n", 400),
        ("POST /x HTTP/1.1\r\nA: b\r\n c\r\n\r\n", 400),
        ("POST  /x HTTP/1.1\r\n\r\n", 400),
        ("POST /x HTTP/2.0\r\n\r\n", 400),
        ("POST /x\r\n\r\n", 400),
        ("GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
        (
            "GET /x HTTP/1.1\r\nContent-Type: a\r\ncontent-type: b\r\n\r\n",
            400,
        ),
        ("GET /x HTTP/1.1\r\nUser-Agent: \x7f\r\n\r\n", 400),
        ("POST /x HTTP/1.1\r\nExpect: something\r\n\r\n", 417),
    ];
    for (head, status) in cases {
        assert_eq!(
            parse(head).map(|_| ()).unwrap_err().status,
            status,
            "{head:?}"
        );
    }
    let many: String = (0..101).map(|i| format!("X-{i}: v\r\n")).collect();
    let head = format!("GET /info HTTP/1.1\r\n{many}\r\n");
    let (method, d) = parse_request(head.as_bytes()).unwrap_err();
    assert_eq!((method, d.status), (None, 431));
}

#[test]
fn the_engine_gets_a_rebuilt_head_and_nothing_smuggled() {
    let head = parse(
        "POST /v1.47/exec/abc/start HTTP/1.1\r\nHost: api.moby.localhost\r\n\
         User-Agent: Docker-Client/27.0\r\nContent-Type: application/json\r\n\
         Content-Length: 2\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\
         X-Registry-Auth: c2VjcmV0\r\nAuthorization: Basic c2VjcmV0\r\n\
         X-Docker-Expose-Session-Uuid: x\r\nCookie: a=b\r\nAccept-Encoding: gzip\r\n\
         Expect: 100-continue\r\nKeep-Alive: 5\r\n\r\n",
    )
    .unwrap();
    assert!(head.wants_upgrade && head.expect_continue);
    let forward = Forward {
        path_and_query: "/v1.47/exec/abc/start".into(),
        upgrade_allowed: true,
    };
    let up = String::from_utf8(upstream_head(&head, &forward, true)).unwrap();
    assert_eq!(
        up,
        "POST /v1.47/exec/abc/start HTTP/1.1\r\nHost: docker\r\n\
         User-Agent: Docker-Client/27.0\r\nContent-Type: application/json\r\n\
         Content-Length: 2\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n"
    );
    let up = String::from_utf8(upstream_head(&head, &forward, false)).unwrap();
    assert!(
        up.ends_with("Content-Length: 2\r\nConnection: close\r\n\r\n"),
        "{up}"
    );
    assert!(!up.contains("Upgrade: tcp"));
    // Upgrade asked with another protocol, or without `Connection: Upgrade`, is no upgrade.
    for h in [
        "GET /x HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
        "GET /x HTTP/1.1\r\nUpgrade: tcp\r\n\r\n",
    ] {
        assert!(!parse(h).unwrap().wants_upgrade, "{h}");
    }
    assert!(
        parse("GET /x HTTP/1.1\r\nConnection: keep-alive, upgrade\r\nUpgrade: TCP\r\n\r\n")
            .unwrap()
            .wants_upgrade
    );
}

#[test]
fn the_engines_head_is_relayed_with_connection_close() {
    let raw = b"HTTP/1.1 200 OK\r\nApi-Version: 1.47\r\nConnection: keep-alive\r\n\
                Keep-Alive: timeout=5\r\nContent-Length: 4\r\n\r\nOK\r\n";
    let r = parse_response(raw).unwrap().unwrap();
    assert_eq!(
        (r.status, r.content_length, &raw[r.len..]),
        (200, Some(4), &b"OK\r\n"[..])
    );
    assert_eq!(
        String::from_utf8(r.relayed).unwrap(),
        "HTTP/1.1 200 OK\r\nApi-Version: 1.47\r\nContent-Length: 4\r\nConnection: close\r\n\r\n"
    );
    let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n";
    assert_eq!(
        parse_response(chunked).unwrap().unwrap().content_length,
        None
    );
    assert_eq!(parse_response(b"HTTP/1.1 200 OK\r\nA: b\r\n"), Ok(None));
    assert!(parse_response(b"HTTP/1.1 2000 OK\r\n\r\n").is_err());
    assert!(parse_response(b"garbage\r\n\r\n").is_err());
    let two = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\n";
    assert!(parse_response(two).is_err());
    let endless = format!("HTTP/1.1 200 OK\r\nA: {}", "b".repeat(70_000));
    assert!(parse_response(endless.as_bytes()).is_err());
}

#[test]
fn a_denial_quotes_the_request_only_to_the_client_and_escaped() {
    let d = Denial::new(403, super::super::NOT_ALLOWED);
    let out =
        String::from_utf8(denial_response("GET", "/%63ontainers/x/archive?path=/", d)).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{head}");
    assert!(head.contains(&format!("Content-Length: {}", body.len())));
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(
        v["message"],
        "airlock: GET /containers/x/archive is not allowed (read-only Docker access)"
    );
    let quote = denial_response("GET", "/a%22b\\c", d);
    let body = String::from_utf8(quote).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(body.split_once("\r\n\r\n").unwrap().1).unwrap();
    assert_eq!(
        v["message"],
        "airlock: GET /a\"b\\c is not allowed (read-only Docker access)"
    );
    let priv_ = Denial::new(403, "exec with Privileged is refused");
    let body = String::from_utf8(denial_response("POST", "/containers/c/exec", priv_)).unwrap();
    assert!(body.ends_with(
        r#"{"message":"airlock: POST /containers/c/exec is not allowed (read-only Docker access: exec with Privileged is refused)"}"#
    ));
    let bad = String::from_utf8(denial_response("GET", "/a/../b", Denial::new(400, "x"))).unwrap();
    assert!(
        bad.ends_with(r#"{"message":"airlock: x"}"#) && !bad.contains("/a/"),
        "{bad}"
    );
    // HEAD gets the head only.
    let head = String::from_utf8(denial_response("HEAD", "/x", d)).unwrap();
    assert!(head.ends_with("\r\n\r\n"));
}
