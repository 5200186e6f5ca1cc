//! Throughput and latency through the egress proxy beside the same requests made directly, against
//! a local HTTP server. Run with `scripts/bench-egress` (release build).
//!
//! Usage: bench_egress [--size-mib N] [--requests N]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use airlock_config::{EgressPreset, EgressRule, EgressSettings};
use airlock_egress::{EgressPolicy, spawn};

const CHUNK: usize = 1024 * 1024;

fn main() {
    let mut size_mib: u64 = 1024;
    let mut requests: usize = 1000;
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).and_then(|v| v.parse().ok());
        match (pair[0].as_str(), value) {
            ("--size-mib", Some(v)) => size_mib = v,
            ("--requests", Some(v)) => requests = v as usize,
            _ => panic!("usage: bench_egress [--size-mib N] [--requests N]"),
        }
    }
    let server = start_server();
    let dir = std::env::temp_dir().join(format!("airlock-bench-egress-{}", std::process::id()));
    let settings = EgressSettings {
        preset: EgressPreset::DenyAll,
        allow: ["bench.test", "127.0.0.1"]
            .iter()
            .map(|r| EgressRule {
                rule: (*r).into(),
                origin: "bench".into(),
            })
            .collect(),
        resolve: [("bench.test".to_owned(), server.ip())].into(),
        ..EgressSettings::default()
    };
    let policy = EgressPolicy::from_settings(&settings, &[], &[]).expect("policy");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
    let proxy = spawn(listener, policy, dir.join("network.jsonl")).expect("proxy");
    let via = proxy.local_addr();
    let port = server.port();
    let bytes = size_mib * CHUNK as u64;

    if let Ok(only) = std::env::var("BENCH_ONLY") {
        // Diagnostics: one path's download alone, e.g. to watch its CPU use with `time`.
        let how = match only.as_str() {
            "direct" => Path::Direct,
            "plain" => Path::Plain,
            _ => Path::Connect,
        };
        let to = if only == "direct" { server } else { via };
        let d = download(to, how, port, bytes);
        println!(
            "{only}: {:.2} GiB/s",
            bytes as f64 / d.as_secs_f64() / f64::from(1 << 30)
        );
        return;
    }
    println!("download of {size_mib} MiB (best of 3):");
    let direct = best_of(3, || download(server, Path::Direct, port, bytes));
    let plain = best_of(3, || download(via, Path::Plain, port, bytes));
    let tunnel = best_of(3, || download(via, Path::Connect, port, bytes));
    let rate = |d: Duration| bytes as f64 / d.as_secs_f64() / (1024.0 * 1024.0 * 1024.0);
    println!("  direct            {:6.2} GiB/s", rate(direct));
    for (name, d) in [("proxy, plain HTTP", plain), ("proxy, CONNECT", tunnel)] {
        println!(
            "  {name:<17} {:6.2} GiB/s  ({:.0}% of direct)",
            rate(d),
            100.0 * direct.as_secs_f64() / d.as_secs_f64()
        );
    }

    println!(
        "{requests} small requests, one connection each (latency of connect + request + full response):"
    );
    let direct = latencies(requests, || small(server, Path::Direct, port));
    let plain = latencies(requests, || small(via, Path::Plain, port));
    let tunnel = latencies(requests, || small(via, Path::Connect, port));
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    for (name, l) in [
        ("direct", &direct),
        ("proxy, plain HTTP", &plain),
        ("proxy, CONNECT", &tunnel),
    ] {
        println!(
            "  {name:<17} p50 {:7.1} µs  p90 {:7.1} µs  p99 {:7.1} µs  added p50 {:+7.1} µs",
            us(pct(l, 50)),
            us(pct(l, 90)),
            us(pct(l, 99)),
            us(pct(l, 50)) - us(pct(&direct, 50))
        );
    }
    proxy.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[derive(Clone, Copy)]
enum Path {
    Direct,
    Plain,
    Connect,
}

/// Opens a connection and sends `GET <path>` the way `how` says; returns the stream.
fn request(to: SocketAddr, how: Path, port: u16, path: &str) -> TcpStream {
    let mut s = TcpStream::connect(to).expect("connect");
    s.set_nodelay(true).unwrap();
    match how {
        Path::Direct => write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"),
        Path::Plain => write!(
            s,
            "GET http://bench.test:{port}{path} HTTP/1.1\r\nHost: bench.test:{port}\r\n\r\n"
        ),
        Path::Connect => {
            write!(s, "CONNECT bench.test:{port} HTTP/1.1\r\n\r\n").unwrap();
            let mut ok = [0u8; 39];
            s.read_exact(&mut ok).expect("CONNECT answer");
            assert!(ok.starts_with(b"HTTP/1.1 200"), "CONNECT refused");
            write!(s, "GET {path} HTTP/1.1\r\nHost: bench.test:{port}\r\n\r\n")
        }
    }
    .expect("send");
    s
}

fn download(to: SocketAddr, how: Path, port: u16, bytes: u64) -> Duration {
    let start = Instant::now();
    let mut s = request(to, how, port, &format!("/big/{bytes}"));
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        let n = s.read(&mut buf).expect("read");
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    assert!(total > bytes, "short download: {total}");
    start.elapsed()
}

fn small(to: SocketAddr, how: Path, port: u16) {
    let mut s = request(to, how, port, "/small");
    let mut out = Vec::with_capacity(256);
    s.read_to_end(&mut out).expect("read");
    assert!(out.ends_with(b"ok"), "bad response");
}

fn best_of(n: usize, mut f: impl FnMut() -> Duration) -> Duration {
    (0..n).map(|_| f()).min().expect("n > 0")
}

fn latencies(n: usize, mut f: impl FnMut()) -> Vec<Duration> {
    for _ in 0..n / 10 {
        f(); // warm up
    }
    let mut all: Vec<Duration> = (0..n)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    all.sort();
    all
}

fn pct(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

/// A minimal HTTP/1.1 server: `/big/N` streams N bytes, `/small` answers "ok"; one request per
/// connection, a thread per connection.
fn start_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind server");
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || serve(stream));
        }
    });
    addr
}

fn serve(mut s: TcpStream) {
    let _ = s.set_nodelay(true);
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let line = String::from_utf8_lossy(&head);
    let path = line.split(' ').nth(1).unwrap_or("");
    if let Some(n) = path.strip_prefix("/big/") {
        let n: u64 = n.parse().unwrap_or(0);
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\nContent-Length: {n}\r\nConnection: close\r\n\r\n"
        );
        let chunk = vec![0x5au8; CHUNK];
        let mut left = n;
        while left > 0 {
            let take = left.min(CHUNK as u64) as usize;
            if s.write_all(&chunk[..take]).is_err() {
                return;
            }
            left -= take as u64;
        }
    } else {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
    }
}
