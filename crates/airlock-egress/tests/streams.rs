//! What flows through an allowed request: TLS end to end, large bodies both ways, long-lived
//! responses, websocket upgrades, and the headers the upstream sees.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use airlock_config::EgressPreset;
use airlock_egress::LogDecision;
use support::upstream::{Upstream, checksum, pattern};
use support::*;

fn open_proxy() -> Proxy {
    Proxy::start(&settings(
        EgressPreset::DenyAll,
        &["allowed.test", "127.0.0.1"],
        &[],
    ))
}

/// `openssl s_server -www` on a free loopback port with a self-signed cert for allowed.test.
struct TlsServer {
    child: Child,
    port: u16,
}

impl TlsServer {
    fn start(openssl: &Path, dir: &Path) -> TlsServer {
        let (key, cert) = (dir.join("key.pem"), dir.join("cert.pem"));
        let made = Command::new(openssl)
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-days",
                "1",
            ])
            .args([
                "-subj",
                "/CN=allowed.test",
                "-addext",
                "subjectAltName=DNS:allowed.test",
            ])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(made.success(), "openssl req failed");
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(openssl)
            .args(["s_server", "-quiet", "-www", "-accept"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("-cert")
            .arg(&cert)
            .arg("-key")
            .arg(&key)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(start.elapsed() < DEADLINE, "openssl s_server did not start");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        TlsServer { child, port }
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn connect_carries_tls_end_to_end() {
    let (Some(curl), Some(openssl)) = (tool("curl"), tool("openssl")) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = TlsServer::start(&openssl, dir.path());
    let proxy = open_proxy();
    let out = Command::new(curl)
        .args(["-sS", "--max-time", "30", "--proxy"])
        .arg(format!("http://{}", proxy.addr))
        .arg("--cacert")
        .arg(dir.path().join("cert.pem"))
        .arg(format!("https://allowed.test:{}/", server.port))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // s_server -www answers with a page describing the TLS session: the handshake was end to end.
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(page.contains("s_server"), "{page}");
    let records = proxy.finish();
    let r = record_for(&records, "allowed.test");
    assert_decision(r, LogDecision::Allowed);
    assert_eq!((r.method.as_str(), r.port), ("CONNECT", server.port));
    assert!(r.bytes_up > 100 && r.bytes_down > 500, "{r:?}");
}

#[test]
fn large_bodies_stream_intact_both_ways() {
    let up = Upstream::start();
    let p = up.port();
    let proxy = open_proxy();
    let n = 24 * 1024 * 1024 + 17; // far beyond any buffer in the proxy
    let data = pattern(n);

    let mut s = proxy.connect();
    s.write_all(format!("POST http://allowed.test:{p}/sum HTTP/1.1\r\nHost: allowed.test:{p}\r\nContent-Length: {n}\r\n\r\n").as_bytes())
        .unwrap();
    s.write_all(&data).unwrap();
    let resp = read_to_end(&mut s);
    assert!(
        resp.ends_with(&format!("len={n} sum={}", checksum(&data))),
        "{resp}"
    );

    // The same body chunked, in uneven chunks.
    let mut s = proxy.connect();
    s.write_all(format!("PUT http://allowed.test:{p}/sum HTTP/1.1\r\nHost: allowed.test:{p}\r\nTransfer-Encoding: chunked\r\n\r\n").as_bytes())
        .unwrap();
    for part in data.chunks(1_000_003) {
        s.write_all(format!("{:x}\r\n", part.len()).as_bytes())
            .unwrap();
        s.write_all(part).unwrap();
        s.write_all(b"\r\n").unwrap();
    }
    s.write_all(b"0\r\n\r\n").unwrap();
    let resp = read_to_end(&mut s);
    assert!(
        resp.ends_with(&format!("len={n} sum={}", checksum(&data))),
        "{resp}"
    );

    // Download.
    let mut s = proxy.connect();
    s.write_all(
        format!("GET http://allowed.test:{p}/big/{n} HTTP/1.1\r\nHost: allowed.test:{p}\r\n\r\n")
            .as_bytes(),
    )
    .unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let body_at = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert!(
        all[body_at..] == data[..],
        "download corrupted ({} bytes)",
        all.len() - body_at
    );

    let records = proxy.finish();
    assert_eq!(records.len(), 3);
    // bytes_up counts what the client sent after the head: the chunked framing too.
    assert_eq!(records[0].bytes_up, n as u64, "{records:#?}");
    assert!(records[1].bytes_up > n as u64, "{records:#?}");
    assert_eq!(records[2].bytes_down, all.len() as u64);
}

#[test]
fn a_long_lived_chunked_response_streams_event_by_event() {
    let up = Upstream::start();
    let p = up.port();
    let proxy = open_proxy();
    let s = proxy.connect();
    (&s).write_all(
        format!("GET http://allowed.test:{p}/sse HTTP/1.1\r\nHost: allowed.test:{p}\r\n\r\n")
            .as_bytes(),
    )
    .unwrap();
    let mut reader = BufReader::new(&s);
    let mut seen = String::new();
    // The first event arrives while the server is still holding the second back.
    while !seen.contains("data: one") {
        let mut line = String::new();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "closed early: {seen}"
        );
        seen.push_str(&line);
    }
    assert!(!seen.contains("data: two"));
    up.release();
    let mut rest = String::new();
    reader.read_to_string(&mut rest).unwrap();
    assert!(
        rest.contains("data: two") && rest.ends_with("0\r\n\r\n"),
        "{rest}"
    );
    proxy.finish();
}

#[test]
fn websocket_upgrade_relays_both_ways() {
    let up = Upstream::start();
    let p = up.port();
    let proxy = open_proxy();
    let mut s = proxy.connect();
    s.write_all(
        format!(
            "GET http://allowed.test:{p}/ws HTTP/1.1\r\nHost: allowed.test:{p}\r\nConnection: Upgrade\r\n\
             Upgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        .as_bytes(),
    )
    .unwrap();
    let mut reader = BufReader::new(s.try_clone().unwrap());
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    assert!(status.starts_with("HTTP/1.1 101"), "{status}");
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" {
            break;
        }
    }
    for msg in ["ping 1", "ping 2 after the first echo"] {
        s.write_all(msg.as_bytes()).unwrap();
        let mut echo = vec![0; msg.len()];
        reader.read_exact(&mut echo).unwrap();
        assert_eq!(echo, msg.as_bytes());
    }
    drop(reader);
    drop(s);
    let records = proxy.wait_for_records(1);
    assert_eq!(records[0].decision, LogDecision::Allowed);
    let head = &up.wait_received(1)[0].head;
    assert!(
        head.contains("Upgrade: websocket") && head.contains("Connection: upgrade"),
        "{head}"
    );
    proxy.finish();
}

