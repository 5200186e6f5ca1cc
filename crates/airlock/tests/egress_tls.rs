//! TLS through `--network proxy`: a CONNECT tunnel left untouched, the host's CA variables carried
//! in, an upstream (company) proxy, and a TLS-inspecting one whose CA only a bundle named by those
//! variables holds. Real binary, real sandbox, curl, git, Python (urllib, requests, pip) and Node
//! inside, `openssl s_server` on the host's loopback.

mod common;
#[path = "common/mitm.rs"]
mod mitm;

use std::fs;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::egress::{World, sandbox_available};
use common::report as out;
use mitm::{GIT_COMMIT, HOST, Inspection, client, python_with};

/// A TLS server (openssl s_server) with a self-signed certificate for `allowed.test`.
struct TlsServer {
    child: Child,
    port: u16,
    cert: PathBuf,
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tls_server(dir: &Path) -> Option<TlsServer> {
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=allowed.test",
        ])
        .args(["-addext", "subjectAltName=DNS:allowed.test"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(Stdio::null())
        .status()
        .ok()?;
    if !made.success() {
        return None;
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .ok()?
        .local_addr()
        .ok()?
        .port();
    let mut child = Command::new("openssl")
        .args(["s_server", "-www", "-accept"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("-cert")
        .arg(&cert)
        .arg("-key")
        .arg(&key)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    // s_server prints ACCEPT once it listens.
    let mut stdout = child.stdout.take()?;
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !String::from_utf8_lossy(&seen).contains("ACCEPT") {
        if Instant::now() > deadline || stdout.read(&mut byte).ok()? == 0 {
            return None;
        }
        seen.push(byte[0]);
    }
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    Some(TlsServer { child, port, cert })
}

#[test]
fn tls_passes_through_connect_untouched() {
    if !sandbox_available() {
        return;
    }
    let w = World::new(
        "[network]\npreset = \"deny-all\"\nallow = [\"allowed.test\", \"127.0.0.1\"]\n\
         resolve = { \"allowed.test\" = \"127.0.0.1\" }\n",
    );
    let Some(server) = tls_server(&w.project) else {
        eprintln!("skipped: openssl cannot start a TLS test server here");
        return;
    };
    let cert = server.cert.display().to_string();
    let o = w.sh(
        &[],
        &format!(
            "curl -sS --cacert '{cert}' -o /dev/null -w '%{{http_code}}' https://allowed.test:{}/",
            server.port
        ),
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout), "200", "{}", out(&o));
    // Without --cacert curl checks against the system trust store the sandbox is given
    // (/etc/ssl/certs): the test server's own certificate is not in it, so verification fails (60);
    // a store curl could not load at all would be exit 77.
    let o = w.sh(
        &[],
        &format!(
            "curl -sS -o /dev/null https://allowed.test:{}/",
            server.port
        ),
    );
    assert_eq!(o.status.code(), Some(60), "{}", out(&o));
    let log = w.log();
    assert!(
        log.iter()
            .any(|l| l["method"] == "CONNECT" && l["decision"] == "allowed"),
        "{log:?}"
    );
}

#[test]
fn the_hosts_ca_variables_travel_in_and_a_key_does_not() {
    if !sandbox_available() {
        return;
    }
    let w = World::new(
        "[network]\npreset = \"deny-all\"\nallow = [\"allowed.test\", \"127.0.0.1\"]\n\
         resolve = { \"allowed.test\" = \"127.0.0.1\" }\n",
    );
    // The CA lives outside the project and the home, like a company's bundle in /opt or /srv:
    // the sandbox sees it only if airlock binds it.
    let corp = w.root.join("corp");
    fs::create_dir_all(&corp).expect("corp dir");
    let Some(server) = tls_server(&corp) else {
        eprintln!("skipped: openssl cannot start a TLS test server here");
        return;
    };
    let url = format!("https://allowed.test:{}/", server.port);
    let ca = server.cert.display().to_string();
    let key = corp.join("key.pem").display().to_string();
    let run = |vars: &[(&str, &str)], script: &str| {
        let mut cmd = w.airlock(&["run", "--", "sh", "-c", script]);
        cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin");
        for (k, v) in vars {
            cmd.env(k, v);
        }
        cmd.output().expect("spawn airlock")
    };
    let python = "import ssl, sys, urllib.request\n\
                  print(urllib.request.urlopen(sys.argv[1], timeout=20).status)";
    let script = format!(
        "curl -sS -o /dev/null -w 'curl %{{http_code}}\\n' {url}; \
         /usr/bin/python3 -c '{python}' {url} 2>&1 | tail -1 | sed 's/^/python /'; \
         [ -e '{key}' ] && echo key-visible; echo \"NODE_EXTRA_CA_CERTS=$NODE_EXTRA_CA_CERTS\""
    );
    let o = run(
        &[
            ("CURL_CA_BUNDLE", &ca),
            ("SSL_CERT_FILE", &ca),
            ("NODE_EXTRA_CA_CERTS", &key),
        ],
        &script,
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("curl 200"), "{}", out(&o));
    assert!(text.contains("python 200"), "{}", out(&o));
    assert!(
        !text.contains("key-visible") && text.contains("NODE_EXTRA_CA_CERTS=\n"),
        "a variable naming a private key is not passed and the key is not bound: {}",
        out(&o)
    );
    // Control: without the variables both fail verification.
    let o = run(&[], &script);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        !text.contains("curl 200") && !text.contains("python 200"),
        "{}",
        out(&o)
    );
}

/// A company proxy stand-in on 127.0.0.1: answers `CONNECT host:port` by connecting to
/// 127.0.0.1:port (so `allowed.test` needs no DNS), relays both ways, and records each target.
struct UpstreamFixture {
    port: u16,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

fn upstream_fixture() -> UpstreamFixture {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let record = record.clone();
            std::thread::spawn(move || {
                let mut client = client;
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if client.read(&mut byte).unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let line = String::from_utf8_lossy(&head)
                    .lines()
                    .next()
                    .unwrap_or("")
                    .to_owned();
                let target = line.split_whitespace().nth(1).unwrap_or("").to_owned();
                record.lock().unwrap().push(line.clone());
                let port = target
                    .rsplit(':')
                    .next()
                    .and_then(|p| p.parse::<u16>().ok());
                let (Some(port), true) = (port, line.starts_with("CONNECT ")) else {
                    let _ = client.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
                    return;
                };
                let Ok(server) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
                    let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n");
                    return;
                };
                let _ = client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n");
                let (Ok(mut from_client), Ok(mut to_server)) =
                    (client.try_clone(), server.try_clone())
                else {
                    return;
                };
                let up =
                    std::thread::spawn(move || std::io::copy(&mut from_client, &mut to_server));
                let mut from_server = server;
                let _ = std::io::copy(&mut from_server, &mut client);
                let _ = up.join();
            });
        }
    });
    UpstreamFixture { port, seen }
}

