//! Ask mode (`[network] unmatched = "ask"`) with the real binary: curl in a real `--network proxy`
//! sandbox asks for hosts no rule matches, and `airlock network monitor` (line mode, as a script
//! drives it) answers once, for the session, always (the rule written to the project's config and
//! trusted) or deny; a question nobody answers is denied at the timeout; a monitor that leaves
//! mid-question denies it; a monitor speaking nonsense is dropped.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::egress::{World, sandbox_available};
use common::report;

/// An HTTP server on the host's loopback answering `ok` to every request.
fn http_server() -> u16 {
    common::egress::http_server("ok\n")
}

fn world(timeout: u64) -> World {
    World::new(&format!(
        "[network]\npreset = \"deny-all\"\nunmatched = \"ask\"\nask_timeout = {timeout}\n\
         allow = [\"127.0.0.1\"]\n\
         resolve = {{ \"asked.test\" = \"127.0.0.1\", \"other.test\" = \"127.0.0.1\", \
         \"third.test\" = \"127.0.0.1\", \"kept.test\" = \"127.0.0.1\" }}\n"
    ))
}

/// `airlock network monitor` in line mode: its questions come out on a channel.
struct MonitorProcess {
    child: Child,
    stdin: ChildStdin,
    asks: mpsc::Receiver<String>,
}

impl MonitorProcess {
    fn start(w: &World) -> MonitorProcess {
        let mut child = w
            .airlock(&["network", "monitor"])
            .env("PATH", "/usr/bin:/bin")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("monitor");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, asks) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        MonitorProcess { child, stdin, asks }
    }

    /// The next question: (its number, `host:port`).
    fn next(&self, within: Duration) -> Option<(String, String)> {
        let line = self.asks.recv_timeout(within).ok()?;
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(words.first(), Some(&"ask"), "{line}");
        Some((words[1].to_owned(), words[3].to_owned()))
    }

    fn answer(&mut self, n: &str, decision: &str) {
        writeln!(self.stdin, "{n} {decision}").unwrap();
        self.stdin.flush().unwrap();
    }
}

impl Drop for MonitorProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn curl(host: &str, port: u16) -> String {
    format!("curl -s -o /dev/null -w '%{{http_code}}\\n' http://{host}:{port}/")
}

/// Starts `script` in the sandbox in the background.
fn spawn_sandbox(w: &World, script: &str) -> Child {
    w.airlock(&["run", "--", "sh", "-c", script])
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("airlock")
}

fn finish(child: Child) -> (String, std::process::Output) {
    let out = child.wait_with_output().expect("wait");
    (String::from_utf8_lossy(&out.stdout).into_owned(), out)
}

#[test]
fn once_session_deny_and_no_answer_each_do_what_they_say() {
    if !sandbox_available() {
        return;
    }
    let w = world(3);
    let port = http_server();
    let mut monitor = MonitorProcess::start(&w);
    let script = [
        curl("asked.test", port),
        curl("asked.test", port),
        curl("asked.test", port),
        curl("other.test", port),
        curl("other.test", port),
        curl("third.test", port),
    ]
    .join("; ");
    let sandbox = spawn_sandbox(&w, &script);
    let wait = Duration::from_secs(20);
    let (n, target) = monitor.next(wait).expect("the first question");
    assert_eq!(target, format!("asked.test:{port}"));
    monitor.answer(&n, "once");
    let (n, target) = monitor.next(wait).expect("asked again after once");
    assert_eq!(target, format!("asked.test:{port}"));
    monitor.answer(&n, "session");
    // The third request is not asked: the session answer holds.
    let (n, target) = monitor.next(wait).expect("other.test");
    assert_eq!(target, format!("other.test:{port}"));
    monitor.answer(&n, "deny");
    // other.test's second request is denied without a question; third.test is left unanswered.
    let (_, target) = monitor.next(wait).expect("third.test");
    assert_eq!(target, format!("third.test:{port}"));
    let started = Instant::now();
    let (codes, out) = finish(sandbox);
    assert_eq!(codes, "200\n200\n200\n403\n403\n403\n", "{}", report(&out));
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "the timeout was waited for"
    );
    assert!(
        monitor.next(Duration::from_millis(200)).is_none(),
        "no more questions"
    );
    let log = serde_json::to_string(&w.log()).unwrap();
    assert!(
        log.contains("asked: once") && log.contains("asked: session"),
        "{log}"
    );
    assert!(
        log.contains("not answered in airlock network monitor within 3 s"),
        "{log}"
    );
}

