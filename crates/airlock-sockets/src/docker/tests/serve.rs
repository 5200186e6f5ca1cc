//! The filter on a socket, one request and one answer: what the engine gets, what the client
//! gets, what is logged.

use std::io::Write;
use std::time::Duration;

use super::engine::{Harness, canned, read_all, read_head, start, start_with, status_and_body};

const OK: &[u8] = b"HTTP/1.1 200 OK\r\nApi-Version: 1.47\r\nContent-Type: application/json\r\n\
                    Connection: keep-alive\r\nKeep-Alive: timeout=5\r\nContent-Length: 2\r\n\r\n[]";

fn refused(h: &Harness, request: &[u8]) -> (u16, String) {
    status_and_body(&h.exchange(request))
}

#[test]
fn an_allowed_get_reaches_the_engine_rebuilt_and_its_answer_is_relayed() {
    let h = start(canned(OK));
    let answer = h.exchange(
        b"GET /v1.47/%63ontainers/json?all=1 HTTP/1.1\r\nHost: api.moby.localhost\r\n\
          User-Agent: Docker-Client/27.0 (linux)\r\nAccept: */*\r\nX-Registry-Auth: c2VjcmV0\r\n\
          Authorization: Bearer secret\r\nConnection: keep-alive\r\nUpgrade: tcp\r\n\r\n",
    );
    assert_eq!(
        String::from_utf8(answer).unwrap(),
        "HTTP/1.1 200 OK\r\nApi-Version: 1.47\r\nContent-Type: application/json\r\n\
         Content-Length: 2\r\nConnection: close\r\n\r\n[]"
    );
    let got = h.engine.requests();
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0].head,
        "GET /v1.47/containers/json?all=1 HTTP/1.1\r\nHost: docker\r\n\
         User-Agent: Docker-Client/27.0 (linux)\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    );
    assert_eq!(h.log(), ["GET allow forwarded"]);
}

