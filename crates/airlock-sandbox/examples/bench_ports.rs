//! Throughput of an inbound port forward beside direct loopback. Run with `scripts/bench-ports`
//! (release build), which uses two modes:
//!
//! - `bench_ports serve PORT`: an HTTP server on 127.0.0.1:PORT answering `GET /big/<bytes>` with
//!   that many bytes; prints `ready`, runs until stdin ends. The script starts one on the host and
//!   one inside `airlock run --publish`.
//! - `bench_ports client PORT SIZE_MIB`: one download of SIZE_MIB MiB from 127.0.0.1:PORT;
//!   prints `<GiB/s>`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

/// What the server writes per call.
const CHUNK: usize = 1 << 20;
/// The client's read size: curl's (100 KiB).
const READ_BYTES: usize = 100 * 1024;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize| -> u64 {
        args.get(i)
            .and_then(|a| a.parse().ok())
            .expect("usage: bench_ports serve PORT | client PORT SIZE_MIB")
    };
    match args.first().map(String::as_str) {
        Some("serve") => serve(num(1) as u16),
        Some("client") => client(num(1) as u16, num(2)),
        _ => panic!("usage: bench_ports serve PORT | client PORT SIZE_MIB"),
    }
}

fn serve(port: u16) {
    let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || answer(stream));
        }
    });
    println!("ready");
    std::io::stdout().flush().expect("stdout");
    let mut line = String::new();
    while std::io::stdin().lock().read_line(&mut line).unwrap_or(0) > 0 {}
}

fn answer(stream: TcpStream) {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let bytes: u64 = line
        .split(' ')
        .nth(1)
        .and_then(|p| p.strip_prefix("/big/"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) <= 2 {
            break;
        }
    }
    let mut stream = reader.into_inner();
    let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {bytes}\r\nConnection: close\r\n\r\n");
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    let chunk = vec![0u8; CHUNK];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(CHUNK as u64) as usize;
        if stream.write_all(&chunk[..n]).is_err() {
            return;
        }
        left -= n as u64;
    }
}

fn client(port: u16, size_mib: u64) {
    let bytes = size_mib << 20;
    let start = Instant::now();
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    write!(s, "GET /big/{bytes} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").expect("send");
    let mut buf = vec![0u8; READ_BYTES];
    let mut total = 0u64;
    loop {
        let n = s.read(&mut buf).expect("read");
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    let secs = start.elapsed().as_secs_f64();
    assert!(total >= bytes, "short download: {total} of {bytes} bytes");
    println!("{:.3}", bytes as f64 / secs / f64::from(1 << 30));
}
