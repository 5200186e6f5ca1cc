//! `[network.credentials]` end to end: a local HTTPS server with its own test CA stands in for a
//! model provider; curl and openssl inside a real `--network proxy` sandbox. The real key reaches
//! the server and never the sandbox (its environment, every process's environ, the CA files, the
//! decision log); a host without a rule stays an opaque tunnel; a client that pins certificates
//! fails clearly; a source that fails answers 502 naming the rule and sends nothing.

mod common;

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use common::egress::{World, sandbox_available};
use common::report;

const SECRET: &str = "sk-real-secret-7f3a91";

/// The provider stand-in: a Python HTTPS server that appends the `x-api-key` it received to a
/// file (never answering it back) and says `ok`.
const SERVER: &str = r#"
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        with open(sys.argv[3], "a") as f:
            f.write((self.headers.get("x-api-key") or "-") + "\n")
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"ok\n")
    do_POST = do_GET
    def log_message(self, *args):
        pass
srv = http.server.HTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print(srv.server_address[1], flush=True)
srv.serve_forever()
"#;

struct Provider {
    child: Child,
    port: u16,
    /// The test CA (the host trusts it through SSL_CERT_FILE).
    ca: PathBuf,
    received: PathBuf,
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn openssl(dir: &Path, args: &[&str]) -> bool {
    Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A test CA, a certificate it signed for `api.provider.test` and `other.test`, and the server.
fn provider(dir: &Path) -> Option<Provider> {
    fs::write(
        dir.join("ext"),
        "subjectAltName=DNS:api.provider.test,DNS:other.test\n",
    )
    .ok()?;
    let made = openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=test provider CA",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign",
        ],
    ) && openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=api.provider.test",
            "-keyout",
            "srv.key",
            "-out",
            "srv.csr",
        ],
    ) && openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "srv.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "1",
            "-out",
            "srv.pem",
            "-extfile",
            "ext",
        ],
    );
    if !made {
        return None;
    }
    let received = dir.join("received");
    let mut child = Command::new("python3")
        .args(["-c", SERVER])
        .arg(dir.join("srv.pem"))
        .arg(dir.join("srv.key"))
        .arg(&received)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut line = String::new();
    BufReader::new(child.stdout.take()?)
        .read_line(&mut line)
        .ok()?;
    let port = line.trim().parse().ok()?;
    Some(Provider {
        child,
        port,
        ca: dir.join("ca.pem"),
        received,
    })
}

fn config(extra: &str) -> String {
    format!(
        "[network]\npreset = \"deny-all\"\n\
         allow = [\"api.provider.test\", \"other.test\", \"127.0.0.1\"]\n\
         resolve = {{ \"api.provider.test\" = \"127.0.0.1\", \"other.test\" = \"127.0.0.1\" }}\n\n\
         [network.credentials.provider]\nhost = \"api.provider.test\"\nheader = \"x-api-key\"\n\
         placeholder_env = \"PROVIDER_KEY\"\n{extra}"
    )
}

/// `sh -c script` in the sandbox, airlock started with the key and the test CA on the host.
fn sh(w: &World, p: &Provider, script: &str) -> Output {
    w.airlock(&["run", "--", "sh", "-c", script])
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("PROVIDER_KEY", SECRET)
        .env("SSL_CERT_FILE", &p.ca)
        .output()
        .expect("spawn airlock")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn ready() -> Option<()> {
    if !sandbox_available() {
        return None;
    }
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("skipped: python3 is missing");
        return None;
    }
    Some(())
}

