//! Streams: chunked answers, upgrades to a two-way copy, clients that stall or never read.

use std::io::{ErrorKind, Read, Write};
use std::net::Shutdown;
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::engine::{read_all, read_head, start, start_with, status_and_body};

const START: &[u8] = b"POST /v1.47/exec/abc/start HTTP/1.1\r\nHost: api.moby.localhost\r\n\
    Content-Type: application/json\r\nContent-Length: 27\r\nConnection: Upgrade\r\n\
    Upgrade: tcp\r\n\r\n{\"Detach\":false,\"Tty\":true}";

fn read_exact(c: &mut impl Read, n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    c.read_exact(&mut buf).unwrap();
    buf
}

#[test]
fn a_chunked_stream_is_relayed_as_it_comes_until_the_engine_closes() {
    let h = start(|s, _| {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(50));
            let _ = s.write_all(b"5\r\nhello\r\n");
        }
        let _ = s.write_all(b"0\r\n\r\n");
    });
    let mut c = h.connect();
    c.write_all(b"GET /containers/c/logs?follow=1 HTTP/1.1\r\n\r\n")
        .unwrap();
    let head = read_head(&mut c);
    assert_eq!(
        head,
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    );
    // The first chunk arrives before the engine has written the rest.
    assert_eq!(read_exact(&mut c, 10), b"5\r\nhello\r\n");
    assert_eq!(read_all(&mut c), b"5\r\nhello\r\n5\r\nhello\r\n0\r\n\r\n");
    assert_eq!(h.log(), ["GET allow forwarded"]);
}

#[test]
fn a_client_that_hangs_up_ends_a_quiet_stream() {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let h = start(move |s, _| {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n");
        // Quiet like `/events`; the filter closes this connection once the client is gone.
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let closed = matches!(s.read(&mut [0u8; 1]), Ok(0));
        tx.lock().unwrap().send(closed).unwrap();
    });
    let mut c = h.connect();
    c.write_all(b"GET /events HTTP/1.1\r\n\r\n").unwrap();
    assert!(read_head(&mut c).starts_with("HTTP/1.1 200 OK\r\n"));
    let hung_up = Instant::now();
    drop(c);
    assert!(
        rx.recv_timeout(Duration::from_secs(3)).unwrap(),
        "engine side closed"
    );
    assert!(hung_up.elapsed() < Duration::from_secs(2));
}

#[test]
fn an_upgrade_holds_early_bytes_until_the_101_then_copies_both_ways() {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let h = start(move |s, got| {
        // Nothing of the stream came with the request, nor after it, before the 101.
        std::thread::sleep(Duration::from_millis(200));
        s.set_nonblocking(true).unwrap();
        let early = !got.extra.is_empty()
            || !matches!(s.read(&mut [0u8; 16]), Err(e) if e.kind() == ErrorKind::WouldBlock);
        s.set_nonblocking(false).unwrap();
        tx.lock().unwrap().send(early).unwrap();
        s.write_all(
            b"HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\n\
              Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n",
        )
        .unwrap();
        let mut buf = [0u8; 1024];
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => s.write_all(&buf[..n]).unwrap(),
            }
        }
        // The client's half-close came through; the engine still has output.
        s.write_all(b"bye").unwrap();
    });
    let mut c = h.connect();
    let mut first = START.to_vec();
    first.extend_from_slice(b"early");
    c.write_all(&first).unwrap();
    let head = read_head(&mut c);
    assert!(head.starts_with("HTTP/1.1 101 UPGRADED\r\n"), "{head}");
    assert!(
        head.contains("\r\nUpgrade: tcp\r\n"),
        "the 101 is relayed as it is"
    );
    assert!(
        !rx.recv().unwrap(),
        "the engine saw no early bytes before its 101"
    );
    assert_eq!(read_exact(&mut c, 5), b"early");
    c.write_all(b"more").unwrap();
    assert_eq!(read_exact(&mut c, 4), b"more");
    c.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_all(&mut c), b"bye");
    let got = &h.engine.requests()[0];
    assert_eq!(
        got.head,
        "POST /v1.47/exec/abc/start HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\n\
         Content-Length: 27\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n"
    );
    assert_eq!(got.body, b"{\"Detach\":false,\"Tty\":true}");
    assert_eq!(h.log(), ["POST allow forwarded, upgraded"]);
}

#[test]
fn an_upgrade_the_engine_refuses_drops_the_early_bytes_and_ends_with_the_answer() {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let h = start(move |s, got| {
        s.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}")
            .unwrap();
        // Keeps the connection open (it was asked to upgrade, not to close).
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let more = got.extra.len() + s.read(&mut [0u8; 16]).unwrap_or(0);
        tx.lock().unwrap().send(more).unwrap();
    });
    let mut first = START.to_vec();
    first.extend_from_slice(b"early");
    let begun = Instant::now();
    let answer = h.exchange(&first);
    assert!(
        begun.elapsed() < Duration::from_secs(2),
        "the answer's length ends it"
    );
    assert_eq!(
        answer,
        b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
    );
    assert_eq!(rx.recv().unwrap(), 0);
}

#[test]
fn stalled_and_unread_connections_do_not_stop_others() {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let h = start_with(super::READ_ONLY, Duration::from_secs(2), move |s, got| {
        if got.head.starts_with("GET /events") {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\n\r\n");
            let chunk = vec![b'e'; 64 << 10];
            let began = Instant::now();
            while s.write_all(&chunk).is_ok() && began.elapsed() < Duration::from_secs(10) {}
            tx.lock().unwrap().send(began.elapsed()).unwrap();
        } else {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
        }
    });
    // A head that never completes, and a stream the client never reads.
    let mut stalled = h.connect();
    stalled.write_all(b"GET /info HTTP/1.1\r\n").unwrap();
    let mut unread = h.connect();
    unread.write_all(b"GET /events HTTP/1.1\r\n\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    for _ in 0..3 {
        let begun = Instant::now();
        let answer = h.exchange(b"GET /info HTTP/1.1\r\n\r\n");
        assert_eq!(status_and_body(&answer), (200, "{}".to_owned()));
        assert!(begun.elapsed() < Duration::from_secs(1));
    }
    // The unread stream ends at the client's write timeout: the engine's writes then fail.
    let streamed = rx.recv_timeout(Duration::from_secs(9)).unwrap();
    assert!(streamed < Duration::from_secs(8), "{streamed:?}");
    drop((stalled, unread));
}
