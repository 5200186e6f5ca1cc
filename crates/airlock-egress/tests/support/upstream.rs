//! A loopback HTTP/1.1 server standing in for the internet. It records every request head, body
//! and any bytes after the body, so tests can check what the proxy forwarded (and what it did not).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;

/// What reached the server on one connection.
#[derive(Debug, Clone, Default)]
pub struct Received {
    pub head: String,
    pub body: Vec<u8>,
    /// Bytes the server read after the request body (must stay empty: nothing is smuggled).
    pub after: Vec<u8>,
    /// For `/ws-held`: bytes that had arrived after the head when the server sent its 101.
    pub before_switch: Vec<u8>,
}

#[derive(Default)]
struct Shared {
    received: Mutex<Vec<Received>>,
    connections: Mutex<usize>,
    heads: Mutex<usize>,
    released: Mutex<bool>,
    release: Condvar,
}

pub struct Upstream {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Upstream {
    pub fn start() -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind upstream");
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                *s.connections.lock().unwrap() += 1;
                let s = s.clone();
                thread::spawn(move || serve(stream, &s));
            }
        });
        Upstream { addr, shared }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Every request served so far, with what followed it.
    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().unwrap().clone()
    }

    /// Waits until `n` requests are fully recorded (a record is complete when the proxy has closed
    /// the connection).
    pub fn wait_received(&self, n: usize) -> Vec<Received> {
        let start = std::time::Instant::now();
        loop {
            let received = self.received();
            if received.len() >= n {
                return received;
            }
            assert!(
                start.elapsed() < super::DEADLINE,
                "only {} requests arrived",
                received.len()
            );
            thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    pub fn connections(&self) -> usize {
        *self.shared.connections.lock().unwrap()
    }

    /// Waits until `n` request heads have been read (their records may still be incomplete).
    pub fn wait_heads(&self, n: usize) {
        let start = std::time::Instant::now();
        while *self.shared.heads.lock().unwrap() < n {
            assert!(start.elapsed() < super::DEADLINE, "no request head arrived");
            thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Lets `/sse` send its second event, and `/ws-held` its 101.
    pub fn release(&self) {
        *self.shared.released.lock().unwrap() = true;
        self.shared.release.notify_all();
    }
}

fn serve(stream: TcpStream, shared: &Shared) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    *shared.heads.lock().unwrap() += 1;
    let lower = head.to_ascii_lowercase();
    let header = |name: &str| {
        lower.lines().find_map(|l| {
            l.strip_prefix(&format!("{name}: "))
                .map(|v| v.trim().to_owned())
        })
    };
    if header("expect").as_deref() == Some("100-continue") {
        out.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").unwrap();
    }
    let body = if let Some(n) = header("content-length") {
        let mut body = vec![0; n.parse().unwrap()];
        reader.read_exact(&mut body).unwrap();
        body
    } else if header("transfer-encoding").as_deref() == Some("chunked") {
        read_chunked(&mut reader)
    } else {
        Vec::new()
    };
    let target = head.split(' ').nth(1).unwrap_or("");
    let path = target.split('?').next().unwrap_or("").to_owned();
    let mut record = Received {
        head: head.clone(),
        body: body.clone(),
        after: Vec::new(),
        before_switch: Vec::new(),
    };
    if header("upgrade").is_some() && path == "/ws-refuse" {
        // A server that will not switch: a complete response, then whatever follows it is recorded.
        let _ = out.write_all(
            b"HTTP/1.1 426 Upgrade Required\r\nUpgrade: websocket\r\nContent-Length: 0\r\n\r\n",
        );
        let _ = out.shutdown(std::net::Shutdown::Write);
        let _ = reader.read_to_end(&mut record.after);
        shared.received.lock().unwrap().push(record);
        return;
    }
    if header("upgrade").is_some() {
        if path == "/ws-held" {
            let mut released = shared.released.lock().unwrap();
            while !*released {
                released = shared.release.wait(released).unwrap();
            }
            drop(released);
            record.before_switch = reader.buffer().to_vec();
            let mut more = [0u8; 4096];
            let socket = reader.get_ref();
            socket.set_nonblocking(true).unwrap();
            if let Ok(n) = socket.peek(&mut more) {
                record.before_switch.extend_from_slice(&more[..n]);
            }
            socket.set_nonblocking(false).unwrap();
        }
        out.write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
            .unwrap();
        shared.received.lock().unwrap().push(record);
        let mut buf = [0; 4096];
        // Echo until the client goes away.
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 || out.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        return;
    }
    respond(&path, &head, &body, &mut out, shared);
    let _ = out.shutdown(std::net::Shutdown::Write);
    let _ = reader.read_to_end(&mut record.after);
    shared.received.lock().unwrap().push(record);
}

fn respond(path: &str, head: &str, body: &[u8], out: &mut TcpStream, shared: &Shared) {
    let simple = |out: &mut TcpStream, text: &[u8]| {
        let _ = out.write_all(
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                text.len()
            )
            .as_bytes(),
        );
        let _ = out.write_all(text);
    };
    if path == "/garbage" {
        let _ = out.write_all(b"SSH-2.0-OpenSSH_9.2\r\n\r\n");
    } else if path == "/keep-alive" {
        let _ = out.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\nok");
    } else if path == "/hello" {
        simple(out, b"hello from upstream");
    } else if path == "/echo-head" {
        simple(out, head.as_bytes());
    } else if path == "/sum" {
        simple(
            out,
            format!("len={} sum={}", body.len(), checksum(body)).as_bytes(),
        );
    } else if let Some(n) = path.strip_prefix("/big/") {
        let n: usize = n.parse().unwrap();
        let _ = out.write_all(format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\n\r\n").as_bytes());
        let data = pattern(n);
        let _ = out.write_all(&data);
    } else if path == "/sse" {
        let _ = out.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n");
        let _ = out.write_all(b"b\r\ndata: one\n\n\r\n");
        let mut released = shared.released.lock().unwrap();
        while !*released {
            released = shared.release.wait(released).unwrap();
        }
        let _ = out.write_all(b"b\r\ndata: two\n\n\r\n0\r\n\r\n");
    } else {
        let _ = out.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
    }
}

fn read_chunked(reader: &mut impl BufRead) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let size = usize::from_str_radix(line.trim_end(), 16).unwrap();
        let mut chunk = vec![0; size + 2];
        reader.read_exact(&mut chunk).unwrap();
        if size == 0 {
            return body;
        }
        body.extend_from_slice(&chunk[..size]);
    }
}

/// Deterministic bytes that reveal any reordering, loss or duplication.
pub fn pattern(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i % 251) as u8 ^ (i / 251 % 256) as u8)
        .collect()
}

pub fn checksum(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}
