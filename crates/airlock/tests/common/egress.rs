//! What the egress test files share: a temp HOME with a `[network]` config, `sh -c` inside a
//! proxy-mode sandbox, and the decision log.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::ops::Deref;
use std::path::Path;
use std::process::Output;

use super::TestHome;

/// A temp HOME whose global config is the given text, and a project outside the home.
pub struct World(pub TestHome);

impl Deref for World {
    type Target = TestHome;
    fn deref(&self) -> &TestHome {
        &self.0
    }
}

impl World {
    pub fn new(network_config: &str) -> World {
        let w = World(TestHome::new("work/app"));
        w.config(network_config);
        w
    }

    /// Runs `sh -c script` in the sandbox (default network mode: proxy).
    pub fn sh(&self, extra: &[&str], script: &str) -> Output {
        let mut args = vec!["run"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "sh", "-c", script]);
        self.airlock(&args)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .output()
            .expect("spawn airlock")
    }

    pub fn log(&self) -> Vec<serde_json::Value> {
        let Some(sandbox) = fs::read_dir(self.sandboxes())
            .ok()
            .and_then(|mut d| d.next())
            .and_then(Result::ok)
        else {
            return Vec::new();
        };
        fs::read_to_string(sandbox.path().join("logs/network.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("log line is JSON"))
            .collect()
    }
}

/// Whether the native sandbox starts here and curl exists; says why when not.
pub fn sandbox_available() -> bool {
    if !super::sandbox_starts() {
        return false;
    }
    if !Path::new("/usr/bin/curl").exists() {
        eprintln!("skipped: /usr/bin/curl is missing (apt-get install curl)");
        return false;
    }
    true
}

/// A tiny HTTP/1.1 server on 127.0.0.1 answering every request with `200 OK` and `body`.
pub fn http_server(body: &'static str) -> u16 {
    http_server_with("200 OK", body)
}

/// A tiny HTTP/1.1 server on 127.0.0.1 answering every request with `status` (`418 I'm a teapot`)
/// and `body`.
pub fn http_server_with(status: &'static str, body: &'static str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream);
            let mut line = String::new();
            while reader.read_line(&mut line).map(|n| n > 2).unwrap_or(false) {
                line.clear();
            }
            let mut stream = reader.into_inner();
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}