fn upgrade_head(p: u16, path: &str) -> String {
    format!(
        "GET http://allowed.test:{p}{path} HTTP/1.1\r\nHost: allowed.test:{p}\r\nConnection: Upgrade\r\n\
         Upgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
}

#[test]
fn a_refused_upgrade_forwards_nothing_the_client_sent_after_the_head() {
    let up = Upstream::start();
    let p = up.port();
    let proxy = open_proxy();
    let mut s = proxy.connect();
    // A second request riding behind the upgrade: forwarded, it would reach the server unchecked.
    let smuggled = "GET /admin HTTP/1.1\r\nHost: evil.test\r\n\r\n";
    s.write_all(format!("{}{smuggled}", upgrade_head(p, "/ws-refuse")).as_bytes())
        .unwrap();
    let resp = read_to_end(&mut s);
    assert_eq!(status_of(&resp), 426, "{resp}");
    assert!(resp.contains("Connection: close"), "{resp}");
    let received = up.wait_received(1);
    assert!(
        received[0].after.is_empty(),
        "forwarded after the head: {:?}",
        String::from_utf8_lossy(&received[0].after)
    );
    assert_eq!(proxy.finish()[0].bytes_up, 0);
}

#[test]
fn bytes_sent_before_the_101_wait_for_it() {
    let up = Upstream::start();
    let p = up.port();
    let proxy = open_proxy();
    let mut s = proxy.connect();
    // Sent with the head, before any answer: only a server that agreed to switch may see them.
    s.write_all(format!("{}early", upgrade_head(p, "/ws-held")).as_bytes())
        .unwrap();
    up.wait_heads(1);
    up.release();
    let mut reader = BufReader::new(s.try_clone().unwrap());
    let mut head = String::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        head.push_str(&line);
        if line == "\r\n" || line.is_empty() {
            break;
        }
    }
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert!(
        head.contains("Upgrade: websocket\r\n") && head.contains("Connection: upgrade\r\n"),
        "{head}"
    );
    // The server recorded what had arrived before it sent the 101.
    let received = up.wait_received(1);
    assert!(
        received[0].before_switch.is_empty(),
        "forwarded before the 101: {:?}",
        String::from_utf8_lossy(&received[0].before_switch)
    );
    // After the 101 the early bytes go through, then the connection is a raw pipe.
    let mut echo = [0u8; 5];
    reader.read_exact(&mut echo).unwrap();
    assert_eq!(&echo, b"early");
    s.write_all(b"later").unwrap();
    reader.read_exact(&mut echo).unwrap();
    assert_eq!(&echo, b"later");
    drop((reader, s));
    proxy.finish();
}