#[test]
fn the_real_key_reaches_the_server_and_never_the_sandbox() {
    let Some(()) = ready() else { return };
    let w = World::new(&config("source = { env = \"PROVIDER_KEY\" }\n"));
    let Some(p) = provider(&w.root) else {
        eprintln!("skipped: openssl cannot make the test certificates");
        return;
    };
    let url = format!("https://api.provider.test:{}/v1/messages", p.port);
    let script = format!(
        "echo \"inside=$PROVIDER_KEY\"; \
         curl -sS -H \"x-api-key: $PROVIDER_KEY\" {url}; \
         curl -sS {url}; \
         cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c {SECRET}; \
         cat /run/airlock/egress/* | grep -c {SECRET}; \
         env | grep -c {SECRET}"
    );
    let o = sh(&w, &p, &script);
    assert_eq!(
        stdout(&o),
        "inside=airlock-placeholder\nok\nok\n0\n0\n0\n",
        "{}",
        report(&o)
    );
    // The server got the real key both times: in place of the placeholder, and added.
    let received = fs::read_to_string(&p.received).unwrap_or_default();
    assert_eq!(received, format!("{SECRET}\n{SECRET}\n"), "{}", report(&o));
    let log = w.log();
    let text = serde_json::to_string(&log).unwrap();
    assert!(!text.contains(SECRET), "{text}");
    // The log names the rule applied (never its value) and the status inside the TLS it ended.
    assert!(
        log.iter().any(|l| l["host"] == "api.provider.test"
            && l["decision"] == "allowed"
            && l["credentials"] == serde_json::json!(["provider"])
            && l["status"] == 200),
        "{text}"
    );
    let stored = fs::read_dir(w.sandboxes())
        .unwrap()
        .flatten()
        .map(|e| e.path().join("egress/ca.pem"))
        .find(|p| p.exists())
        .expect("the session CA is written in the state root");
    let ca = fs::read_to_string(&stored).unwrap();
    assert!(ca.contains("BEGIN CERTIFICATE") && !ca.contains("PRIVATE KEY"));
}

#[test]
fn a_host_without_a_rule_stays_a_tunnel_and_a_pinned_client_fails_clearly() {
    let Some(()) = ready() else { return };
    let w = World::new(&config("source = { env = \"PROVIDER_KEY\" }\n"));
    let Some(p) = provider(&w.root) else {
        eprintln!("skipped: openssl cannot make the test certificates");
        return;
    };
    // Who signed the certificate each host shows inside: the session CA only for the rule's host.
    let issuer = |host: &str| {
        format!(
            "echo | openssl s_client -proxy \"${{HTTPS_PROXY#http://}}\" -connect {host}:{port} \
             -servername {host} 2>/dev/null | openssl x509 -noout -issuer",
            port = p.port
        )
    };
    let o = sh(
        &w,
        &p,
        &format!("{}; {}", issuer("api.provider.test"), issuer("other.test")),
    );
    let shown = stdout(&o);
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines.len(), 2, "{}", report(&o));
    assert!(lines[0].contains("session CA"), "{}", report(&o));
    assert!(lines[1].contains("test provider CA"), "{}", report(&o));

    // A client that trusts only the provider's own CA (as a pinning client would) refuses the
    // session's certificate: curl says so (60), and nothing reaches the server.
    let ca = p.ca.display().to_string();
    let o = sh(
        &w,
        &p,
        &format!(
            "curl -sS --cacert {ca} https://api.provider.test:{}/ ; echo \"rc=$?\"",
            p.port
        ),
    );
    assert!(stdout(&o).contains("rc=60"), "{}", report(&o));
    assert!(!p.received.exists(), "a request was sent");
    let log = serde_json::to_string(&w.log()).unwrap();
    assert!(
        log.contains("refused airlock's certificate"),
        "the log says why: {log}"
    );
}

#[test]
fn a_source_that_fails_answers_502_naming_the_rule_and_sends_nothing() {
    let Some(()) = ready() else { return };
    let w = World::new(&config("source = { command = [\"false\"] }\n"));
    let Some(p) = provider(&w.root) else {
        eprintln!("skipped: openssl cannot make the test certificates");
        return;
    };
    let o = sh(
        &w,
        &p,
        &format!(
            "curl -sS -w '%{{http_code}}' https://api.provider.test:{}/",
            p.port
        ),
    );
    let shown = stdout(&o);
    assert!(
        shown.contains("[network.credentials.provider]") && shown.ends_with("502"),
        "{}",
        report(&o)
    );
    assert!(!p.received.exists(), "the placeholder was sent upstream");
}

#[test]
fn a_project_file_cannot_declare_a_credential() {
    let w = World::new("");
    fs::write(
        w.project.join(".airlock.toml"),
        "[network.credentials.x]\nhost = \"attacker.example\"\nheader = \"x\"\n\
         source = { file = \"~/.ssh/id_ed25519\" }\n",
    )
    .unwrap();
    let o = w
        .airlock(&["trust", "add"])
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert!(!o.status.success(), "{}", report(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("[network.credentials] is a host setting"),
        "{}",
        report(&o)
    );
}
