//! A fake engine (a Unix listener that records each request and answers from a script) and
//! the filter served in front of it by the crate's accept loop.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::super::{DockerFilter, DockerPolicy};
use crate::DecisionLog;

/// What the engine read of one request: its head and body (by `Content-Length`), and any
/// bytes that came with them.
#[derive(Debug, Clone, Default)]
pub struct Got {
    pub head: String,
    pub body: Vec<u8>,
    pub extra: Vec<u8>,
}

type Script = dyn Fn(&mut UnixStream, &Got) + Send + Sync;

pub struct Engine {
    pub path: PathBuf,
    pub got: Arc<Mutex<Vec<Got>>>,
    pub accepted: Arc<AtomicUsize>,
}

impl Engine {
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    pub fn requests(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }
}

fn read_request(stream: &mut UnixStream) -> Option<Got> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8(buf[..end].to_vec()).ok()?;
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .map_or(0, |v| v.trim().parse().unwrap());
    while buf.len() < end + length {
        let n = stream.read(&mut chunk).ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    }
    Some(Got {
        head,
        body: buf[end..end + length].to_vec(),
        extra: buf[end + length..].to_vec(),
    })
}

/// An engine on `path`, answering every connection with `script` after recording its request.
pub fn engine(
    path: PathBuf,
    script: impl Fn(&mut UnixStream, &Got) + Send + Sync + 'static,
) -> Engine {
    let listener = UnixListener::bind(&path).unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let accepted = Arc::new(AtomicUsize::new(0));
    let script: Arc<Script> = Arc::new(script);
    let (g, a) = (got.clone(), accepted.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            a.fetch_add(1, Ordering::SeqCst);
            let (g, script) = (g.clone(), script.clone());
            std::thread::spawn(move || {
                if let Some(request) = read_request(&mut stream) {
                    g.lock().unwrap().push(request.clone());
                    script(&mut stream, &request);
                }
            });
        }
    });
    Engine {
        path,
        got,
        accepted,
    }
}

/// Answers with a canned response, then closes.
pub fn canned(response: &'static [u8]) -> impl Fn(&mut UnixStream, &Got) + Send + Sync {
    move |s, _| {
        let _ = s.write_all(response);
    }
}

/// The filter on its socket in front of an engine.
pub struct Harness {
    pub dir: tempfile::TempDir,
    pub engine: Engine,
    pub socket: PathBuf,
}

pub fn start_with(
    policy: DockerPolicy,
    deadline: Duration,
    script: impl Fn(&mut UnixStream, &Got) + Send + Sync + 'static,
) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path().join("engine.sock"), script);
    let socket = dir.path().join("docker.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let filter = DockerFilter {
        policy,
        host: engine.path.clone(),
    };
    let log = Arc::new(DecisionLog::open(dir.path(), "docker"));
    crate::serve(listener, Arc::new(filter), log, deadline).unwrap();
    Harness {
        dir,
        engine,
        socket,
    }
}

pub fn start(script: impl Fn(&mut UnixStream, &Got) + Send + Sync + 'static) -> Harness {
    start_with(super::READ_ONLY, Duration::from_secs(5), script)
}

impl Harness {
    pub fn connect(&self) -> UnixStream {
        let c = UnixStream::connect(&self.socket).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c
    }

    /// Sends `request` (from a thread: the filter may stop reading early) and reads the whole
    /// answer, until the filter closes.
    pub fn exchange(&self, request: &[u8]) -> Vec<u8> {
        let mut c = self.connect();
        let mut w = c.try_clone().unwrap();
        let request = request.to_vec();
        let writer = std::thread::spawn(move || {
            let _ = w.write_all(&request);
        });
        let back = read_all(&mut c);
        let _ = writer.join();
        back
    }

    /// The decision log's lines, without their timestamps.
    pub fn log(&self) -> Vec<String> {
        let text = std::fs::read_to_string(self.dir.path().join("logs/internal/docker.log"))
            .unwrap_or_default();
        text.lines()
            .map(|l| l.split_once(' ').unwrap().1.to_owned())
            .collect()
    }
}

/// Reads until the end of the stream (or an error, which ends it too).
pub fn read_all(c: &mut UnixStream) -> Vec<u8> {
    let mut back = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match c.read(&mut chunk) {
            Ok(0) => return back,
            Ok(n) => back.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return back,
        }
    }
}

/// Reads one head (up to its blank line), byte by byte.
pub fn read_head(c: &mut UnixStream) -> String {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if c.read(&mut b).unwrap() == 0 {
            break;
        }
        head.push(b[0]);
    }
    String::from_utf8(head).unwrap()
}

/// The status code and the JSON body of one of the filter's answers.
pub fn status_and_body(answer: &[u8]) -> (u16, String) {
    let text = String::from_utf8_lossy(answer);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, body.to_owned())
}
