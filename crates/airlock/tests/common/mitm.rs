//! A TLS-inspecting company proxy stand-in on 127.0.0.1: it answers `CONNECT host:port` itself,
//! then terminates the client's TLS with a leaf certificate for `host` signed by its own CA (made
//! here with the openssl CLI), reads the HTTP request inside and answers it. It never connects
//! anywhere, so the names it is asked for need no DNS.
//!
//! TLS is terminated by one `openssl s_server -quiet -naccept 1` per tunnel, on a Unix socket:
//! the ciphertext is relayed between the client and that socket, the plaintext request comes out
//! of its stdout and the response goes into its stdin. Every request line read inside TLS is
//! recorded, next to the CONNECT lines: a request is only seen once the client trusted the leaf.
//!
//! Also the cases' setup ([`Inspection`]). Included by `egress_tls.rs` with `#[path]`, not by
//! `common/mod.rs`: the other test files do not build it.

use std::collections::HashMap;
use std::fs;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::common::egress::{World, sandbox_available};

/// The commit id the git answer advertises (any 40 hex digits do).
pub const GIT_COMMIT: &str = "5e1f0c9a2b7d4e6f8091a2b3c4d5e6f708192a3b";

pub struct Mitm {
    pub port: u16,
    /// The CA's certificate (PEM, without its key).
    pub ca: PathBuf,
    state: Arc<State>,
}

struct State {
    dir: PathBuf,
    /// `CONNECT host:port` and `METHOD /path host=HOST`, in the order they came.
    seen: Mutex<Vec<String>>,
    /// host -> (certificate, key), made on first use.
    leaves: Mutex<HashMap<String, (PathBuf, PathBuf)>>,
    /// The s_server of each live tunnel, by pid, so a dropped fixture leaves none behind.
    servers: Mutex<HashMap<u32, Child>>,
    next: AtomicU64,
}

impl Drop for Mitm {
    fn drop(&mut self) {
        for (_, mut child) in self.state.servers.lock().unwrap().drain() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn openssl(args: &[&str], paths: &[&Path]) -> bool {
    Command::new("openssl")
        .args(args)
        .args(paths)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

impl Mitm {
    /// A CA in `dir` (created) and the proxy listening; None when openssl cannot make the CA.
    pub fn start(dir: &Path) -> Option<Mitm> {
        fs::create_dir_all(dir).ok()?;
        let ca = dir.join("ca.pem");
        let key = dir.join("ca.key");
        let made = openssl(
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-days",
                "1",
                "-subj",
                "/CN=airlock test inspecting proxy CA",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
                "-keyout",
                key.to_str()?,
                "-out",
            ],
            &[&ca],
        );
        if !made {
            return None;
        }
        let listener = TcpListener::bind("127.0.0.1:0").ok()?;
        let port = listener.local_addr().ok()?.port();
        let state = Arc::new(State {
            dir: dir.to_owned(),
            seen: Mutex::default(),
            leaves: Mutex::default(),
            servers: Mutex::default(),
            next: AtomicU64::new(1),
        });
        let shared = state.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let state = shared.clone();
                std::thread::spawn(move || state.tunnel(client));
            }
        });
        Some(Mitm { port, ca, state })
    }

    pub fn seen(&self) -> Vec<String> {
        self.state.seen.lock().unwrap().clone()
    }

    /// Writes a company bundle: the system's CAs (when readable) and this proxy's CA.
    pub fn write_bundle(&self, path: &Path) {
        let mut text = fs::read_to_string("/etc/ssl/certs/ca-certificates.crt").unwrap_or_default();
        text.push_str(&fs::read_to_string(&self.ca).expect("read the CA"));
        crate::common::write(path, &text);
    }
}

/// The host the TLS-inspection cases ask for: only the inspecting proxy knows it.
pub const HOST: &str = "inspected.test";

/// A sandbox whose host reaches HTTPS only through a TLS-inspecting proxy ([`Mitm`]), and the
/// company bundle (the system's CAs and the proxy's) outside the project and the home, so the
/// sandbox sees it only if airlock binds it.
pub struct Inspection {
    pub w: World,
    pub mitm: Mitm,
    pub bundle: String,
}

impl Inspection {
    pub fn new() -> Option<Inspection> {
        if !sandbox_available() {
            return None;
        }
        let w = World::new("[network]\npreset = \"deny-all\"\n");
        let Some(mitm) = Mitm::start(&w.root.join("mitm")) else {
            eprintln!("skipped: openssl cannot make the inspecting proxy's CA here");
            return None;
        };
        let bundle = w.root.join("corp/ca-bundle.pem");
        mitm.write_bundle(&bundle);
        let bundle = bundle.display().to_string();
        Some(Inspection { w, mitm, bundle })
    }

