//! Port forwards end to end, the forwards a launch makes: `--publish` and `[[network.ports]]`
//! (inbound and outbound) with real listeners in real sandboxes, and the attacks on them: a port in
//! use, other local users, bad config. `ports_sessions.rs` has `airlock forward`, `airlock
//! sessions` and the session's end; `tests/bridge/callbacks.rs` the OAuth callbacks; the
//! supervisor's side alone is in `airlock-sandbox`'s `ports::tests`.

mod common;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;

use common::TestHome;
use common::ports::*;
use common::users::{as_user, other_user};

#[test]
fn publish_opens_a_sandbox_server_on_the_hosts_loopback_only_until_the_session_ends() {
    if !available() {
        return;
    }
    let h = site("from the sandbox\n");
    let port = free_port();
    let publish = format!("{port}:8000");
    let run = Running::start(&h, &["--publish", &publish], &http_server(8000));
    wait_for("the published server", || get(port, "/").is_some());
    assert_eq!(get(port, "/").as_deref(), Some("from the sandbox\n"));
    // 127.0.0.1 only: one listener, on 0100007F, none on 0.0.0.0.
    assert_eq!(listeners_of(port), [format!("0100007F:{port:04X}")]);
    // Control: the sandbox's own port is not on the host's loopback.
    assert!(get(8000, "/").is_none_or(|b| b != "from the sandbox\n"));
    // Any local user can connect, as to any dev server (documented).
    if let Some(user) = other_user() {
        let mut curl = Command::new("curl");
        curl.args(["-s", "-m", "5", &format!("http://127.0.0.1:{port}/")]);
        as_user(&mut curl, user);
        let out = curl.output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "from the sandbox\n");
    }
    let helpers = helpers_of(run.pid());
    assert_eq!(helpers.len(), 1, "one helper makes sockets in the sandbox");
    let (status, stderr) = run.stop();
    assert!(status.success(), "{stderr}");
    // Nothing is left: the port is free, the helper gone.
    assert!(port_is_free(port));
    for helper in helpers {
        assert!(
            !Path::new(&format!("/proc/{helper}")).exists(),
            "helper {helper} left behind"
        );
    }
}

#[test]
fn two_sessions_with_their_own_ports_both_work_and_one_port_twice_is_refused_before_the_run() {
    if !available() {
        return;
    }
    let (a, b) = (site("a\n"), site("b\n"));
    let (pa, pb) = (free_port(), free_port());
    let run_a = Running::start(
        &a,
        &["--publish", &format!("{pa}:8000")],
        &http_server(8000),
    );
    let run_b = Running::start(
        &b,
        &["--publish", &format!("{pb}:8000")],
        &http_server(8000),
    );
    wait_for("both servers", || {
        get(pa, "/").is_some() && get(pb, "/").is_some()
    });
    assert_eq!(
        (get(pa, "/").unwrap(), get(pb, "/").unwrap()),
        ("a\n".into(), "b\n".into())
    );
    let c = site("c\n");
    let out = c
        .airlock(&[
            "run",
            "--publish",
            &format!("{pa}:8000"),
            "--",
            "touch",
            "ran",
        ])
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", common::report(&out));
    let err = common::stderr(&out);
    assert!(
        err.contains(&format!(
            "--publish {pa}:8000: the host's 127.0.0.1:{pa} is in use"
        )),
        "{err}"
    );
    assert!(!c.project.join("ran").exists(), "nothing ran");
    assert_eq!(
        get(pa, "/").as_deref(),
        Some("a\n"),
        "session a keeps its port"
    );
    drop((run_a, run_b));
}

#[test]
fn a_port_a_host_service_listens_on_is_refused_not_shared() {
    if !available() {
        return;
    }
    for addr in [Ipv4Addr::LOCALHOST, Ipv4Addr::UNSPECIFIED] {
        let service = TcpListener::bind((addr, 0)).unwrap();
        let port = service.local_addr().unwrap().port();
        let h = site("x");
        let out = h
            .airlock(&["run", "--publish", &port.to_string(), "--", "touch", "ran"])
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(125), "{}", common::report(&out));
        assert!(
            common::stderr(&out).contains("is in use"),
            "{}",
            common::report(&out)
        );
        assert!(!h.project.join("ran").exists());
        // The host service still gets its clients.
        let _c = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).unwrap();
        service.set_nonblocking(true).unwrap();
        wait_for("the service's client", || service.accept().is_ok());
    }
}