#[test]
fn always_writes_the_rule_to_the_project_config_and_trusts_it() {
    if !sandbox_available() {
        return;
    }
    let w = world(20);
    let port = http_server();
    let mut monitor = MonitorProcess::start(&w);
    let sandbox = spawn_sandbox(&w, &curl("kept.test", port));
    let (n, _) = monitor.next(Duration::from_secs(20)).expect("question");
    monitor.answer(&n, "always");
    let (codes, out) = finish(sandbox);
    assert_eq!(codes, "200\n", "{}", report(&out));
    let file = w.project.join(".airlock.toml");
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    assert!(text.contains("kept.test"), "{text}");
    drop(monitor);
    // The next run allows it by rule, with nobody asked (the file is trusted as written).
    let o = w.sh(&[], &curl("kept.test", port));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "200\n",
        "{}",
        report(&o)
    );
    let log = w.log();
    assert!(
        log.iter().any(|l| l["rule"] == "kept.test"),
        "{:?}",
        log.last()
    );
}

fn monitor_socket(w: &World) -> Option<PathBuf> {
    let dir = w.home.join(".local/state/airlock/monitor");
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Some(sock) = std::fs::read_dir(&dir)
            .ok()
            .and_then(|mut d| d.find_map(|e| e.ok().map(|e| e.path())))
        {
            return Some(sock);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Reads lines until one holds `what`.
fn read_until(stream: &mut BufReader<UnixStream>, what: &str) -> String {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            stream.read_line(&mut line).unwrap() > 0,
            "closed before {what}"
        );
        if line.contains(what) {
            return line;
        }
    }
}

#[test]
fn a_monitor_leaving_mid_question_denies_it_and_nonsense_is_dropped() {
    if !sandbox_available() {
        return;
    }
    let w = world(60);
    let port = http_server();
    let sandbox = spawn_sandbox(
        &w,
        &format!("{}; {}", curl("asked.test", port), curl("other.test", port)),
    );
    let sock = monitor_socket(&w).expect("the session's monitor socket");
    let mut stream = BufReader::new(UnixStream::connect(&sock).unwrap());
    let hello = read_until(&mut stream, "hello");
    assert!(hello.contains("\"timeout_secs\":60"), "{hello}");
    read_until(&mut stream, "asked.test");
    let started = Instant::now();
    drop(stream); // the only monitor leaves: denied now, not in 60 s
    // A second monitor sends nonsense for other.test's question: it is dropped, and as the last
    // monitor its open question is denied too.
    let mut second = BufReader::new(UnixStream::connect(&sock).unwrap());
    read_until(&mut second, "other.test");
    second
        .get_mut()
        .write_all(b"{\"id\":1,\"decision\":\"once\",\"extra\":true}\n")
        .unwrap();
    let mut rest = String::new();
    let _ = second.read_to_string(&mut rest);
    let (codes, out) = finish(sandbox);
    assert_eq!(codes, "403\n403\n", "{}", report(&out));
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    // The session's socket goes with the session.
    assert!(!sock.exists(), "{} left behind", sock.display());
}

#[test]
fn bad_ask_timeouts_are_refused_naming_the_file() {
    for value in ["0", "601"] {
        let w = World::new(&format!(
            "[network]\nunmatched = \"ask\"\nask_timeout = {value}\n"
        ));
        let o = w.sh(&[], "true");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success()
                && err.contains("config.toml")
                && err.contains(&format!("ask_timeout = {value} is not valid")),
            "{}",
            report(&o)
        );
    }
}

/// The monitor on a real terminal (tmux): the question drawn, one key answers it.
#[test]
fn the_monitor_answers_with_one_key_on_a_terminal() {
    if !sandbox_available() {
        return;
    }
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("skipped: tmux is not installed (scripts/test installs it)");
        return;
    }
    let w = world(30);
    let port = http_server();
    let env = [
        ("HOME", w.home.display().to_string()),
        ("TERM", "xterm".into()),
    ];
    let monitor = [common::AIRLOCK, "network", "monitor"];
    let tmux = common::tmux::Tmux::start(w.root.join("tmux.sock"), &w.project, &env, &monitor);
    let sandbox = spawn_sandbox(&w, &curl("asked.test", port));
    let deadline = Instant::now() + Duration::from_secs(20);
    while !tmux.screen().contains("wants asked.test") {
        assert!(
            Instant::now() < deadline,
            "no question drawn:\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    tmux.key("s");
    let (codes, out) = finish(sandbox);
    assert_eq!(codes, "200\n", "{}\n{}", report(&out), tmux.screen());
    tmux.key("q");
}