#[test]
fn a_head_request_gets_the_head_only() {
    let h = start(canned(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"));
    let answer = h.exchange(b"HEAD /_ping HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(
        answer,
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n"
    );
    assert!(
        h.engine.requests()[0]
            .head
            .starts_with("HEAD /_ping HTTP/1.1\r\n")
    );
}

#[test]
fn a_denied_request_never_reaches_the_engine_and_the_log_never_quotes_it() {
    let h = start(canned(OK));
    let (status, body) = refused(
        &h,
        b"GET /containers/SECRET/archive?path=/etc HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert_eq!(status, 403);
    assert_eq!(
        body,
        r#"{"message":"airlock: GET /containers/SECRET/archive is not allowed (read-only Docker access)"}"#
    );
    let (status, body) = refused(&h, b"HEAD /images/x/get HTTP/1.1\r\n\r\n");
    assert_eq!((status, body.as_str()), (403, ""));
    let (status, _) = refused(&h, b"DELETE /containers/SECRET HTTP/1.1\r\n\r\n");
    assert_eq!(status, 403);
    let (status, _) = refused(
        &h,
        b"GET /containers/SECRET/../../images/x/get HTTP/1.1\r\n\r\n",
    );
    assert_eq!(status, 400);
    assert_eq!(h.engine.accepted(), 0);
    let log = h.log();
    assert_eq!(
        log,
        [
            "GET deny not in the read-only allowlist",
            "HEAD deny not in the read-only allowlist",
            "DELETE deny not in the read-only allowlist",
            "GET deny a dot segment is refused",
        ]
    );
}

#[test]
fn exec_bodies_are_checked_at_the_socket() {
    let h = start(canned(
        b"HTTP/1.1 201 Created\r\nContent-Length: 9\r\n\r\n{\"Id\":1}\n",
    ));
    let exec = |body: &str, ct: &str| {
        format!(
            "POST /containers/web/exec HTTP/1.1\r\nHost: x\r\nContent-Type: {ct}\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    let (status, body) = refused(
        &h,
        exec(r#"{"Cmd":["sh"],"Privileged":true}"#, "application/json").as_bytes(),
    );
    assert_eq!(status, 403);
    assert!(body.contains("exec with Privileged is refused"), "{body}");
    let (status, _) = refused(&h, exec(r#"{"User":"0"}"#, "application/json").as_bytes());
    assert_eq!(status, 403);
    let (status, _) = refused(&h, exec(r#"{"Cmd":["sh"]}"#, "text/plain").as_bytes());
    assert_eq!(status, 415);
    assert_eq!(h.engine.accepted(), 0);
    let ok = r#"{"Cmd":["ls"],"User":"node"}"#;
    let answer = h.exchange(exec(ok, "application/json; charset=utf-8").as_bytes());
    assert_eq!(status_and_body(&answer), (201, "{\"Id\":1}\n".to_owned()));
    let got = &h.engine.requests()[0];
    assert_eq!(got.body, ok.as_bytes());
    assert!(
        got.head
            .contains("\r\nContent-Type: application/json; charset=utf-8\r\n")
    );
    assert!(
        got.head
            .contains(&format!("\r\nContent-Length: {}\r\n", ok.len()))
    );
    assert_eq!(
        h.log(),
        [
            "POST deny exec with Privileged is refused",
            "POST deny exec as root is refused ([tools.docker] allow_root_exec)",
            "POST deny a body that is not JSON is refused",
            "POST allow forwarded",
        ]
    );
}

#[test]
fn expect_100_continue_is_answered_before_the_body() {
    let h = start(canned(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"));
    let mut c = h.connect();
    c.write_all(
        b"POST /containers/web/exec HTTP/1.1\r\nContent-Type: application/json\r\n\
          Content-Length: 2\r\nExpect: 100-continue\r\n\r\n",
    )
    .unwrap();
    assert_eq!(read_head(&mut c), "HTTP/1.1 100 Continue\r\n\r\n");
    c.write_all(b"{}").unwrap();
    assert_eq!(status_and_body(&read_all(&mut c)).0, 201);
    assert!(!h.engine.requests()[0].head.contains("Expect"));
}

#[test]
fn heads_too_large_or_framed_ambiguously_are_refused_before_the_engine() {
    let h = start(canned(OK));
    let many: String = (0..10_000).map(|_| "a:b\r\n").collect();
    let cases: Vec<(Vec<u8>, &[u16])> = vec![
        (format!("GET /info HTTP/1.1\r\n{many}\r\n").into_bytes(), &[431]),
        (format!("GET /info HTTP/1.1\r\nA: {}\r\n\r\n", "b".repeat(1 << 20)).into_bytes(), &[431]),
        (format!("GET /info?{} HTTP/1.1\r\n\r\n", "a".repeat(64 << 10)).into_bytes(), &[414, 431]),
        (format!("GET /info?{} HTTP/1.1\r\n\r\n", "a".repeat(10 << 10)).into_bytes(), &[414]),
        (b"POST /exec/e/start HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n".to_vec(), &[501]),
        (b"POST /exec/e/start HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec(), &[501]),
        (b"POST /exec/e/start HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 40\r\n\r\n{}".to_vec(), &[400]),
        (b"POST /exec/e/start HTTP/1.1\r\nContent-Length: x\r\n\r\n{}".to_vec(), &[400]),
        (b"POST /exec/e/start HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n".to_vec(), &[413]),
        (b"GET /info HTTP/1.1\nHost: x\n\n".to_vec(), &[400]),
        (b"GET /info HTTP/1.1\r\nHost: x\n\r\n".to_vec(), &[400]),
        (b"GET http://docker/info HTTP/1.1\r\n\r\n".to_vec(), &[400]),
        (b"OPTIONS * HTTP/1.1\r\n\r\n".to_vec(), &[400, 403]),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n".to_vec(), &[400]),
    ];
    for (request, statuses) in cases {
        let (status, body) = refused(&h, &request);
        let shown = String::from_utf8_lossy(&request[..request.len().min(60)]).into_owned();
        assert!(statuses.contains(&status), "{shown:?}: {status} {body}");
        assert!(
            !body.contains("aaaa"),
            "the answer does not echo the request"
        );
    }
    assert_eq!(h.engine.accepted(), 0);
    let log = h.log();
    assert!(
        log.iter().all(|l| !l.contains("info") && l.len() < 80),
        "{log:?}"
    );
    assert_eq!(log.len(), 14, "{log:?}");
}

#[test]
fn pipelined_requests_are_refused() {
    let h = start(canned(OK));
    let two = b"GET /info HTTP/1.1\r\n\r\nGET /version HTTP/1.1\r\n\r\n";
    assert_eq!(refused(&h, two).0, 400);
    let after_body = b"POST /exec/e/resize?h=1&w=1 HTTP/1.1\r\nContent-Length: 0\r\n\r\nDELETE /containers/x HTTP/1.1\r\n\r\n";
    assert_eq!(refused(&h, after_body).0, 400);
    // Asking for an upgrade where none is allowed does not make early bytes acceptable.
    let fake =
        b"GET /info HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\nGET /x HTTP/1.1\r\n\r\n";
    assert_eq!(refused(&h, fake).0, 400);
    assert_eq!(h.engine.accepted(), 0);
    assert_eq!(
        h.log(),
        [
            "GET deny pipelined requests are refused",
            "POST deny pipelined requests are refused",
            "GET deny pipelined requests are refused"
        ]
    );
}

#[test]
fn an_unreachable_or_misbehaving_engine_is_a_502() {
    let h = start(canned(OK));
    std::fs::remove_file(&h.engine.path).unwrap();
    let (status, body) = status_and_body(&h.exchange(b"GET /info HTTP/1.1\r\n\r\n"));
    assert_eq!(
        (status, body.as_str()),
        (502, r#"{"message":"airlock: engine unreachable"}"#)
    );
    assert_eq!(h.log(), ["GET allow engine unreachable"]);

    for (script, reason) in [
        (&b"garbage\r\n\r\n"[..], "engine response malformed"),
        (b"", "engine closed without answering"),
        (
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: tcp\r\n\r\n",
            "engine switched protocols unasked",
        ),
        (
            b"HTTP/1.1 100 Continue\r\n\r\n",
            "engine sent an informational answer",
        ),
    ] {
        let h = start(canned(script));
        let (status, _) = status_and_body(&h.exchange(b"GET /containers/json HTTP/1.1\r\n\r\n"));
        assert_eq!(status, 502, "{reason}");
        assert_eq!(h.log(), [format!("GET allow {reason}")]);
    }
}

#[test]
fn an_engine_that_disappears_mid_response_leaves_the_client_what_it_sent() {
    let h = start(canned(
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789",
    ));
    let answer = h.exchange(b"GET /containers/c/logs HTTP/1.1\r\n\r\n");
    assert_eq!(
        answer,
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\n0123456789"
    );
}

#[test]
fn a_head_that_never_completes_is_closed_with_a_log_line() {
    let h = start_with(super::READ_ONLY, Duration::from_millis(300), canned(OK));
    let mut c = h.connect();
    // A byte at a time, each within the per-read timeout: the deadline is for the whole head.
    for b in b"GET /info HTTP/1.1\r\nHost" {
        if c.write_all(&[*b]).is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(40));
    }
    assert_eq!(read_all(&mut c), b"");
    assert_eq!(h.log(), ["- deny no request head in time"]);
    // A connection that sends nothing and closes is no request.
    drop(h.connect());
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(h.log().len(), 1);
    assert_eq!(h.engine.accepted(), 0);
}
