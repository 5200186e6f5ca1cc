//! What the port-forward test files share: a session left running until the test stops it, an
//! HTTP server inside and a client on the host, the host's listeners and the forwards' helper as
//! `/proc` shows them, and running airlock as the unprivileged test user.

use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::users::as_user;
use super::{AIRLOCK, TestHome, sandbox_starts};

pub const DEADLINE: Duration = Duration::from_secs(30);

/// Waits for `cond` with a deadline; panics naming `what` when it never holds.
pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET path` on 127.0.0.1:port: the body, None when nothing answers.
pub fn get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.0 200").then(|| body.to_owned())
}

pub fn port_is_free(port: u16) -> bool {
    TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok()
}

/// Whether python3 and the sandbox work here; says why not.
pub fn available() -> bool {
    if !Path::new("/usr/bin/python3").exists() {
        eprintln!("skipped: /usr/bin/python3 is missing (apt-get install python3)");
        return false;
    }
    sandbox_starts()
}

/// A shell line that serves `dir` (relative to the project) over HTTP on 127.0.0.1:PORT inside.
pub fn http_server(port: u16) -> String {
    format!("python3 -m http.server {port} --bind 127.0.0.1 --directory site >/dev/null 2>&1 &")
}

/// An `airlock run` left running until [`Running::stop`]: the workload runs `script`, then waits
/// for the stop file.
pub struct Running {
    pub child: Child,
    stop: PathBuf,
    log: PathBuf,
}

impl Running {
    pub fn start(h: &TestHome, options: &[&str], script: &str) -> Running {
        Running::start_as(h, Path::new(AIRLOCK), None, options, script)
    }

    /// The same with `airlock` as the binary, run as `user` when given.
    pub fn start_as(
        h: &TestHome,
        airlock: &Path,
        user: Option<(u32, u32)>,
        options: &[&str],
        script: &str,
    ) -> Running {
        let stop = h.project.join(".stop");
        let _ = fs::remove_file(&stop);
        let log = h.root.join(format!("airlock-{}.log", free_port()));
        let full = format!(
            "{script}\ntouch .started\nwhile [ ! -e {} ]; do sleep 0.05; done",
            stop.display()
        );
        let mut cmd = Command::new(airlock);
        cmd.arg("run")
            .args(options)
            .args(["--", "sh", "-c", &full])
            .current_dir(&h.project)
            .env_clear()
            .env("HOME", &h.home)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).unwrap());
        if let Some(user) = user {
            as_user(&mut cmd, user);
        }
        let child = cmd.spawn().expect("spawn airlock");
        Running { child, stop, log }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn stderr(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Lets the workload end; its exit status and stderr.
    pub fn stop(mut self) -> (std::process::ExitStatus, String) {
        fs::write(&self.stop, "").unwrap();
        let status = self.child.wait().unwrap();
        (status, self.stderr())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = fs::write(&self.stop, "");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A project with `site/index.html` holding `text`.
pub fn site(text: &str) -> TestHome {
    let h = TestHome::new("work/app");
    super::write(&h.project.join("site/index.html"), text);
    h
}

/// The listening sockets for `port` in `/proc/net/tcp`: their local addresses (hex).
pub fn listeners_of(port: u16) -> Vec<String> {
    let want = format!(":{port:04X}");
    fs::read_to_string("/proc/net/tcp")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            let local = *fields.get(1)?;
            (local.ends_with(&want) && fields.get(3) == Some(&"0A")).then(|| local.to_owned())
        })
        .collect()
}

/// Children of `parent` named `airlock-netns` (the forwards' helper).
pub fn helpers_of(parent: u32) -> Vec<u32> {
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            stat.split_once('(')
                .and_then(|(_, r)| r.rsplit_once(')'))
                .is_some_and(|(name, rest)| {
                    name == airlock_sandbox::ports::HELPER_NAME
                        && rest.split(' ').nth(2) == Some(parent.to_string().as_str())
                })
        })
        .collect()
}
