//! Test harness: a proxy on a loopback port with a temp decision log, a loopback upstream HTTP server
//! that records what reaches it, and raw-socket clients.

#![allow(dead_code)]

pub mod upstream;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use airlock_config::{EgressPreset, EgressRule, EgressSettings};
use airlock_egress::{EgressPolicy, LogDecision, LogRecord, ProxyConfig, ProxyHandle, spawn_with};

/// The longest any test waits for something that should happen at once.
pub const DEADLINE: Duration = Duration::from_secs(30);

pub struct Proxy {
    pub handle: Option<ProxyHandle>,
    pub addr: SocketAddr,
    pub log: PathBuf,
    _dir: tempfile::TempDir,
}

/// Settings with `preset`, rules from a test file, and `allowed.test` / `evil.test` mapped to
/// 127.0.0.1.
pub fn settings(preset: EgressPreset, allow: &[&str], deny: &[&str]) -> EgressSettings {
    let tag = |r: &&str| EgressRule {
        rule: (*r).to_owned(),
        origin: "/test/config.toml".into(),
    };
    let mut s = EgressSettings {
        preset,
        allow: allow.iter().map(tag).collect(),
        deny: deny.iter().map(tag).collect(),
        ..EgressSettings::default()
    };
    for name in ["allowed.test", "evil.test", "other.test"] {
        s.resolve.insert(name.into(), "127.0.0.1".parse().unwrap());
    }
    s
}

impl Proxy {
    pub fn start(settings: &EgressSettings) -> Proxy {
        Proxy::start_with(settings, ProxyConfig::default())
    }

    pub fn start_with(settings: &EgressSettings, config: ProxyConfig) -> Proxy {
        let policy = EgressPolicy::from_settings(settings, &[], &[]).expect("policy");
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("logs/network.jsonl");
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let handle = spawn_with(listener, policy, log.clone(), config).expect("spawn");
        Proxy {
            addr: handle.local_addr(),
            handle: Some(handle),
            log,
            _dir: dir,
        }
    }

    /// Sends `request` and reads the whole answer (the proxy closes after one request).
    pub fn raw(&self, request: &[u8]) -> String {
        let mut s = self.connect();
        s.write_all(request).expect("send");
        read_to_end(&mut s)
    }

    pub fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).expect("connect to proxy");
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        s.set_write_timeout(Some(DEADLINE)).unwrap();
        s
    }

    /// Stops the proxy (flushing the log) and returns every record.
    pub fn finish(mut self) -> Vec<LogRecord> {
        self.handle.take().expect("running").shutdown();
        read_log(&self.log)
    }

    /// Stops the proxy and returns the log file's text.
    pub fn finish_text(mut self) -> String {
        self.handle.take().expect("running").shutdown();
        std::fs::read_to_string(&self.log).expect("the log exists")
    }

    /// Waits until the log holds at least `n` records.
    pub fn wait_for_records(&self, n: usize) -> Vec<LogRecord> {
        let start = Instant::now();
        loop {
            let records = read_log(&self.log);
            if records.len() >= n {
                return records;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "only {} log records: {records:?}",
                records.len()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Proxy {
    /// Waits until a record for `host` is in the log (the current file).
    pub fn wait_until_logged(&self, host: &str) {
        let start = Instant::now();
        let needle = format!("\"host\":\"{host}\"");
        while !std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .contains(&needle)
        {
            assert!(start.elapsed() < DEADLINE, "{host} was never logged");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

pub fn read_log(path: &std::path::Path) -> Vec<LogRecord> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad log line {l:?}: {e}")))
        .collect()
}

pub fn read_to_end(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

pub fn status_of(response: &str) -> u16 {
    response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {response:?}"))
}

/// The one record for `host`, asserting there is exactly one.
pub fn record_for<'a>(records: &'a [LogRecord], host: &str) -> &'a LogRecord {
    let found: Vec<_> = records.iter().filter(|r| r.host == host).collect();
    assert_eq!(found.len(), 1, "{host}: {records:#?}");
    found[0]
}

pub fn assert_decision(r: &LogRecord, decision: LogDecision) {
    assert_eq!(r.decision, decision, "{r:#?}");
}

/// `Some(path)` of a program, or `None` with a printed reason (the test then skips).
pub fn tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        eprintln!("SKIP: `{name}` is not installed (apt-get install {name})");
    }
    found
}