    /// `sh -c script` in a proxy-mode sandbox allowing [`HOST`], the host's `HTTPS_PROXY` the
    /// inspecting proxy and each of `vars` naming the bundle.
    pub fn run(&self, vars: &[&str], script: &str) -> Output {
        let mut cmd = self.w.airlock(&[
            "run",
            "--network",
            "proxy",
            "--allow-host",
            HOST,
            "--",
            "sh",
            "-c",
            script,
        ]);
        cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin").env(
            "HTTPS_PROXY",
            format!("http://127.0.0.1:{}", self.mitm.port),
        );
        for var in vars {
            cmd.env(var, &self.bundle);
        }
        cmd.output().expect("spawn airlock")
    }
}

/// `name` as the sandbox finds it on its PATH (the host's /usr, read-only); says so when missing.
pub fn client(name: &str) -> Option<String> {
    let found = ["/usr/local/bin", "/usr/bin", "/bin"]
        .iter()
        .map(|d| format!("{d}/{name}"))
        .find(|p| Path::new(p).exists());
    if found.is_none() {
        eprintln!("skipped: {name} is not installed (scripts/test installs it as root)");
    }
    found
}

/// The sandbox's python3 when `import module` works in it; says why not otherwise.
pub fn python_with(module: &str, package: &str) -> Option<String> {
    let python = client("python3")?;
    let imports = Command::new(&python)
        .args(["-c", &format!("import {module}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !imports {
        eprintln!("skipped: {python} cannot import {module} (apt-get install {package})");
        return None;
    }
    Some(python)
}

/// Reads up to the blank line ending an HTTP head, byte by byte (nothing after it is consumed).
fn read_head(from: &mut impl Read) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 64 * 1024 || from.read(&mut byte).ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

impl State {
    fn record(&self, line: String) {
        self.seen.lock().unwrap().push(line);
    }

    /// The leaf for `host`, signed by the CA.
    fn leaf(&self, host: &str) -> Option<(PathBuf, PathBuf)> {
        let mut leaves = self.leaves.lock().unwrap();
        if let Some(leaf) = leaves.get(host) {
            return Some(leaf.clone());
        }
        let base = self.dir.join(format!("leaf-{}", leaves.len()));
        let (cert, key, csr, ext) = (
            base.with_extension("pem"),
            base.with_extension("key"),
            base.with_extension("csr"),
            base.with_extension("ext"),
        );
        fs::write(
            &ext,
            format!(
                "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n\
                 extendedKeyUsage=serverAuth\nsubjectAltName=DNS:{host}\n\
                 authorityKeyIdentifier=keyid\nsubjectKeyIdentifier=hash\n"
            ),
        )
        .ok()?;
        let subject = format!("/CN={host}");
        let request = [
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            &subject,
            "-keyout",
            key.to_str()?,
            "-out",
        ];
        let serial = format!("0x{:x}", self.next.fetch_add(1, Ordering::Relaxed) + 0x1000);
        let ca = self.dir.join("ca.pem");
        let ca_key = self.dir.join("ca.key");
        let sign = [
            "x509",
            "-req",
            "-days",
            "1",
            "-set_serial",
            &serial,
            "-CA",
            ca.to_str()?,
            "-CAkey",
            ca_key.to_str()?,
            "-extfile",
            ext.to_str()?,
            "-in",
            csr.to_str()?,
            "-out",
        ];
        if !(openssl(&request, &[&csr]) && openssl(&sign, &[&cert])) {
            return None;
        }
        leaves.insert(host.to_owned(), (cert.clone(), key.clone()));
        Some((cert, key))
    }

    fn tunnel(&self, mut client: TcpStream) {
        let Some(head) = read_head(&mut client) else {
            return;
        };
        let line = head.lines().next().unwrap_or("").to_owned();
        let target = line.split_whitespace().nth(1).unwrap_or("").to_owned();
        self.record(line.trim_end_matches(" HTTP/1.1").to_owned());
        let host = target.rsplit_once(':').map_or("", |(h, _)| h);
        let plausible = !host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
        if !line.starts_with("CONNECT ") || !plausible {
            let _ = client.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
            return;
        }
        let Some((cert, key)) = self.leaf(host) else {
            let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n");
            return;
        };
        let socket = self.dir.join(format!(
            "tls-{}.sock",
            self.next.fetch_add(1, Ordering::Relaxed)
        ));
        let Ok(mut server) = Command::new("openssl")
            .args(["s_server", "-quiet", "-naccept", "1", "-unix"])
            .arg(&socket)
            .arg("-cert")
            .arg(&cert)
            .arg("-key")
            .arg(&key)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
        else {
            let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n");
            return;
        };
        let (mut plain_in, mut plain_out) = (server.stdin.take(), server.stdout.take());
        let pid = server.id();
        self.servers.lock().unwrap().insert(pid, server);
        // s_server says nothing when it listens (-quiet): the first connect that works is ours.
        let deadline = Instant::now() + Duration::from_secs(10);
        let tls = loop {
            match UnixStream::connect(&socket) {
                Ok(s) => break Some(s),
                Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
                Err(_) => break None,
            }
        };
        let Some(tls) = tls else {
            let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n");
            self.finish(pid, Duration::ZERO);
            return;
        };
        if client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .is_err()
        {
            self.finish(pid, Duration::ZERO);
            return;
        }
        let (up, down) = relay(&client, &tls);
        let request = plain_out.as_mut().and_then(read_head);
        match (request, plain_out.as_mut(), plain_in.take()) {
            (Some(request), Some(out), Some(mut input)) => {
                self.answer(&request, out, &mut input);
                // Closing its stdin makes s_server send the rest, close TLS and exit.
                drop(input);
            }
            // The handshake failed (s_server is gone) or the request was not HTTP.
            _ => self.finish(pid, Duration::ZERO),
        }
        // Once s_server has closed its end, all it sent has reached the client.
        let _ = down.join();
        let _ = client.shutdown(Shutdown::Both);
        let _ = up.join();
        self.finish(pid, Duration::from_secs(10));
        let _ = fs::remove_file(&socket);
    }

    /// Waits up to `patience` for the tunnel's s_server to exit, then kills it.
    fn finish(&self, pid: u32, patience: Duration) {
        let deadline = Instant::now() + patience;
        loop {
            let mut servers = self.servers.lock().unwrap();
            let Some(child) = servers.get_mut(&pid) else {
                return;
            };
            if matches!(child.try_wait(), Ok(Some(_))) || Instant::now() >= deadline {
                let mut child = servers.remove(&pid).expect("present");
                drop(servers);
                let _ = child.kill();
                let _ = child.wait();
                return;
            }
            drop(servers);
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Records the request read inside TLS and writes the answer.
    fn answer(&self, request: &str, body_from: &mut impl Read, to: &mut impl Write) {
        let mut words = request.split_whitespace();
        let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        let host = header(request, "host").unwrap_or("");
        let host = host.split(':').next().unwrap_or("");
        self.record(format!("{method} {path} host={host}"));
        let length = header(request, "content-length").and_then(|l| l.parse::<u64>().ok());
        let _ = std::io::copy(
            &mut body_from.take(length.unwrap_or(0)),
            &mut std::io::sink(),
        );
        let (kind, body) = if path.ends_with("/info/refs?service=git-upload-pack") {
            ("application/x-git-upload-pack-advertisement", git_refs())
        } else if let Some(name) = path
            .strip_prefix("/simple/")
            .and_then(|p| p.strip_suffix('/'))
        {
            // A PEP 503 project page with one release.
            let file = format!("{name}-1.0.tar.gz");
            (
                "text/html",
                format!("<!DOCTYPE html>\n<html><body><a href=\"/files/{file}\">{file}</a></body></html>\n")
                    .into_bytes(),
            )
        } else {
            (
                "text/plain",
                format!("inspected {method} {path} host={host}\n").into_bytes(),
            )
        };
        let mut response = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        if method != "HEAD" {
            response.extend_from_slice(&body);
        }
        let _ = to.write_all(&response);
        let _ = to.flush();
    }
}

/// Copies client -> TLS server and back, each in its own thread; each half-closes where it writes.
fn relay(client: &TcpStream, tls: &UnixStream) -> (JoinHandle<()>, JoinHandle<()>) {
    let dup = "clone a socket";
    let (mut client_in, mut client_out) = (
        client.try_clone().expect(dup),
        client.try_clone().expect(dup),
    );
    let (mut tls_in, mut tls_out) = (tls.try_clone().expect(dup), tls.try_clone().expect(dup));
    let up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut client_in, &mut tls_out);
        let _ = tls_out.shutdown(Shutdown::Write);
    });
    let down = std::thread::spawn(move || {
        let _ = std::io::copy(&mut tls_in, &mut client_out);
        let _ = client_out.shutdown(Shutdown::Write);
    });
    (up, down)
}

/// A smart-HTTP ref advertisement (protocol v0): HEAD and `main` at [`GIT_COMMIT`].
fn git_refs() -> Vec<u8> {
    let pkt = |s: &str| format!("{:04x}{s}", s.len() + 4);
    format!(
        "{}0000{}{}0000",
        pkt("# service=git-upload-pack\n"),
        pkt(&format!(
            "{GIT_COMMIT} HEAD\0symref=HEAD:refs/heads/main agent=inspecting-proxy\n"
        )),
        pkt(&format!("{GIT_COMMIT} refs/heads/main\n")),
    )
    .into_bytes()
}
