//! OAuth loopback callbacks: a login inside listens on `127.0.0.1:<port>` and opens the provider's
//! page with that address as its `redirect_uri`; the host's browser (a fake that follows
//! redirects with curl) is sent back to the host's `127.0.0.1:<port>`, which the daemon had the
//! session's supervisor forward into the sandbox. A fake provider on the host's loopback answers
//! `/authorize` with that redirect. And the attacks: a callback port a host service holds, more
//! callbacks than a session may hold, a privileged port.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::harness::{World, wait_for};
use crate::sandbox::{run_in_sandbox_with, sandbox_works, text};

/// A port nothing listens on now, below the kernel's ephemeral range (32768 and up), so another
/// test's outgoing connection cannot take it between this check and the forward's bind.
fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let seed = std::process::id()
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
    loop {
        let n = seed.wrapping_add(NEXT.fetch_add(7919, Ordering::Relaxed));
        let port = 20_000 + (n % 12_000) as u16;
        if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
            return port;
        }
    }
}

/// `%XX` decoding of a query value.
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap()
}

/// The provider: `GET /authorize?…&redirect_uri=X&state=S` → `302 Location: X?code=x&state=S`.
fn fake_provider() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream);
            let mut line = String::new();
            reader.read_line(&mut line).unwrap_or(0);
            let query = line
                .split(' ')
                .nth(1)
                .and_then(|t| t.split_once('?'))
                .map(|(_, q)| q.to_owned())
                .unwrap_or_default();
            let param = |name: &str| {
                query
                    .split('&')
                    .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
                    .map(decode)
                    .unwrap_or_default()
            };
            let location = format!("{}?code=x&state={}", param("redirect_uri"), param("state"));
            let mut stream = reader.into_inner();
            let _ = write!(
                stream,
                "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
    });
    port
}

/// The host's browser: follows the redirects of the URL it is given, keeps the last page.
fn fake_browser(w: &World, provider: u16) {
    w.fake(
        "xdg-open",
        &format!(
            "curl -s -L --max-redirs 3 -m 10 --resolve provider.example:{provider}:127.0.0.1 \
             -o \"$DIR/browser.out\" \"$1\"\nexit 0"
        ),
    );
}