/// A host service on 127.0.0.1 answering every request with `body`.
fn host_service(body: &'static str) -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            let _ = write!(
                s,
                "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

#[test]
fn outbound_reaches_a_named_host_service_only_when_a_rule_names_it() {
    if !available() {
        return;
    }
    let port = host_service("host service");
    let h = TestHome::new("work/app");
    let probe = format!(
        "curl -s -m 5 http://127.0.0.1:5432/; echo \" [$?]\"; curl -s -m 5 http://127.0.0.1:{port}/; echo \" [$?]\""
    );
    // Control first: without a rule neither the sandbox port nor the host's is reachable.
    let out = h.run(&["run", "--", "sh", "-c", &probe]);
    assert_eq!(
        common::stdout(&out),
        " [7]\n [7]\n",
        "{}",
        common::report(&out)
    );
    let config = h.config(&format!(
        "[[network.ports]]\nhost = {port}\nsandbox = 5432\ndirection = \"out\"\n"
    ));
    let out = h.run(&["run", "--", "sh", "-c", &probe]);
    assert_eq!(
        common::stdout(&out),
        "host service [0]\n [7]\n",
        "{}",
        common::report(&out)
    );
    let err = common::stderr(&out);
    let warning = format!(
        "warning: {}: [[network.ports]] #1 (host = {port}, sandbox = 5432, direction = \"out\") lets \
         the sandbox reach the host's 127.0.0.1:{port}",
        config.display()
    );
    assert_eq!(err.matches(&warning).count(), 1, "warned once: {err}");
    // The same in --network none.
    let out = h.run(&["run", "--network", "none", "--", "sh", "-c", &probe]);
    assert_eq!(
        common::stdout(&out),
        "host service [0]\n [7]\n",
        "{}",
        common::report(&out)
    );
}

#[test]
fn bad_ports_are_refused_with_the_file_the_key_and_the_form() {
    if !available() {
        return;
    }
    let h = TestHome::new("work/app");
    let entry = |body: &str| format!("[[network.ports]]\n{body}\n");
    let cases = [
        (
            entry("host = 0\nsandbox = 1\ndirection = \"in\""),
            "#1: host = 0 is not valid; expected a port number from 1 to 65535",
        ),
        (
            entry("host = 65536\nsandbox = 1\ndirection = \"in\""),
            "host = 65536 is not valid",
        ),
        (
            entry("host = 3000\ndirection = \"in\""),
            "#1 has no `sandbox`",
        ),
        (
            entry("host = 3000\nsandbox = 3000"),
            "#1 has no `direction`",
        ),
        (
            entry("host = 3000\nsandbox = 3000\ndirection = \"both\""),
            "direction = \"both\" is not valid; expected \"in\" or \"out\"",
        ),
        (
            entry("host = 3000\nsandbox = 3000\ndirection = \"in\"")
                + &entry("host = 3000\nsandbox = 4000\ndirection = \"in\""),
            "#2 (host = 3000, sandbox = 4000, direction = \"in\") clashes with",
        ),
        (
            entry("host = 3000\nsandbox = 3000\ndirection = \"in\"")
                + &entry("host = 3000\nsandbox = 3000\ndirection = \"in\""),
            "the same forward twice",
        ),
        (
            entry("host = 9000\nsandbox = 3128\ndirection = \"in\""),
            "is the egress proxy's",
        ),
    ];
    for (text, says) in cases {
        let file = h.config(&text);
        let out = h.run(&["run", "--", "touch", "ran"]);
        assert_eq!(
            out.status.code(),
            Some(125),
            "{text}: {}",
            common::report(&out)
        );
        let err = common::stderr(&out);
        assert!(err.contains(says), "{says:?}: {err}");
        assert!(
            err.contains(&file.display().to_string()),
            "names the file: {err}"
        );
        assert!(err.contains("[[network.ports]]"), "names the table: {err}");
        assert!(!h.project.join("ran").exists(), "nothing ran for {text}");
    }
    h.config("");
    for (flag, says) in [
        ("0", "is not a port from 1 to 65535"),
        ("70000", "is not a port from 1 to 65535"),
        ("abc", "is not a port number"),
        ("80:", "is not a port number"),
    ] {
        let out = h.run(&["run", "--publish", flag, "--", "touch", "ran"]);
        assert_eq!(out.status.code(), Some(2), "{}", common::report(&out));
        let err = common::stderr(&out);
        assert!(
            err.contains(says) && err.contains("HOST[:SANDBOX]"),
            "{flag}: {err}"
        );
    }
    let out = h.run(&[
        "run",
        "--network",
        "host",
        "--publish",
        "3000",
        "--",
        "touch",
        "ran",
    ]);
    assert_eq!(out.status.code(), Some(125), "{}", common::report(&out));
    assert!(common::stderr(&out).contains("not needed with --network host"));
    assert!(!h.project.join("ran").exists());
}