#[test]
fn allowed_traffic_goes_through_the_hosts_upstream_proxy_and_denied_never_reaches_it() {
    if !sandbox_available() {
        return;
    }
    // No `resolve` entry: allowed.test is a name only the upstream proxy can reach.
    let w = World::new("[network]\npreset = \"deny-all\"\nallow = [\"allowed.test\"]\n");
    let Some(server) = tls_server(&w.project) else {
        eprintln!("skipped: openssl cannot start a TLS test server here");
        return;
    };
    let upstream = upstream_fixture();
    let run = |script: &str| {
        w.airlock(&["run", "--", "sh", "-c", script])
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env(
                "HTTPS_PROXY",
                format!("http://u:secret@127.0.0.1:{}", upstream.port),
            )
            .output()
            .expect("spawn airlock")
    };
    let cert = server.cert.display().to_string();
    let o = run(&format!(
        "curl -sS --cacert '{cert}' -o /dev/null -w '%{{http_code}}' https://allowed.test:{}/",
        server.port
    ));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "200", "{}", out(&o));
    let seen = upstream.seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [format!("CONNECT allowed.test:{} HTTP/1.1", server.port)],
        "the egress proxy connected through the upstream proxy"
    );
    let o = run("curl -sS -o /dev/null -w '%{http_code}' https://denied.test/");
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains("200"),
        "{}",
        out(&o)
    );
    assert_eq!(
        upstream.seen.lock().unwrap().len(),
        1,
        "a denied host never reaches it"
    );
    let log = w.log();
    assert!(
        log.iter().any(|l| l["host"] == "allowed.test"
            && l["decision"] == "allowed"
            && l["via"] == format!("127.0.0.1:{}", upstream.port)),
        "{log:?}"
    );
    let text = fs::read_to_string(
        w.sandboxes()
            .read_dir()
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path()
            .join("logs/network.jsonl"),
    )
    .unwrap();
    assert!(
        !text.contains("secret"),
        "the proxy's password is never logged"
    );
}

impl Inspection {
    /// With `var` naming the bundle, `script` prints `answer` (what the proxy answered) and the
    /// proxy read `request` inside TLS. Control: without it the client refuses the proxy's
    /// certificate (`refusal` in its output, case aside) and the proxy reads no request.
    fn verify(&self, var: &str, script: &str, request: &str, answer: &str, refusal: &str) {
        let o = self.run(&[var], script);
        assert!(
            o.status.success() && String::from_utf8_lossy(&o.stdout).contains(answer),
            "with {var}: {}",
            out(&o)
        );
        let seen = self.mitm.seen();
        let connect = format!("CONNECT {HOST}:443");
        assert!(
            seen.contains(&connect) && seen.iter().any(|l| l == request),
            "the inspecting proxy read {request:?} inside TLS: {seen:?}"
        );
        let via = format!("127.0.0.1:{}", self.mitm.port);
        assert!(
            self.w
                .log()
                .iter()
                .any(|l| l["host"] == HOST && l["decision"] == "allowed" && l["via"] == via),
            "{:?}",
            self.w.log()
        );
        let o = self.run(&[], script);
        let text = format!("{}{}", common::stdout(&o), common::stderr(&o)).to_lowercase();
        assert!(
            !o.status.success() && text.contains(refusal) && !common::stdout(&o).contains(answer),
            "without {var} the proxy's certificate is refused: {}",
            out(&o)
        );
        let later = &self.mitm.seen()[seen.len()..];
        assert!(
            later.contains(&connect) && later.iter().all(|l| l.starts_with("CONNECT ")),
            "the control reached the proxy and stopped at TLS: {later:?}"
        );
    }
}