#[test]
fn upstream_sees_origin_form_and_no_proxy_headers() {
    let up = Upstream::start();
    let p = up.port();
    let proxy = open_proxy();
    let resp = proxy.raw(
        format!(
            "GET http://allowed.test:{p}/echo-head HTTP/1.1\r\nHost: allowed.test:{p}\r\nUser-Agent: t\r\n\
             Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive, X-Hop\r\n\
             X-Hop: 1\r\nKeep-Alive: timeout=5\r\n\r\n"
        )
        .as_bytes(),
    );
    assert_eq!(status_of(&resp), 200, "{resp}");
    let head = &up.wait_received(1)[0].head;
    assert_eq!(
        head,
        &format!(
            "GET /echo-head HTTP/1.1\r\nHost: allowed.test:{p}\r\nUser-Agent: t\r\nConnection: close\r\n\r\n"
        )
    );
    proxy.finish();
}

#[test]
fn response_heads_are_rewritten_and_interim_responses_pass() {
    let up = Upstream::start();
    let p = up.port();
    let proxy = open_proxy();
    let resp = proxy.raw(
        format!(
            "GET http://allowed.test:{p}/keep-alive HTTP/1.1\r\nHost: allowed.test:{p}\r\n\r\n"
        )
        .as_bytes(),
    );
    assert_eq!(
        resp,
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
    );

    // Expect: 100-continue: the client waits for the interim response before it sends the body.
    let s = proxy.connect();
    (&s).write_all(
        format!(
            "POST http://allowed.test:{p}/sum HTTP/1.1\r\nHost: allowed.test:{p}\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"
        )
        .as_bytes(),
    )
    .unwrap();
    let mut reader = BufReader::new(&s);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert_eq!(line, "HTTP/1.1 100 Continue\r\n");
    (&s).write_all(b"hello").unwrap();
    let mut rest = String::new();
    reader.read_to_string(&mut rest).unwrap();
    assert!(
        rest.ends_with(&format!("len=5 sum={}", checksum(b"hello"))),
        "{rest}"
    );
    proxy.finish();
}

#[test]
fn an_upstream_that_is_not_http_gets_the_client_a_502() {
    let up = Upstream::start();
    let p = up.port();
    let proxy = open_proxy();
    let resp = proxy.raw(
        format!("GET http://allowed.test:{p}/garbage HTTP/1.1\r\nHost: allowed.test:{p}\r\n\r\n")
            .as_bytes(),
    );
    assert_eq!(status_of(&resp), 502, "{resp}");
    assert!(resp.contains("an invalid response head"), "{resp}");
    let records = proxy.finish();
    assert!(
        records[0]
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("invalid response head")),
        "{records:?}"
    );
}
