//! TLS through `--network proxy`: a CONNECT tunnel left untouched, the host's CA variables carried
//! in, and an upstream (company) proxy. Real binary, real sandbox, curl and Python inside, an
//! `openssl s_server` on the host's loopback.

mod common;

use std::fs;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::egress::{World, sandbox_available};
use common::report as out;

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
