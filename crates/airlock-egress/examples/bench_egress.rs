//! Throughput and latency through the egress proxy beside the same requests made directly.
//! Run with `scripts/bench-egress` (release build), which uses three modes:
//!
//! - `bench_egress serve`: a local HTTP server on 127.0.0.1; prints its port, runs until stdin ends.
//! - `bench_egress client --port P [--size-mib N] [--requests N]`: downloads and small requests
//!   against that server. Without `HTTP_PROXY` in the environment they go direct; with it (inside
//!   `airlock run`), through that proxy twice: as plain `http://` requests and through `CONNECT`.
//!   Prints `download <path> <GiB/s>` and `latency <path> <p50> <p90> <p99>` (µs) lines; a size or
//!   a count of 0 skips that part.
//! - `bench_egress [--size-mib N] [--requests N]`: the proxy alone, in this process on the host's
//!   loopback (no sandbox), beside direct requests: the component figure.

use std::io::{BufRead, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use airlock_config::{EgressPreset, EgressRule, EgressSettings};
use airlock_egress::{EgressPolicy, spawn};

const CHUNK: usize = 1024 * 1024;
/// The client's read size: curl's (100 KiB). On loopback a larger one is slower, not faster: the
/// copy out of the socket no longer fits the CPU's cache.
const READ_BYTES: usize = 100 * 1024;
/// The name the client asks the proxy for; the sandbox's config resolves it to 127.0.0.1.
const NAME: &str = "bench.test";

struct Args {
    port: u16,
    size_mib: u64,
    requests: usize,
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mode = match args.first().map(String::as_str) {
        Some("serve" | "client") => args.remove(0),
        _ => "in-process".to_owned(),
    };
    let mut opts = Args {
        port: 0,
        size_mib: 1024,
        requests: 1000,
    };
    for pair in args.chunks(2) {
        let value = pair.get(1).and_then(|v| v.parse::<u64>().ok());
        match (pair[0].as_str(), value) {
            ("--port", Some(v)) => opts.port = v as u16,
            ("--size-mib", Some(v)) => opts.size_mib = v,
            ("--requests", Some(v)) => opts.requests = v as usize,
            _ => panic!(
                "usage: bench_egress [serve | client --port P] [--size-mib N] [--requests N]"
            ),
        }
    }
    match mode.as_str() {
        "serve" => serve_until_stdin_ends(),
        "client" => client(&opts),
        _ => in_process(&opts),
    }
}

fn serve_until_stdin_ends() {
    let server = start_server();
    println!("{}", server.port());
    std::io::stdout().flush().expect("stdout");
    let mut line = String::new();
    while std::io::stdin().lock().read_line(&mut line).unwrap_or(0) > 0 {}
}

/// Direct without `HTTP_PROXY`, through it (plain and CONNECT) with it.
fn client(opts: &Args) {
    let server = SocketAddr::from(([127, 0, 0, 1], opts.port));
    let proxy = std::env::var("HTTP_PROXY").ok().map(|p| {
        let hostport = p.trim_start_matches("http://").trim_end_matches('/');
        hostport
            .parse::<SocketAddr>()
            .unwrap_or_else(|_| panic!("HTTP_PROXY={p}: not http://IP:PORT"))
    });
    let paths: Vec<(&str, SocketAddr, Path)> = match proxy {
        None => vec![("direct", server, Path::Direct)],
        Some(via) => vec![("plain", via, Path::Plain), ("connect", via, Path::Connect)],
    };
    let bytes = opts.size_mib * CHUNK as u64;
    for (name, to, how) in paths.iter().filter(|_| bytes > 0) {
        let d = download(*to, *how, opts.port, bytes);
        println!("download {name} {:.3}", gib_per_s(bytes, d));
    }
    if opts.requests > 0 {
        for (name, to, how) in &paths {
            let l = latencies(opts.requests, || small(*to, *how, opts.port));
            let us = |p| pct(&l, p).as_secs_f64() * 1e6;
            println!("latency {name} {:.1} {:.1} {:.1}", us(50), us(90), us(99));
        }
    }
}

/// The proxy in this process on the host's loopback, beside direct requests.
fn in_process(opts: &Args) {
    let server = start_server();
    let dir = std::env::temp_dir().join(format!("airlock-bench-egress-{}", std::process::id()));
    let settings = EgressSettings {
        preset: EgressPreset::DenyAll,
        allow: [NAME, "127.0.0.1"]
            .iter()
            .map(|r| EgressRule {
                rule: (*r).into(),
                origin: "bench".into(),
            })
            .collect(),
        resolve: [(NAME.to_owned(), server.ip())].into(),
        ..EgressSettings::default()
    };
    let policy = EgressPolicy::from_settings(&settings, &[], &[]).expect("policy");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
    let proxy = spawn(listener, policy, dir.join("network.jsonl")).expect("proxy");
    let via = proxy.local_addr();
    let port = server.port();
    let bytes = opts.size_mib * CHUNK as u64;

    println!("download of {} MiB (best of 3):", opts.size_mib);
    let direct = best_of(3, || download(server, Path::Direct, port, bytes));
    let plain = best_of(3, || download(via, Path::Plain, port, bytes));
    let tunnel = best_of(3, || download(via, Path::Connect, port, bytes));
    println!("  direct            {:6.2} GiB/s", gib_per_s(bytes, direct));
    for (name, d) in [("proxy, plain HTTP", plain), ("proxy, CONNECT", tunnel)] {
        println!(
            "  {name:<17} {:6.2} GiB/s  ({:.0}% of direct)",
            gib_per_s(bytes, d),
            100.0 * direct.as_secs_f64() / d.as_secs_f64()
        );
    }

    println!(
        "{} small requests, one connection each (latency of connect + request + full response):",
        opts.requests
    );
    let direct = latencies(opts.requests, || small(server, Path::Direct, port));
    let plain = latencies(opts.requests, || small(via, Path::Plain, port));
    let tunnel = latencies(opts.requests, || small(via, Path::Connect, port));
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

fn gib_per_s(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / f64::from(1 << 30)
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
            "GET http://{NAME}:{port}{path} HTTP/1.1\r\nHost: {NAME}:{port}\r\n\r\n"
        ),
        Path::Connect => {
            write!(s, "CONNECT {NAME}:{port} HTTP/1.1\r\n\r\n").unwrap();
            let mut ok = [0u8; 39];
            s.read_exact(&mut ok).expect("CONNECT answer");
            assert!(ok.starts_with(b"HTTP/1.1 200"), "CONNECT refused");
            write!(s, "GET {path} HTTP/1.1\r\nHost: {NAME}:{port}\r\n\r\n")
        }
    }
    .expect("send");
    s
}

fn download(to: SocketAddr, how: Path, port: u16, bytes: u64) -> Duration {
    let start = Instant::now();
    let mut s = request(to, how, port, &format!("/big/{bytes}"));
    let mut buf = vec![0u8; READ_BYTES];
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