#[test]
fn curl_trusts_a_tls_inspecting_proxy_by_curl_ca_bundle() {
    let Some(t) = Inspection::new() else {
        return;
    };
    t.verify(
        "CURL_CA_BUNDLE",
        &format!("curl -sS https://{HOST}/curl"),
        &format!("GET /curl host={HOST}"),
        &format!("inspected GET /curl host={HOST}\n"),
        "ssl certificate problem",
    );
}

#[test]
fn git_trusts_a_tls_inspecting_proxy_by_git_ssl_cainfo() {
    let Some(git) = client("git") else {
        return;
    };
    let Some(t) = Inspection::new() else {
        return;
    };
    t.verify(
        "GIT_SSL_CAINFO",
        &format!("GIT_TERMINAL_PROMPT=0 {git} ls-remote https://{HOST}/demo.git"),
        &format!("GET /demo.git/info/refs?service=git-upload-pack host={HOST}"),
        &format!("{GIT_COMMIT}\trefs/heads/main\n"),
        "certificate",
    );
}

#[test]
fn python_urllib_trusts_a_tls_inspecting_proxy_by_ssl_cert_file() {
    let Some(python) = client("python3") else {
        return;
    };
    let Some(t) = Inspection::new() else {
        return;
    };
    let code = "import sys, urllib.request\n\
                sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())";
    t.verify(
        "SSL_CERT_FILE",
        &format!("{python} -c '{code}' https://{HOST}/urllib"),
        &format!("GET /urllib host={HOST}"),
        &format!("inspected GET /urllib host={HOST}\n"),
        "certificate_verify_failed",
    );
}

#[test]
fn python_requests_trusts_a_tls_inspecting_proxy_by_requests_ca_bundle() {
    let Some(python) = python_with("requests", "python3-requests") else {
        return;
    };
    let Some(t) = Inspection::new() else {
        return;
    };
    let code = "import sys, requests\n\
                sys.stdout.write(requests.get(sys.argv[1], timeout=10).text)";
    t.verify(
        "REQUESTS_CA_BUNDLE",
        &format!("{python} -c '{code}' https://{HOST}/requests"),
        &format!("GET /requests host={HOST}"),
        &format!("inspected GET /requests host={HOST}\n"),
        "certificate_verify_failed",
    );
}

#[test]
fn pip_trusts_a_tls_inspecting_proxy_by_pip_cert() {
    let Some(python) = python_with("pip", "python3-pip") else {
        return;
    };
    let Some(t) = Inspection::new() else {
        return;
    };
    // `pip index versions` reads the project's simple page and lists the releases it links.
    t.verify(
        "PIP_CERT",
        &format!(
            "{python} -m pip index versions demo --index-url https://{HOST}/simple/ \
             --disable-pip-version-check --no-cache-dir --retries 0 --timeout 10"
        ),
        &format!("GET /simple/demo/ host={HOST}"),
        "demo (1.0)",
        "certificate_verify_failed",
    );
}

/// Node's https through the sandbox's `HTTPS_PROXY`: Node before 22.21 ignores the proxy
/// variables (and `NODE_USE_ENV_PROXY`), so the script opens the CONNECT tunnel itself, with the
/// `Host` a proxy agent sends (the target: Node's default, the proxy's address, gets a 400).
const NODE_GET: &str = r#"const http = require("http"), https = require("https"), tls = require("tls");
const url = new URL(process.argv[1]), proxy = new URL(process.env.HTTPS_PROXY);
const fail = (e) => { console.error(`node: ${e.code}: ${e.message}`); process.exitCode = 1; };
const target = `${url.hostname}:443`;
http.request({ host: proxy.hostname, port: proxy.port, method: "CONNECT", path: target, headers: { host: target } })
  .on("connect", (res, socket) => {
    if (res.statusCode !== 200) return fail({ code: res.statusCode, message: "CONNECT refused" });
    const createConnection = () => tls.connect({ socket, servername: url.hostname });
    https.get(url, { createConnection }, (r) => r.pipe(process.stdout)).on("error", fail);
  })
  .on("error", fail)
  .end();"#;

#[test]
fn node_trusts_a_tls_inspecting_proxy_by_node_extra_ca_certs() {
    let Some(node) = client("node") else {
        return;
    };
    let Some(t) = Inspection::new() else {
        return;
    };
    t.verify(
        "NODE_EXTRA_CA_CERTS",
        &format!("{node} -e '{NODE_GET}' https://{HOST}/node"),
        &format!("GET /node host={HOST}"),
        &format!("inspected GET /node host={HOST}\n"),
        "unable_to_verify_leaf_signature",
    );
}
