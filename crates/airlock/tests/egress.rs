//! `--network proxy` end to end: the real binary, a real sandbox, curl inside, servers on the host's
//! loopback. Names like `allowed.test` reach those servers through the `[network] resolve` map.

mod common;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{TestHome, report as out};

/// A temp HOME whose global config is the given text, and a project outside the home.
struct World(TestHome);

impl Deref for World {
    type Target = TestHome;
    fn deref(&self) -> &TestHome {
        &self.0
    }
}

impl World {
    fn new(network_config: &str) -> World {
        let w = World(TestHome::new("work/app"));
        w.config(network_config);
        w
    }

    /// Runs `sh -c script` in the sandbox (default network mode: proxy).
    fn sh(&self, extra: &[&str], script: &str) -> Output {
        let mut args = vec!["run"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "sh", "-c", script]);
        self.airlock(&args)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .output()
            .expect("spawn airlock")
    }

    fn log(&self) -> Vec<serde_json::Value> {
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

/// A tiny HTTP/1.1 server on 127.0.0.1 answering every request with `body`.
fn http_server(body: &'static str) -> u16 {
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
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// Whether the native sandbox starts here and curl exists; says why when not.
fn sandbox_available() -> bool {
    if !common::sandbox_starts() {
        return false;
    }
    if !Path::new("/usr/bin/curl").exists() {
        eprintln!("skipped: /usr/bin/curl is missing (apt-get install curl)");
        return false;
    }
    true
}

#[test]
fn allowed_host_passes_and_denied_host_gets_403_with_a_log_line() {
    if !sandbox_available() {
        return;
    }
    let port = http_server("hello from the host");
    let w = World::new(
        "[network]\npreset = \"deny-all\"\nallow = [\"allowed.test\", \"127.0.0.1\"]\n\
         resolve = { \"allowed.test\" = \"127.0.0.1\", \"denied.test\" = \"127.0.0.1\" }\n",
    );
    let script = format!(
        "curl -sS http://allowed.test:{port}/ && echo && \
         curl -s -o /dev/null -w '%{{http_code}}' http://denied.test:{port}/"
    );
    let o = w.sh(&[], &script);
    assert!(o.status.success(), "{}", out(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "hello from the host\n403",
        "{}",
        out(&o)
    );
    let log = w.log();
    let decision = |host: &str| {
        log.iter()
            .find(|l| l["host"] == host)
            .map(|l| l["decision"].as_str().unwrap_or_default().to_owned())
    };
    assert_eq!(
        decision("allowed.test").as_deref(),
        Some("allowed"),
        "{log:?}"
    );
    assert_eq!(
        decision("denied.test").as_deref(),
        Some("denied"),
        "{log:?}"
    );
}

#[test]
fn denied_body_names_the_host_and_the_config_line() {
    if !sandbox_available() {
        return;
    }
    let w = World::new("[network]\npreset = \"deny-all\"\n");
    let o = w.sh(&[], "curl -s http://nope.test/");
    let body = String::from_utf8_lossy(&o.stdout);
    assert!(body.contains("nope.test"), "{}", out(&o));
    assert!(body.contains("allow = [\"nope.test\"]"), "{}", out(&o));
}

#[test]
fn allowed_name_pointing_at_loopback_is_refused_without_an_address_rule() {
    if !sandbox_available() {
        return;
    }
    let port = http_server("host service");
    let w = World::new(
        "[network]\npreset = \"deny-all\"\nallow = [\"allowed.test\"]\n\
         resolve = { \"allowed.test\" = \"127.0.0.1\" }\n",
    );
    let o = w.sh(
        &[],
        &format!("curl -s -o /dev/null -w '%{{http_code}}' http://allowed.test:{port}/"),
    );
    let code = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(code == "403" || code == "502", "refused, got {}", out(&o));
    assert!(
        w.log()
            .iter()
            .any(|l| l["host"] == "allowed.test" && l["decision"] != "allowed")
    );
}

#[test]
fn case_trailing_dot_and_port_variants_of_a_denied_host_are_denied() {
    if !sandbox_available() {
        return;
    }
    let port = http_server("x");
    let w = World::new(&format!(
        "[network]\npreset = \"allow-all\"\nallow_private = true\ndeny = [\"blocked.test\"]\n\
         resolve = {{ \"blocked.test\" = \"127.0.0.1\" }}\n# port {port}\n"
    ));
    for url in [
        format!("http://BLOCKED.test:{port}/"),
        format!("http://blocked.test.:{port}/"),
        format!("http://Blocked.Test.:{port}/"),
        "http://blocked.test:80/".to_owned(),
    ] {
        let o = w.sh(
            &[],
            &format!("curl -s -o /dev/null -w '%{{http_code}}' '{url}'"),
        );
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            "403",
            "{url}: {}",
            out(&o)
        );
    }
}

#[test]
fn direct_connections_bypassing_the_proxy_fail() {
    if !sandbox_available() {
        return;
    }
    let port = http_server("should not be reachable");
    let w = World::new("[network]\npreset = \"allow-all\"\nallow_private = true\n");
    let o = w.sh(
        &[],
        &format!("curl -s -m 5 --noproxy '*' http://127.0.0.1:{port}/; echo \"rc=$?\""),
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(!text.contains("should not be reachable"), "{}", out(&o));
    assert!(
        text.contains("rc=7"),
        "connection refused inside: {}",
        out(&o)
    );
}

/// The sandbox's `lo` carries 512 KiB packets (BIG TCP), which is what keeps a download through
/// the proxy close to a direct one; the host's own `lo` is left as it is.
#[test]
fn the_sandbox_loopback_is_tuned_for_big_packets() {
    if !sandbox_available() {
        return;
    }
    let Some(ip) = ["/usr/sbin/ip", "/sbin/ip", "/bin/ip"]
        .into_iter()
        .find(|p| Path::new(p).exists())
    else {
        eprintln!("skipped: no ip binary (apt-get install iproute2)");
        return;
    };
    let gso = |text: &str| -> Option<u32> {
        let rest = &text[text.find("gso_max_size ")? + "gso_max_size ".len()..];
        rest.split_whitespace().next()?.parse().ok()
    };
    let w = World::new("");
    let o = w.sh(&[], &format!("{ip} -d link show lo"));
    assert!(o.status.success(), "{}", out(&o));
    let inside = gso(&String::from_utf8_lossy(&o.stdout));
    let host = Command::new(ip)
        .args(["-d", "link", "show", "lo"])
        .output()
        .expect("ip on the host");
    let host_text = String::from_utf8_lossy(&host.stdout).into_owned();
    let tso_max = host_text.find("tso_max_size ").and_then(|i| {
        host_text[i + 13..]
            .split_whitespace()
            .next()?
            .parse::<u32>()
            .ok()
    });
    match tso_max {
        Some(max) if max > 65536 => assert_eq!(inside, Some(524_280), "{}", out(&o)),
        _ => eprintln!("skipped: this kernel's lo takes no packets over 64 KiB ({host_text})"),
    }
    let o = w.sh(&["--network", "none"], &format!("{ip} -d link show lo"));
    assert_eq!(
        gso(&String::from_utf8_lossy(&o.stdout)),
        Some(65536),
        "only the proxy mode tunes lo: {}",
        out(&o)
    );
}

#[test]
fn cli_rules_add_to_the_config() {
    if !sandbox_available() {
        return;
    }
    let port = http_server("via --allow-host");
    let w = World::new(
        "[network]\npreset = \"deny-all\"\nresolve = { \"cli.test\" = \"127.0.0.1\" }\n",
    );
    let script = format!("curl -s http://cli.test:{port}/");
    let denied = w.sh(&[], &script);
    assert!(!String::from_utf8_lossy(&denied.stdout).contains("via --allow-host"));
    let allowed = w.sh(
        &["--allow-host", "cli.test", "--allow-host", "127.0.0.1"],
        &script,
    );
    assert_eq!(
        String::from_utf8_lossy(&allowed.stdout),
        "via --allow-host",
        "{}",
        out(&allowed)
    );
    let overridden = w.sh(
        &[
            "--allow-host",
            "cli.test",
            "--allow-host",
            "127.0.0.1",
            "--deny-host",
            "cli.test",
        ],
        &script,
    );
    assert!(
        !String::from_utf8_lossy(&overridden.stdout).contains("via --allow-host"),
        "deny wins"
    );
}

#[test]
fn an_invalid_rule_is_an_error_before_anything_starts() {
    let w = World::new("[network]\nallow = [\"bad host name\"]\n");
    let o = w.sh(&[], "true");
    assert_eq!(o.status.code(), Some(125), "{}", out(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("bad host name"),
        "{}",
        out(&o)
    );
    assert!(!w.home.join(".local/share/airlock/sandboxes").exists() || w.log().is_empty());
}

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