/// The login's side inside: a one-request HTTP server on 127.0.0.1:PORT that records the path it
/// was asked for in `got.txt` and answers `logged in`; `listening` appears once it is bound.
fn login_server(port: u16) -> String {
    format!(
        "python3 -c '
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        open(\"got.txt\", \"w\").write(self.path)
        self.send_response(200)
        self.send_header(\"Content-Length\", \"9\")
        self.end_headers()
        self.wfile.write(b\"logged in\")
    def log_message(self, *args):
        pass
s = http.server.HTTPServer((\"127.0.0.1\", {port}), H)
s.timeout = 20
open(\"listening\", \"w\").close()
s.handle_request()
' &
srv=$!
while [ ! -e listening ]; do sleep 0.02; done"
    )
}

fn authorize_url(provider: u16, callback: &str) -> String {
    let encoded = callback.replace(':', "%3A").replace('/', "%2F");
    format!(
        "http://provider.example:{provider}/authorize?client_id=cli&redirect_uri={encoded}&state=s3cret-state"
    )
}

fn proxy_options() -> [&'static str; 4] {
    ["--network", "proxy", "--allow-host", "provider.example"]
}

#[test]
fn an_oauth_callback_reaches_the_login_inside_and_its_forward_ends_after_the_first_request() {
    let mut w = World::installed();
    if !sandbox_works(&w, "an_oauth_callback_reaches_the_login_inside") {
        return;
    }
    if !Path::new("/usr/bin/python3").exists() || !Path::new("/usr/bin/curl").exists() {
        println!("SKIP: python3 and curl are needed (apt-get install python3 curl)");
        return;
    }
    let provider = fake_provider();
    fake_browser(&w, provider);
    w.start();
    let port = free_port();
    let url = authorize_url(provider, &format!("http://127.0.0.1:{port}/callback"));
    let stop = w.project.join(".stop");
    let script = format!(
        "{}\nxdg-open '{url}'\nwait $srv\ntouch done\nwhile [ ! -e {} ]; do sleep 0.05; done",
        login_server(port),
        stop.display()
    );
    let out = std::thread::scope(|scope| {
        let sandbox =
            scope.spawn(|| run_in_sandbox_with(&w, &proxy_options(), &["sh", "-c", &script], b""));
        let done = w.project.join("done");
        let start = Instant::now();
        while !done.exists() && !sandbox.is_finished() {
            assert!(
                start.elapsed() < Duration::from_secs(40),
                "the login never completed"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(
            fs::read_to_string(w.project.join("got.txt")).unwrap_or_default(),
            "/callback?code=x&state=s3cret-state",
            "the login inside got the provider's redirect"
        );
        assert_eq!(
            fs::read_to_string(w.base().join("browser.out")).unwrap(),
            "logged in"
        );
        // The forward ended after its first answered request, while the session still runs.
        wait_for("the callback forward to end", || {
            TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok()
        });
        fs::write(&stop, "").unwrap();
        sandbox.join().unwrap()
    });
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !text(&out.stderr).contains("warning"),
        "{}",
        text(&out.stderr)
    );
    let log = w.audit_log();
    let line = log
        .lines()
        .find(|l| l.contains("/open ok"))
        .unwrap_or_else(|| panic!("no /open line: {log}"));
    assert!(
        line.contains(&format!("callback=\"127.0.0.1:{port}\""))
            && line.contains("callback_forward=\"ok\""),
        "{line}"
    );
    assert!(
        line.contains(&format!(
            "url=\"http://provider.example:{provider}/authorize\""
        )),
        "{line}"
    );
    for secret in ["client_id", "s3cret-state", "code=", "redirect_uri"] {
        assert!(!log.contains(secret), "{secret} in the audit log: {log}");
    }
}

#[test]
fn a_callback_port_a_host_service_holds_is_not_taken_and_the_open_still_happens() {
    let mut w = World::installed();
    if !sandbox_works(&w, "a_callback_port_a_host_service_holds") {
        return;
    }
    if !Path::new("/usr/bin/curl").exists() {
        println!("SKIP: curl is needed (apt-get install curl)");
        return;
    }
    let provider = fake_provider();
    fake_browser(&w, provider);
    w.start();
    // A host service on the port the sandbox names as its callback.
    let service = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = service.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in service.incoming().flatten() {
            let mut buf = [0u8; 2048];
            let _ = std::io::Read::read(&mut s, &mut buf);
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\nhost service");
        }
    });
    let url = authorize_url(provider, &format!("http://localhost:{port}/callback"));
    let out = run_in_sandbox_with(&w, &proxy_options(), &["xdg-open", &url], b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "xdg-open: warning: the OAuth callback http://localhost:{port} was not forwarded into the sandbox"
        )) && stderr.contains("is in use"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    // Opened all the same, and the browser reached the host's own service, not the sandbox.
    assert_eq!(w.calls().len(), 1, "{:?}", w.calls());
    assert_eq!(
        fs::read_to_string(w.base().join("browser.out")).unwrap(),
        "host service"
    );
    let log = w.audit_log();
    assert!(
        log.contains(&format!("callback=\"localhost:{port}\""))
            && log.contains("callback_forward=\"failed ("),
        "{log}"
    );
}

#[test]
fn a_sandbox_gets_at_most_four_callback_forwards_and_never_a_privileged_port() {
    let mut w = World::installed();
    if !sandbox_works(&w, "a_sandbox_gets_at_most_four_callback_forwards") {
        return;
    }
    w.start();
    let ports: Vec<u16> = (0..5).map(|_| free_port()).collect();
    let mut script = String::new();
    for port in &ports {
        let url = authorize_url(1, &format!("http://127.0.0.1:{port}/cb"));
        script.push_str(&format!("xdg-open '{url}'\n"));
    }
    // Past the shared bucket's burst of 5 at its 10/s: the sixth request waits for a token.
    script.push_str("sleep 0.3\n");
    script.push_str(&format!(
        "xdg-open '{}'\n",
        authorize_url(1, "http://localhost:81/cb")
    ));
    // The default fake opener follows nothing: every forward stays open until the session ends.
    let out = run_in_sandbox_with(&w, &proxy_options(), &["sh", "-c", &script], b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    let warnings: Vec<&str> = stderr.lines().collect();
    assert_eq!(warnings.len(), 2, "{stderr}");
    assert!(
        warnings[0].contains("already holds 4 callback forwards"),
        "{stderr}"
    );
    assert!(warnings[1].contains("below 1024"), "{stderr}");
    let log = w.audit_log();
    assert_eq!(log.matches("callback_forward=\"ok\"").count(), 4, "{log}");
    // The session is over: so are its forwards.
    for port in ports {
        assert!(
            TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok(),
            "{port} left open"
        );
    }
}
